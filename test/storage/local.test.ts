import { mkdir, open, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LocalOutputStore } from '../../src/storage/local-output.js';
import { LocalSourceStore } from '../../src/storage/local-source.js';
import { StorageError } from '../../src/storage/types.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-storage-');

/** Every file under `dir`, relative, sorted (temp files included: the tests look for leftovers). */
async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

/** FileHandle.prototype, to count fsyncs (files and folders alike go through FileHandle.sync). */
async function handleProto(): Promise<{ sync(): Promise<void> }> {
  const handle = await open(tmp.dir, 'r');
  await handle.close();
  return Object.getPrototypeOf(handle) as { sync(): Promise<void> };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('LocalOutputStore', () => {
  it('puts text, bytes and streams under their keys, in the folder layout the keys name', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await store.put('report.json', '{"a":1}');
    await store.put('results/k1.jpg', new Uint8Array([1, 2, 3]), { contentType: 'image/jpeg', sha256: 'x' });
    async function* lines() {
      yield 'a\n';
      yield Buffer.from('b\n');
    }
    const put = await store.put('thumbs/k1.out.webp', lines(), { durable: false });
    expect(put).toMatchObject({ key: 'thumbs/k1.out.webp', size: 4 });
    expect(await files(tmp.dir)).toEqual(['report.json', 'results/k1.jpg', 'thumbs/k1.out.webp']);
    expect(await readFile(tmp.file('thumbs/k1.out.webp'), 'utf8')).toBe('a\nb\n');
    expect(store.describe('report.html')).toBe(path.join(tmp.dir, 'report.html'));
  });

  it('replaces an object whole, and with ifAbsent refuses an existing key with object_exists, leaving it as it was', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await store.put('results/k1.jpg', 'first');
    await store.put('results/k1.jpg', 'second');
    expect(await readFile(tmp.file('results/k1.jpg'), 'utf8')).toBe('second');
    const refused = await store.put('results/k1.jpg', 'third', { ifAbsent: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StorageError);
    expect(refused).toMatchObject({ code: 'object_exists', key: 'results/k1.jpg' });
    expect(await readFile(tmp.file('results/k1.jpg'), 'utf8')).toBe('second');
    // A new key is created with ifAbsent, and no temp file is left by either.
    await store.put('results/k2.jpg', 'new', { ifAbsent: true });
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg', 'results/k2.jpg']);
  });

  it('head, get and list see objects, not temp or staged files; get of a missing key is object_not_found', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await store.put('results/a.jpg', 'aa');
    await store.put('results/b.png', 'bbb');
    await store.put('thumbs/a.out.webp', 't');
    await store.put('report.json', '{}');
    const staged = await store.stage('results/c');
    await writeFile(staged.file, 'partial');
    await writeFile(tmp.file('results/report.json.123.abcdef01.tmp'), 'torn');

    expect(await store.head('results/b.png')).toMatchObject({ key: 'results/b.png', size: 3 });
    expect(await store.head('results/none.jpg')).toBeNull();
    expect(await store.head('results')).toBeNull();
    expect(await text(await store.get('results/a.jpg'))).toBe('aa');
    await expect(store.get('results/none.jpg')).rejects.toMatchObject({ code: 'object_not_found' });

    const keys = async (prefix: string) => {
      const found: string[] = [];
      for await (const o of store.list(prefix)) found.push(o.key);
      return found.sort();
    };
    expect(await keys('results/')).toEqual(['results/a.jpg', 'results/b.png']);
    expect(await keys('results/a')).toEqual(['results/a.jpg']);
    expect(await keys('')).toEqual(['report.json', 'results/a.jpg', 'results/b.png', 'thumbs/a.out.webp']);
    expect(await keys('nothing/')).toEqual([]);

    await store.delete('results/a.jpg');
    await store.delete('results/a.jpg');
    expect(await store.head('results/a.jpg')).toBeNull();
  });

  it('refuses keys that are not relative, normalised and slash-separated', async () => {
    const store = new LocalOutputStore(tmp.dir);
    for (const key of ['', '/etc/passwd', '../x', 'results/../../x', 'a//b', './a', 'a\\b', 'results/']) {
      await expect(store.put(key, 'x')).rejects.toMatchObject({ code: 'bad_key' });
    }
    expect(await files(tmp.dir)).toEqual([]);
  });

  it('fsyncs the temp file and the folder of a durable put, neither with durable: false', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await mkdir(tmp.file('results'));
    const sync = vi.spyOn(await handleProto(), 'sync');
    await store.put('results/k1.jpg', 'x');
    // The file before the rename, the folder after it.
    expect(sync).toHaveBeenCalledTimes(2);
    sync.mockClear();
    await store.put('thumbs/k1.webp', 'x', { durable: false });
    expect(sync).not.toHaveBeenCalled();
    sync.mockClear();
    const writer = await store.writer('report.csv');
    await writer.write('a,b\n');
    await writer.commit();
    expect(sync).toHaveBeenCalledTimes(2);
  });

  it('removes its temp file when the body fails, the write fails or the writer aborts, and keeps the old object', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await store.put('report.json', 'old');
    async function* failing() {
      yield 'half';
      throw new Error('source broke');
    }
    await expect(store.put('report.json', failing())).rejects.toThrow('source broke');
    expect(await files(tmp.dir)).toEqual(['report.json']);

    const writer = await store.writer('report.json');
    await writer.write('x'.repeat(200_000));
    expect((await files(tmp.dir)).length).toBe(2);
    await writer.abort();
    expect(await files(tmp.dir)).toEqual(['report.json']);
    expect(await readFile(tmp.file('report.json'), 'utf8')).toBe('old');

    // A commit that cannot rename (the target is a folder) leaves no temp file either.
    await mkdir(tmp.file('taken/report.json'), { recursive: true });
    await expect(store.put('taken/report.json', 'x')).rejects.toMatchObject({ code: 'EISDIR' });
    expect(await files(tmp.dir)).toEqual(['report.json']);
  });

  it('streams a writer in pieces and commits it whole', async () => {
    const store = new LocalOutputStore(tmp.dir);
    const writer = await store.writer('plan.jsonl');
    for (let i = 0; i < 5000; i++) await writer.write(`${JSON.stringify(['k', i])}\n`);
    expect(await store.head('plan.jsonl')).toBeNull();
    const stored = await writer.commit();
    const body = await readFile(tmp.file('plan.jsonl'), 'utf8');
    expect(body.split('\n')).toHaveLength(5001);
    expect(stored).toMatchObject({ key: 'plan.jsonl', size: Buffer.byteLength(body) });
  });

  it('stages a file beside its target and commits it under the key its bytes chose, or discards it', async () => {
    const store = new LocalOutputStore(tmp.dir);
    const staged = await store.stage('results/k1');
    expect(path.relative(tmp.dir, staged.file)).toBe(path.join('results', `.k1.${process.pid}.part`));
    await writeFile(staged.file, 'jpeg bytes');
    const stored = await staged.commit('results/k1.jpg', { sha256: 'abc' });
    expect(stored).toMatchObject({ key: 'results/k1.jpg', size: 10 });
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg']);

    const again = await store.stage('results/k1');
    await writeFile(again.file, 'other');
    await expect(again.commit('results/k1.jpg', { ifAbsent: true })).rejects.toMatchObject({
      code: 'object_exists',
    });
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg']);
    expect(await readFile(tmp.file('results/k1.jpg'), 'utf8')).toBe('jpeg bytes');

    // A key the store refuses is no commit either: the staged file is gone all the same.
    const refused = await store.stage('results/k3');
    await writeFile(refused.file, 'x');
    await expect(refused.commit('../k3.jpg')).rejects.toMatchObject({ code: 'bad_key' });
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg']);

    const dropped = await store.stage('results/k2');
    await writeFile(dropped.file, 'x');
    await dropped.discard();
    await dropped.discard();
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg']);
  });

  it('sweeps staged files a killed writer left, all of them or only those idle long enough', async () => {
    const store = new LocalOutputStore(tmp.dir);
    await store.put('results/k1.jpg', 'x');
    const old = await store.stage('results/old');
    await writeFile(old.file, 'x');
    const past = new Date(Date.now() - 60_000);
    await utimes(old.file, past, past);
    const fresh = await store.stage('results/fresh');
    await writeFile(fresh.file, 'x');

    expect(await store.sweep('results/', 30_000)).toEqual([path.basename(old.file)]);
    expect(await store.sweep('results/')).toEqual([path.basename(fresh.file)]);
    expect(await files(tmp.dir)).toEqual(['results/k1.jpg']);
    expect(await store.sweep('missing/')).toEqual([]);
  });

  it('resolves relative links from its root, inside it or beside it', () => {
    const store = new LocalOutputStore(tmp.file('merged'));
    expect(store.refOf('results/k1.jpg')).toBe(tmp.file('merged/results/k1.jpg'));
    expect(store.refOf('../shard-1/results/k1.jpg')).toBe(tmp.file('shard-1/results/k1.jpg'));
  });
});

describe('LocalSourceStore', () => {
  it('stats and opens a file: size, mtime, a version that changes with it, its bytes, stream and head', async () => {
    const sources = new LocalSourceStore();
    const file = tmp.file('k1.jpg');
    await writeFile(file, 'abcdef');
    const info = await sources.stat(file);
    const st = await stat(file);
    expect(info).toEqual({ ref: file, size: 6, mtimeMs: st.mtimeMs, version: `6-${st.mtimeMs}` });
    const opened = await sources.open(file);
    expect(opened.localPath).toBe(file);
    expect((await opened.bytes()).toString()).toBe('abcdef');
    expect(await text(opened.stream())).toBe('abcdef');
    expect((await opened.head(4)).toString()).toBe('abcd');
    expect((await opened.head(100)).toString()).toBe('abcdef');

    const later = new Date(st.mtimeMs + 5000);
    await utimes(file, later, later);
    expect((await sources.stat(file)).version).not.toBe(info.version);
  });

  it("fails with the file system's own codes: ENOENT for a missing file, EISDIR for a folder", async () => {
    const sources = new LocalSourceStore();
    await expect(sources.open(tmp.file('none.jpg'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(sources.stat(tmp.dir)).rejects.toMatchObject({ code: 'EISDIR' });
  });
});
