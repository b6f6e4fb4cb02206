import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createS3Client, type S3Access } from '../../../src/storage/s3/client.js';
import { isStoreUnavailable } from '../../../src/storage/s3/output-errors.js';
import { S3OutputStore } from '../../../src/storage/s3/output-store.js';
import { isOutputUrl, parseOutputUrl } from '../../../src/storage/s3/output-url.js';
import { StorageError } from '../../../src/storage/types.js';
import {
  FAKE_KEY_ID,
  FAKE_SECRET,
  startFauxqsServer,
  startS3rverServer,
  type TestS3Server,
} from '../../support/s3-servers.js';

const BUCKET = 'kitchen';

function accessFor(endpoint: string, keyId = 'S3RVER', secret = 'S3RVER', maxAttempts = 2): S3Access {
  vi.stubEnv('AWS_ACCESS_KEY_ID', keyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', secret);
  return createS3Client(
    {
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: keyId,
      AWS_SECRET_ACCESS_KEY: secret,
    },
    { maxAttempts },
  );
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function rejection(promise: Promise<unknown>): Promise<StorageError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StorageError);
  return error as StorageError;
}

describe('parseOutputUrl', () => {
  it('splits bucket and prefix verbatim and ends the prefix with a slash', () => {
    expect(parseOutputUrl('s3://kitchen/runs/a #1/')).toEqual({ bucket: 'kitchen', prefix: 'runs/a #1/' });
    expect(parseOutputUrl('s3://kitchen/runs/a?b')).toEqual({ bucket: 'kitchen', prefix: 'runs/a?b/' });
    expect(parseOutputUrl('s3://kitchen')).toEqual({ bucket: 'kitchen', prefix: '' });
    expect(parseOutputUrl('s3://kitchen/')).toEqual({ bucket: 'kitchen', prefix: '' });
    expect(isOutputUrl('s3://kitchen/x/')).toBe(true);
    expect(isOutputUrl('/tmp/out')).toBe(false);
  });

  it('refuses other schemes, bad buckets and prefixes with empty or dot segments', () => {
    expect(() => parseOutputUrl('/tmp/out')).toThrow(/not an S3 output location/);
    expect(() => parseOutputUrl('s3://a/x/')).toThrow(/bucket name/);
    expect(() => parseOutputUrl('s3://kitchen/runs//a/')).toThrow(/prefix/);
    expect(() => parseOutputUrl('s3://kitchen/runs/../a/')).toThrow(/prefix/);
  });
});

describe('S3OutputStore on s3rver', () => {
  let server: TestS3Server;
  let cacheDir: string;
  let store: S3OutputStore;
  let access: S3Access;

  beforeAll(async () => {
    server = await startS3rverServer([BUCKET]);
  });
  afterAll(() => server.close());
  beforeEach(async () => {
    cacheDir = await mkdtemp(path.join(tmpdir(), 'kb-s3out-'));
    access = accessFor(server.endpoint);
    store = new S3OutputStore({
      access,
      bucket: BUCKET,
      prefix: `runs/${path.basename(cacheDir)}/`,
      cacheDir,
    });
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(cacheDir, { recursive: true, force: true });
  });

  it('names its location and keys as s3:// references', () => {
    const run = `runs/${path.basename(cacheDir)}/`;
    expect(store.location).toBe(`s3://kitchen/${run}`);
    expect(store.describe('results/k1.jpg')).toBe(`s3://kitchen/${run}results/k1.jpg`);
  });

  it('puts text, bytes and streams under the prefix with content type and sha256 metadata, and reads them back', async () => {
    const stored = await store.put('report.json', '{"rows":[]}', {
      contentType: 'application/json',
      sha256: 'ab12',
    });
    expect(stored).toMatchObject({ key: 'report.json', size: 11, sha256: 'ab12' });
    await store.put('bytes.bin', new Uint8Array([1, 2, 3]));
    await store.put('streamed.txt', Readable.from(['a', Buffer.from('b'), 'c']));
    const raw = await access.client.send(
      new HeadObjectCommand({ Bucket: BUCKET, Key: `${store.prefix}report.json` }),
    );
    expect(raw.ContentType).toBe('application/json');
    expect(raw.Metadata).toEqual({ sha256: 'ab12' });
    expect(await text(await store.get('report.json'))).toBe('{"rows":[]}');
    expect(await text(await store.get('streamed.txt'))).toBe('abc');
    expect(await store.head('bytes.bin')).toMatchObject({ key: 'bytes.bin', size: 3 });
    const head = await store.head('report.json');
    expect(head?.sha256).toBe('ab12');
    expect(head?.mtimeMs).toBeGreaterThan(0);
    expect(await readdir(path.join(cacheDir, 'staging'))).toEqual([]);
  });

  it('answers a missing key with object_not_found on get and null on head, and deletes', async () => {
    expect((await rejection(store.get('nope.json'))).code).toBe('object_not_found');
    expect(await store.head('nope.json')).toBeNull();
    await store.put('gone.txt', 'x');
    await store.delete('gone.txt');
    await store.delete('gone.txt');
    expect(await store.head('gone.txt')).toBeNull();
  });

  it('refuses keys that are not relative normalised paths', async () => {
    expect((await rejection(store.put('../x', 'x'))).code).toBe('bad_key');
    expect((await rejection(store.put('a//b', 'x'))).code).toBe('bad_key');
  });

  it('lists keys relative to the prefix, only under the folder asked', async () => {
    await store.put('thumbs/a.webp', 'a');
    await store.put('thumbs/b.webp', 'bb');
    await store.put('results/k1.jpg', 'k');
    const thumbs = await collect(store.list('thumbs/'));
    expect(thumbs.map((o) => [o.key, o.size]).sort()).toEqual([
      ['thumbs/a.webp', 1],
      ['thumbs/b.webp', 2],
    ]);
    expect((await collect(store.list(''))).length).toBe(3);
  });

  it('writer spools text to a staged file in 64 KiB writes and PUTs it on commit', async () => {
    const writer = await store.writer('report.json', { contentType: 'application/json' });
    const line = `${'x'.repeat(99)}\n`;
    for (let i = 0; i < 20_000; i++) await writer.write(line);
    // 2 MB written: it is on disk in the staging folder, not held as one string.
    const [staged] = await readdir(path.join(cacheDir, 'staging'));
    expect((await stat(path.join(cacheDir, 'staging', staged as string))).size).toBeGreaterThan(1_900_000);
    for (let i = 0; i < 30_000; i++) await writer.write(line);
    const stored = await writer.commit();
    expect(stored.size).toBe(5_000_000);
    expect(await readdir(path.join(cacheDir, 'staging'))).toEqual([]);
    const body = await text(await store.get('report.json'));
    expect(body.length).toBe(5_000_000);
    expect(body.endsWith(line)).toBe(true);
  });

  it('writer abort removes the spool and stores nothing', async () => {
    const writer = await store.writer('aborted.json');
    await writer.write('partial');
    await writer.abort();
    expect(await readdir(path.join(cacheDir, 'staging'))).toEqual([]);
    expect(await store.head('aborted.json')).toBeNull();
  });

  it('stage → commit PUTs the file and keeps it as the cached copy that refOf and get use', async () => {
    const staged = await store.stage('results/k1');
    expect(path.dirname(staged.file)).toBe(path.join(cacheDir, 'staging'));
    await writeFile(staged.file, 'JPEGBYTES');
    const stored = await staged.commit('results/k1.jpg', { contentType: 'image/jpeg', sha256: 'cafe' });
    expect(stored).toMatchObject({ key: 'results/k1.jpg', size: 9 });
    expect(existsSync(staged.file)).toBe(false);
    const cached = path.join(cacheDir, 'objects', 'results', 'k1.jpg');
    expect(await readFile(cached, 'utf8')).toBe('JPEGBYTES');
    expect(store.refOf('results/k1.jpg')).toBe(cached);
    expect(await store.localCopy('results/k1.jpg')).toBe(cached);
    const raw = await access.client.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: `${store.prefix}results/k1.jpg` }),
    );
    expect(await raw.Body?.transformToString()).toBe('JPEGBYTES');
    await staged.discard();
  });

  it('evict drops the cached copy; refOf then names the object, localCopy fetches it back', async () => {
    const staged = await store.stage('results/k2');
    await writeFile(staged.file, 'SECOND');
    await staged.commit('results/k2.jpg');
    await store.evict('results/k2.jpg');
    expect(store.refOf('results/k2.jpg')).toBe(`s3://kitchen/${store.prefix}results/k2.jpg`);
    const copy = await store.localCopy('results/k2.jpg');
    expect(copy).toBe(path.join(cacheDir, 'objects', 'results', 'k2.jpg'));
    expect(await readFile(copy, 'utf8')).toBe('SECOND');
    expect((await rejection(store.localCopy('results/none.jpg'))).code).toBe('object_not_found');
  });

  it('refOf resolves ../ links inside the bucket and refuses links above its root', () => {
    const s = new S3OutputStore({ access, bucket: BUCKET, prefix: 'runs/shard-2/', cacheDir });
    expect(s.refOf('../shard-1/results/k1.jpg')).toBe('s3://kitchen/runs/shard-1/results/k1.jpg');
    expect(s.refOf('results/k9.jpg')).toBe('s3://kitchen/runs/shard-2/results/k9.jpg');
    expect(() => s.refOf('../../../x.jpg')).toThrow(StorageError);
  });

  it('discard removes a staged file; sweep removes leftovers by prefix and age', async () => {
    const a = await store.stage('results/k3');
    await writeFile(a.file, 'x');
    await a.discard();
    expect(existsSync(a.file)).toBe(false);
    const b = await store.stage('results/k4');
    await writeFile(b.file, 'x');
    const c = await store.stage('thumbs/k4');
    await writeFile(c.file, 'x');
    expect(await store.sweep('results/', 3_600_000)).toEqual([]);
    expect(await store.sweep('results/')).toEqual([path.basename(b.file)]);
    expect(existsSync(c.file)).toBe(true);
  });

  it('probe writes and deletes a probe object and leaves no trace in list', async () => {
    await store.probe();
    expect(await collect(store.list(''))).toEqual([]);
  });

  it('probe on a missing bucket: store_refused naming bucket, prefix and credential source', async () => {
    const missing = new S3OutputStore({ access, bucket: 'no-such-bucket', prefix: 'out/', cacheDir });
    const error = await rejection(missing.probe());
    expect(error.code).toBe('store_refused');
    expect(error.message).toContain('"no-such-bucket"');
    expect(error.message).toContain('"out/"');
    expect(error.message).toContain('NoSuchBucket');
    expect(error.message).toContain('credentials from environment (AWS_ACCESS_KEY_ID)');
    expect(isStoreUnavailable(error)).toBe(false);
  });

  it('probe with refused credentials: store_refused with no secret in the message', async () => {
    const refused = accessFor(server.endpoint, FAKE_KEY_ID, FAKE_SECRET);
    const s = new S3OutputStore({ access: refused, bucket: BUCKET, prefix: 'out/', cacheDir });
    const error = await rejection(s.probe());
    expect(error.code).toBe('store_refused');
    expect(error.message).toMatch(/InvalidAccessKeyId|HTTP 403/);
    expect(error.message).toContain('"kitchen"');
    expect(error.message).toContain('credentials from environment (AWS_ACCESS_KEY_ID)');
    for (const secret of [FAKE_KEY_ID, FAKE_SECRET]) expect(error.message).not.toContain(secret);
  });

  it('an unreachable endpoint is store_unavailable (isStoreUnavailable), and probe says store_refused', async () => {
    const closed = await startS3rverServer([BUCKET]);
    await closed.close();
    const gone = new S3OutputStore({
      access: accessFor(closed.endpoint),
      bucket: BUCKET,
      prefix: '',
      cacheDir,
    });
    const error = await rejection(gone.put('x.txt', 'x'));
    expect(error.code).toBe('store_unavailable');
    expect(isStoreUnavailable(error)).toBe(true);
    expect(error.message).toContain('s3://kitchen/x.txt');
    const probe = await rejection(gone.probe());
    expect(probe.code).toBe('store_refused');
    expect(probe.message).toContain('ECONNREFUSED');
  });
});

describe('S3OutputStore on fauxqs', () => {
  let server: TestS3Server;
  let cacheDir: string;

  beforeAll(async () => {
    server = await startFauxqsServer([BUCKET]);
    cacheDir = await mkdtemp(path.join(tmpdir(), 'kb-s3out-'));
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await server.close();
    await rm(cacheDir, { recursive: true, force: true });
  });

  it('stores stream bodies byte for byte and lists over several pages', async () => {
    const store = new S3OutputStore({
      access: accessFor(server.endpoint, FAKE_KEY_ID, FAKE_SECRET),
      bucket: BUCKET,
      prefix: 'paged/',
      cacheDir,
      listPageSize: 7,
    });
    const big = Buffer.alloc(9 * 1024 * 1024, 'q');
    await store.put('big.bin', Readable.from([big.subarray(0, 5_000_000), big.subarray(5_000_000)]));
    const back = await text(await store.get('big.bin'));
    expect(back.length).toBe(big.length);
    for (let i = 0; i < 30; i++) await store.put(`thumbs/t${String(i).padStart(2, '0')}.webp`, `t${i}`);
    const first = await store.listPage('thumbs/', undefined);
    expect(first.Contents?.length).toBe(7);
    expect(first.IsTruncated).toBe(true);
    const keys = (await collect(store.list('thumbs/'))).map((o) => o.key);
    expect(keys.length).toBe(30);
    expect(new Set(keys).size).toBe(30);
    expect(keys).toContain('thumbs/t29.webp');
  });
});

describe('S3OutputStore on a server that never answers', () => {
  it('a request that waits past requestTimeoutMs fails as store_unavailable', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.resume();
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    const cacheDir = await mkdtemp(path.join(tmpdir(), 'kb-s3out-'));
    try {
      vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
      vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
      const access = createS3Client(
        { AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`, AWS_REGION: 'us-east-1' },
        { maxAttempts: 1, requestTimeoutMs: 300 },
      );
      const store = new S3OutputStore({ access, bucket: BUCKET, prefix: '', cacheDir });
      const error = await rejection(store.put('x.txt', 'x'));
      expect(error.code).toBe('store_unavailable');
      expect(isStoreUnavailable(error)).toBe(true);
    } finally {
      vi.unstubAllEnvs();
      for (const socket of sockets) socket.destroy();
      silent.close();
      await rm(cacheDir, { recursive: true, force: true });
    }
  });
});
