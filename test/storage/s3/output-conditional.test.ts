/**
 * The write-once rules and the retries of the S3 output store, against the conditional front
 * (test/support/s3-conditional.ts: If-None-Match on PutObject as AWS documents it, injected faults).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createS3Client, type S3Access } from '../../../src/storage/s3/client.js';
import { isStoreUnavailable } from '../../../src/storage/s3/output-errors.js';
import { S3OutputStore } from '../../../src/storage/s3/output-store.js';
import { StorageError } from '../../../src/storage/types.js';
import { type ConditionalS3, startConditionalS3 } from '../../support/s3-conditional.js';

const BUCKET = 'out';
let s3: ConditionalS3;
let cacheDir: string;
let n = 0;

beforeAll(async () => {
  s3 = await startConditionalS3([BUCKET]);
});
afterAll(() => s3.close());
beforeEach(async () => {
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
  cacheDir = await mkdtemp(path.join(tmpdir(), 'kb-s3cond-'));
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await rm(cacheDir, { recursive: true, force: true });
});

/** A store on a fresh prefix, with the SDK's `maxAttempts`. */
function storeWith(maxAttempts = 4): { store: S3OutputStore; access: S3Access } {
  const access = createS3Client(
    { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' },
    { maxAttempts },
  );
  n += 1;
  return { store: new S3OutputStore({ access, bucket: BUCKET, prefix: `run-${n}/`, cacheDir }), access };
}

async function rejection(promise: Promise<unknown>): Promise<StorageError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StorageError);
  return error as StorageError;
}

const sha256 = (body: string) => createHash('sha256').update(body).digest('hex');

const statuses = (key: string) =>
  s3.requests.filter((r) => r.key === key).map((r) => `${r.method} ${r.status}`);

describe('S3OutputStore write-once puts', () => {
  it("a staged download is put write-once; the item's earlier result (the journal's sha256) is replaced by If-Match, no other", async () => {
    const { store, access } = storeWith();
    const commit = async (body: string, options: { replaces?: string } = {}) => {
      const staged = await store.stage('results/k1');
      await writeFile(staged.file, body);
      return staged.commit('results/k1.jpg', { sha256: sha256(body), ...options });
    };
    await commit('the old job result');
    const stranger = await rejection(commit('someone else'));
    expect(stranger.code).toBe('object_exists');
    await commit('the new job result', { replaces: sha256('the old job result') });
    await store.evict('results/k1.jpg');
    expect(await text(await store.get('results/k1.jpg'))).toBe('the new job result');
    const key = `${BUCKET}/run-${n}/results/k1.jpg`;
    const puts = s3.requests.filter((r) => r.key === key && r.method === 'PUT');
    expect(puts.map((r) => r.status)).toEqual([200, 412, 412, 200]);
    expect(puts.at(-1)?.headers['if-match']).toBeTruthy();
    // The verified download's sha256 is the payload hash S3 checks the body against (not hashed again).
    expect(puts.map((r) => r.headers['x-amz-content-sha256'])).toEqual(
      ['the old job result', 'someone else', 'the new job result', 'the new job result'].map(sha256),
    );
    access.client.destroy();
  });

  it('a result is put with the sha256 it was verified with: bytes changed since (the cache file) are refused by the store, nothing stored', async () => {
    const { store, access } = storeWith();
    const staged = await store.stage('results/k9');
    await writeFile(staged.file, 'changed on disk after the download was verified');
    const error = await rejection(
      staged.commit('results/k9.jpg', { sha256: sha256('the verified download') }),
    );
    expect(error.code).toBe('body_mismatch');
    expect(error.message).toContain('XAmzContentSHA256Mismatch');
    expect(error.message).toContain(`s3://${BUCKET}/run-${n}/results/k9.jpg`);
    expect(await store.head('results/k9.jpg')).toBeNull();
    expect(existsSync(staged.file)).toBe(false);
    access.client.destroy();
  });

  it('a download that kept its verified bytes is put from them, write-once and hash-checked; the file becomes the cached copy', async () => {
    const { store, access } = storeWith();
    const body = Buffer.from('the verified download, kept in memory');
    const staged = await store.stage('results/k8');
    await writeFile(staged.file, body);
    const stored = await staged.commit('results/k8.jpg', { sha256: sha256(body.toString()) }, body);
    expect(stored).toMatchObject({
      key: 'results/k8.jpg',
      size: body.length,
      sha256: sha256(body.toString()),
    });
    const put = s3.requests.filter(
      (r) => r.key === `${BUCKET}/run-${n}/results/k8.jpg` && r.method === 'PUT',
    );
    expect(put.map((r) => [r.status, r.headers['if-none-match'], r.headers['x-amz-content-sha256']])).toEqual(
      [[200, '*', sha256(body.toString())]],
    );
    expect(existsSync(staged.file)).toBe(false);
    // The cached copy is served without a GET.
    const before = s3.requests.length;
    expect(await text(await store.get('results/k8.jpg'))).toBe(body.toString());
    expect(s3.requests.length).toBe(before);
    // Bytes other than the verified ones are refused as from the file.
    const other = await store.stage('results/k7');
    await writeFile(other.file, 'x');
    const error = await rejection(other.commit('results/k7.jpg', { sha256: sha256('y') }, Buffer.from('x')));
    expect(error.code).toBe('body_mismatch');
    access.client.destroy();
  });

  it('a second ifAbsent put with the same sha256 finds its own bytes and counts as stored', async () => {
    const { store } = storeWith();
    await store.put('results/k1.jpg', 'JPEG-1', { ifAbsent: true, sha256: 'aa11' });
    const again = await store.put('results/k1.jpg', 'JPEG-1', { ifAbsent: true, sha256: 'aa11' });
    expect(again).toMatchObject({ key: 'results/k1.jpg', size: 6, sha256: 'aa11' });
    expect(statuses(`${BUCKET}/${store.prefix}results/k1.jpg`)).toEqual(['PUT 200', 'PUT 412', 'HEAD 200']);
  });

  it('an ifAbsent put of other bytes is object_exists and the object is unchanged', async () => {
    const { store } = storeWith();
    await store.put('results/k1.jpg', 'JPEG-1', { ifAbsent: true, sha256: 'aa11' });
    const error = await rejection(store.put('results/k1.jpg', 'OTHER', { ifAbsent: true, sha256: 'bb22' }));
    expect(error.code).toBe('object_exists');
    expect(error.message).toContain(`s3://out/${store.prefix}results/k1.jpg`);
    const noSha = await rejection(store.put('results/k1.jpg', 'OTHER', { ifAbsent: true }));
    expect(noSha.code).toBe('object_exists');
    expect(await text(await store.get('results/k1.jpg'))).toBe('JPEG-1');
    expect((await store.head('results/k1.jpg'))?.sha256).toBe('aa11');
  });

  it('a staged commit that finds its own bytes keeps the cached copy; other bytes leave the object and no cache', async () => {
    const { store } = storeWith();
    await store.put('results/k2.png', 'PNG', { ifAbsent: true, sha256: 'cc33' });
    const same = await store.stage('results/k2');
    await writeFile(same.file, 'PNG');
    expect(await same.commit('results/k2.png', { ifAbsent: true, sha256: 'cc33' })).toMatchObject({
      size: 3,
    });
    expect(store.refOf('results/k2.png')).toBe(path.join(cacheDir, 'objects', 'results', 'k2.png'));
    await store.evict('results/k2.png');
    const other = await store.stage('results/k2');
    await writeFile(other.file, 'NOT-PNG');
    expect((await rejection(other.commit('results/k2.png', { ifAbsent: true, sha256: 'dd44' }))).code).toBe(
      'object_exists',
    );
    expect(existsSync(other.file)).toBe(false);
    expect(existsSync(path.join(cacheDir, 'objects', 'results', 'k2.png'))).toBe(false);
    expect(await text(await store.get('results/k2.png'))).toBe('PNG');
  });

  it('probe creates its object with If-None-Match and removes it', async () => {
    const { store } = storeWith();
    await store.probe();
    const probes = s3.requests.filter((r) =>
      r.key.startsWith(`${BUCKET}/${store.prefix}.kitchen-batch/probe-`),
    );
    expect(probes.map((r) => `${r.method} ${r.status}`)).toEqual(['PUT 200', 'DELETE 204']);
    expect(probes[0]?.headers['if-none-match']).toBe('*');
  });
});

describe('S3OutputStore retries', () => {
  it('two 503 SlowDown answers then success: stored by the SDK retries', async () => {
    const { store, access } = storeWith(4);
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${store.prefix}`, times: 2, status: 503 });
    await store.put('report.json', '{"ok":true}', { ifAbsent: true, sha256: 'ee55' });
    expect(statuses(`${BUCKET}/${store.prefix}report.json`)).toEqual(['PUT 503', 'PUT 503', 'PUT 200']);
    const raw = await access.client.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: `${store.prefix}report.json` }),
    );
    expect(await raw.Body?.transformToString()).toBe('{"ok":true}');
  });

  it('a reset connection then success: stored', async () => {
    const { store } = storeWith(4);
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${store.prefix}`, times: 1, reset: true });
    await store.put('plan.json', 'PLAN');
    expect(await text(await store.get('plan.json'))).toBe('PLAN');
  });

  it('a 409 ConditionalRequestConflict is retried by the store itself', async () => {
    const { store } = storeWith(1);
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${store.prefix}`, times: 2, status: 409 });
    await store.put('journal/0001', 'SEG', { ifAbsent: true });
    expect(statuses(`${BUCKET}/${store.prefix}journal/0001`)).toEqual(['PUT 409', 'PUT 409', 'PUT 200']);
  });

  it('a staged file over 8 MiB is sent as a stream and survives a 503 retry', async () => {
    const { store } = storeWith(4);
    const staged = await store.stage('results/big');
    const bytes = Buffer.alloc(9 * 1024 * 1024, 'z');
    await writeFile(staged.file, bytes);
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${store.prefix}results/big`, times: 1, status: 503 });
    await staged.commit('results/big.jpg', { ifAbsent: true, sha256: 'ff66' });
    expect(statuses(`${BUCKET}/${store.prefix}results/big.jpg`)).toEqual(['PUT 503', 'PUT 200']);
    await store.evict('results/big.jpg');
    const copy = await store.localCopy('results/big.jpg');
    expect((await readFile(copy)).equals(bytes)).toBe(true);
  });

  it('persistent 503: store_unavailable, which isStoreUnavailable tells from a refusal', async () => {
    const { store } = storeWith(2);
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${store.prefix}`, times: 1000, status: 503 });
    const error = await rejection(store.put('report.json', 'x'));
    expect(error.code).toBe('store_unavailable');
    expect(error.message).toContain('SlowDown');
    expect(isStoreUnavailable(error)).toBe(true);
    expect(isStoreUnavailable(new StorageError('object_exists', 'k', 'taken'))).toBe(false);
  });
});
