import { access, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createPreflighter,
  type PreflightOptions,
  type PreflightWorkEvent,
} from '../../src/preflight/index.js';
import { useTempDir } from '../helpers/tmp.js';
import { noise } from '../support/images.js';
import { ok, photo } from './helpers.js';

const tmp = useTempDir('preflight-test-', 'suite');
let tiff: Buffer;
let jpeg: Buffer;

beforeAll(async () => {
  tiff = await photo(640, 480).tiff().toBuffer();
  jpeg = await photo(640, 480).jpeg().toBuffer();
});

/** A preflighter that records its work, so tests count work instead of timing it. */
function recording(options: PreflightOptions = {}) {
  const events: PreflightWorkEvent[] = [];
  const pre = createPreflighter({ ...options, onWork: (event) => events.push(event) });
  const count = (kind: PreflightWorkEvent['kind']) => events.filter((e) => e.kind === kind).length;
  return { pre, events, count };
}

describe('memoisation', () => {
  it('prepares one path once however many items (styles) ask for it', async () => {
    const file = await tmp.write('styles.tif', tiff);
    const { pre, count } = recording({ cacheDir: tmp.file('cache-a') });
    const results = await Promise.all([
      pre.prepare(file),
      pre.prepare(file),
      pre.prepare(`${tmp.dir}/./styles.tif`),
    ]);
    expect(count('read')).toBe(1);
    expect(count('decode')).toBe(1);
    expect(results[1]).toBe(results[0]);
    expect(results[2]).toBe(results[0]);
    await pre.prepare(file);
    expect(count('read')).toBe(1);
  });

  it('prepares identical bytes at two paths once, each keeping its own name', async () => {
    const a = await tmp.write('same-a.tif', tiff);
    const b = await tmp.write('same-b.tiff', tiff);
    const { pre, count } = recording({ cacheDir: tmp.file('cache-b') });
    const [ra, rb] = (await Promise.all([pre.prepare(a), pre.prepare(b)])).map(ok);
    expect(count('read')).toBe(2); // each path must be hashed to know it is the same
    expect(count('decode')).toBe(1);
    expect(ra?.path).toBe(rb?.path); // one prepared file
    expect([ra?.filename, rb?.filename]).toEqual(['same-a.jpg', 'same-b.jpg']);
  });

  it('gives each path of identical as-is bytes its own upload path', async () => {
    const a = await tmp.write('twin-a.jpg', jpeg);
    const b = await tmp.write('twin-b.jpg', jpeg);
    const { pre, count } = recording({ cacheDir: tmp.file('cache-c') });
    const ra = ok(await pre.prepare(a));
    const rb = ok(await pre.prepare(b));
    expect(count('decode')).toBe(1);
    expect([ra.path, rb.path]).toEqual([a, b]);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const { pre, count } = recording({ cacheDir: tmp.file('cache-d') });
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(pre.prepare(await tmp.write('abort.jpg', jpeg), controller.signal)).rejects.toThrow('stop');
    expect(count('read')).toBe(0);
  });

  it('skips queued work whose callers all gave up, and can do it later', async () => {
    const { pre, events, count } = recording({ cacheDir: tmp.file('cache-e'), concurrency: 1 });
    const busy = await tmp.write('busy.png', await noise(1500, 1500).png().toBuffer());
    const later = await tmp.write('later.tif', tiff);
    const controller = new AbortController();
    const first = pre.prepare(busy);
    const second = pre.prepare(later, controller.signal);
    controller.abort();
    await expect(second).rejects.toMatchObject({ name: 'AbortError' });
    ok(await first);
    expect(events.map((e) => e.path)).not.toContain(later);
    ok(await pre.prepare(later));
    expect(count('decode')).toBe(2);
  });

  it('lets one caller abort without cancelling the work for another', async () => {
    const { pre } = recording({ cacheDir: tmp.file('cache-f') });
    const file = await tmp.write('shared.tif', tiff);
    const controller = new AbortController();
    const patient = pre.prepare(file);
    const impatient = pre.prepare(file, controller.signal);
    controller.abort();
    await expect(impatient).rejects.toMatchObject({ name: 'AbortError' });
    expect(ok(await patient).action).toBe('converted');
  });
});

describe('disk cache', () => {
  it('a second preflighter on the same cacheDir does no image work', async () => {
    const cacheDir = tmp.file('cache-g');
    const converted = await tmp.write('cached.tif', tiff);
    const asIs = await tmp.write('cached.jpg', jpeg);
    const first = recording({ cacheDir });
    const before = [ok(await first.pre.prepare(converted)), ok(await first.pre.prepare(asIs))];
    expect(first.count('decode')).toBe(2);

    const second = recording({ cacheDir });
    const after = [ok(await second.pre.prepare(converted)), ok(await second.pre.prepare(asIs))];
    expect(second.count('decode')).toBe(0);
    expect(second.count('cache-hit')).toBe(2);
    expect(after).toEqual(before);
    const names = await readdir(cacheDir);
    expect(names.filter((n) => n.endsWith('.jpg'))).toHaveLength(1); // nothing written for the as-is image
    expect(names.filter((n) => n.endsWith('.json'))).toHaveLength(2);
    expect(names.some((n) => n.endsWith('.tmp'))).toBe(false);
  });

  it('prepares again when the cached file is gone or the options differ', async () => {
    const cacheDir = tmp.file('cache-h');
    const file = await tmp.write('again.tif', tiff);
    const first = ok(await createPreflighter({ cacheDir }).prepare(file));
    await rm(first.path);
    const second = recording({ cacheDir });
    expect(ok(await second.pre.prepare(file)).prepared).toEqual(first.prepared);
    expect(second.count('decode')).toBe(1);
    const other = recording({ cacheDir, maxSide: 320 });
    expect(ok(await other.pre.prepare(file)).prepared).toMatchObject({ width: 320, height: 240 });
    expect(other.count('decode')).toBe(1);
  });

  it('prepares again when the cached file was zero-filled at its size (written without fsync, then a power cut)', async () => {
    const cacheDir = tmp.file('cache-z');
    const file = await tmp.write('zeroed.tif', tiff);
    const first = ok(await createPreflighter({ cacheDir }).prepare(file));
    await writeFile(first.path, Buffer.alloc(first.prepared.bytes));
    const second = recording({ cacheDir });
    const again = ok(await second.pre.prepare(file));
    expect(second.count('decode')).toBe(1);
    expect((await readFile(again.path)).some((byte) => byte !== 0)).toBe(true);
  });

  it('without cacheDir keeps prepared files in its own temp folder until close()', async () => {
    const { pre } = recording();
    const result = ok(await pre.prepare(await tmp.write('temp.tif', tiff)));
    await access(result.path);
    await pre.close();
    await expect(access(result.path)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
