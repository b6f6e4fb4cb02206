/**
 * Direct puts (src/storage/s3/direct-put.ts): the output store's in-memory puts sent without the
 * SDK's middleware, on the route an SDK put took, against both conditional fronts (s3rver checks
 * every signature; fauxqs runs the front's rules in its own server). A request of the SDK carries
 * `amz-sdk-invocation-id`; a direct one does not.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { closeS3Access, createS3Client, type S3Access } from '../../../src/storage/s3/client.js';
import { encodeKey } from '../../../src/storage/s3/direct-put.js';
import { S3OutputStore } from '../../../src/storage/s3/output-store.js';
import { StorageError } from '../../../src/storage/types.js';
import { type ConditionalS3, type SeenRequest, startConditionalS3 } from '../../support/s3-conditional.js';

const BUCKET = 'direct';
const sha256 = (body: string | Buffer) => createHash('sha256').update(body).digest('hex');
const bySdk = (r: SeenRequest) => r.headers['amz-sdk-invocation-id'] !== undefined;

describe.each(['s3rver', 'fauxqs'] as const)('direct puts before %s', (backend) => {
  let s3: ConditionalS3;
  let cacheDir: string;
  let n = 0;
  const opened: S3Access[] = [];

  beforeAll(async () => {
    s3 = await startConditionalS3([BUCKET], { backend });
  });
  afterAll(() => s3.close());
  beforeEach(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
    cacheDir = await mkdtemp(path.join(tmpdir(), 'kb-s3direct-'));
  });
  afterEach(async () => {
    s3.heal();
    vi.unstubAllEnvs();
    for (const access of opened.splice(0)) closeS3Access(access);
    await rm(cacheDir, { recursive: true, force: true });
  });

  /** A store on a fresh prefix (with characters a path must encode), its access, and its requests from now on. */
  function storeWith(options: { requestTimeoutMs?: number } = {}) {
    const access = createS3Client(
      { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' },
      { maxAttempts: 3, directPuts: true, ...options },
    );
    opened.push(access);
    n += 1;
    const prefix = `runs/night ${n} (a+b)!/`;
    const mark = s3.requests.length;
    return {
      store: new S3OutputStore({ access, bucket: BUCKET, prefix, cacheDir }),
      access,
      prefix,
      seen: (key: string) => s3.requests.slice(mark).filter((r) => r.key === `${BUCKET}/${prefix}${key}`),
    };
  }

  /** Commits `body` as a verified download of `key`, as the download stage does. */
  async function commit(store: S3OutputStore, key: string, body: string) {
    const staged = await store.stage(key);
    await writeFile(staged.file, body);
    return staged.commit(key, { contentType: 'image/jpeg', sha256: sha256(body) });
  }

  it('after one put through the SDK (the probe), results go direct, signed, with the same headers and bytes', async () => {
    const { store, access, prefix, seen } = storeWith();
    expect(access.direct?.knows(BUCKET)).toBe(false);
    await store.probe();
    expect(access.direct?.knows(BUCKET)).toBe(true);
    for (const id of ['k1', 'k2', 'k3']) await commit(store, `results/${id}.jpg`, `the result of ${id}`);
    await store.put('report.json', '{"rows":[]}', { contentType: 'application/json' });

    const puts = ['results/k1.jpg', 'results/k2.jpg', 'results/k3.jpg', 'report.json'].map((k) => seen(k));
    for (const requests of puts) {
      // One request each, answered 200 (s3rver checked its signature), and none from the SDK.
      expect(requests.map((r) => `${r.method} ${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`)).toEqual([
        'PUT 200 direct',
      ]);
    }
    const k1 = puts[0]![0]!;
    expect(k1.headers['if-none-match']).toBe('*');
    expect(k1.headers['x-amz-content-sha256']).toBe(sha256('the result of k1'));
    expect(k1.headers['x-amz-meta-sha256']).toBe(sha256('the result of k1'));
    expect(k1.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=S3RVER\//);
    expect(JSON.stringify(s3.requests)).not.toContain('S3RVER/S3RVER');

    const head = await access.client.send(
      new HeadObjectCommand({ Bucket: BUCKET, Key: `${prefix}results/k2.jpg` }),
    );
    expect(head).toMatchObject({
      ContentType: 'image/jpeg',
      Metadata: { sha256: sha256('the result of k2') },
    });
    const report = await access.client.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}report.json` }),
    );
    expect(await text(report.Body as NodeJS.ReadableStream)).toBe('{"rows":[]}');
    expect(report.ContentType).toBe('application/json');
  });

  it('a 503, a reset or a timeout of a direct put sends it again through the SDK, which stores it', async () => {
    const { store, seen } = storeWith({ requestTimeoutMs: 400 });
    await store.probe();
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/runs/`, times: 1, status: 503 });
    await commit(store, 'results/a.jpg', 'a');
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/runs/`, times: 1, reset: true });
    await commit(store, 'results/b.jpg', 'b');
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/runs/`, times: 1, hold: true });
    await commit(store, 'results/c.jpg', 'c');
    s3.release();
    await commit(store, 'results/d.jpg', 'd');
    const story = (key: string) => seen(key).map((r) => `${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`);
    expect(story('results/a.jpg')).toEqual(['503 direct', '200 sdk']);
    expect(story('results/b.jpg')).toEqual(['0 direct', '200 sdk']);
    expect(story('results/c.jpg').at(-1)).toBe('200 sdk');
    expect(story('results/c.jpg')[0]).toMatch(/direct$/);
    // The SDK's success keeps the route: the next put goes direct again.
    expect(story('results/d.jpg')).toEqual(['200 direct']);
    for (const key of ['a', 'b', 'c', 'd']) {
      await store.evict(`results/${key}.jpg`);
      expect(await text(await store.get(`results/${key}.jpg`))).toBe(key);
    }
  });

  it('a 412 to a direct write-once put is answered here: our own bytes count as stored, others are never overwritten', async () => {
    const { store, seen } = storeWith();
    await store.probe();
    await commit(store, 'results/k1.jpg', 'mine');
    await commit(store, 'results/k1.jpg', 'mine');
    const error = await commit(store, 'results/k1.jpg', 'a stranger').then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).code).toBe('object_exists');
    expect(
      seen('results/k1.jpg').map((r) => `${r.method} ${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`),
    ).toEqual(['PUT 200 direct', 'PUT 412 direct', 'HEAD 200 sdk', 'PUT 412 direct', 'HEAD 200 sdk']);
    await store.evict('results/k1.jpg');
    expect(await text(await store.get('results/k1.jpg'))).toBe('mine');
  });

  it('a file too large for memory is streamed through the SDK, also once the route is known', async () => {
    const { store, access, seen } = storeWith();
    await store.probe();
    const big = Buffer.alloc(9 * 1024 * 1024, 7);
    const staged = await store.stage('results/big');
    await writeFile(staged.file, big);
    await staged.commit('results/big.jpg', { sha256: sha256(big) });
    expect(access.direct?.knows(BUCKET)).toBe(true);
    expect(seen('results/big.jpg').map((r) => `${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`)).toEqual([
      '200 sdk',
    ]);
    await store.evict('results/big.jpg');
    const stream = await store.get('results/big.jpg');
    const back: Buffer[] = [];
    for await (const chunk of stream) back.push(chunk as Buffer);
    expect(sha256(Buffer.concat(back))).toBe(sha256(big));
  });

  it('a bucket whose direct puts are refused three times is left to the SDK', async () => {
    const { store, access, seen } = storeWith();
    await store.probe();
    for (const id of [1, 2, 3]) {
      s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/runs/`, times: 1, status: 400 });
      await commit(store, `results/r${id}.jpg`, `r${id}`);
      expect(seen(`results/r${id}.jpg`).map((r) => `${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`)).toEqual([
        '400 direct',
        '200 sdk',
      ]);
    }
    expect(access.direct?.knows(BUCKET)).toBe(false);
    await commit(store, 'results/r4.jpg', 'r4');
    expect(seen('results/r4.jpg').map((r) => `${r.status} ${bySdk(r) ? 'sdk' : 'direct'}`)).toEqual([
      '200 sdk',
    ]);
  });
});

describe('encodeKey', () => {
  it("percent-encodes each segment as the SDK's path does, slashes kept", () => {
    expect(encodeKey('runs/night 1 (a+b)!/results/k1.jpg')).toBe(
      'runs/night%201%20%28a%2Bb%29%21/results/k1.jpg',
    );
    expect(encodeKey("a'*~_.-/é")).toBe('a%27%2A~_.-/%C3%A9');
  });
});
