/**
 * The S3 output store against a real S3 server: s3rver behind the conditional front
 * (test/support/s3-conditional.ts), which answers If-None-Match / If-Match on PutObject as AWS does.
 * What is checked is the product's rule on 412 and on a store that stays unreachable, not the front.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createS3Client, type S3Access } from '../../../src/storage/s3/client.js';
import { isStoreUnavailable, parseOutputUrl, S3OutputStore } from '../../../src/storage/s3/output-store.js';
import { StorageError } from '../../../src/storage/types.js';
import { sha256 } from '../../../src/util/fs.js';
import { type ConditionalS3, startConditionalS3 } from '../../support/s3-conditional.js';

let s3: ConditionalS3;
let access: S3Access;
let cache: string;

beforeAll(async () => {
  s3 = await startConditionalS3(['out']);
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
  access = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' }, { maxAttempts: 2 });
  cache = await mkdtemp(path.join(tmpdir(), 'kb-s3out-cache-'));
});
afterAll(async () => {
  vi.unstubAllEnvs();
  access?.client.destroy();
  await s3?.close();
  if (cache) await rm(cache, { recursive: true, force: true });
});

const store = (prefix: string) => new S3OutputStore({ access, bucket: 'out', prefix, cacheDir: cache });

async function staged(output: S3OutputStore, bytes: Buffer) {
  const stage = await output.stage('results/k1');
  await writeFile(stage.file, bytes);
  return stage;
}

const text = async (output: S3OutputStore, key: string) => {
  const chunks: Buffer[] = [];
  for await (const chunk of await output.get(key)) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString();
};

describe('S3OutputStore', () => {
  it('parses output URLs: bucket and a prefix ending in /, keys verbatim', () => {
    expect(parseOutputUrl('s3://out/nightly')).toEqual({ bucket: 'out', prefix: 'nightly/' });
    expect(parseOutputUrl('s3://out/a#b?c+d/')).toEqual({ bucket: 'out', prefix: 'a#b?c+d/' });
    expect(parseOutputUrl('s3://out')).toEqual({ bucket: 'out', prefix: '' });
    expect(() => parseOutputUrl('s3:///x')).toThrow(/names no bucket/);
  });

  it('a result is stored once with its sha256; the same bytes again count as stored, other bytes are never written over', async () => {
    const output = store('once/');
    const bytes = Buffer.from('result bytes v1');
    const first = await (await staged(output, bytes)).commit('results/k1.jpg', {
      contentType: 'image/jpeg',
      sha256: sha256(bytes),
    });
    expect(first.sha256).toBe(sha256(bytes));
    expect(await output.head('results/k1.jpg')).toMatchObject({ size: bytes.length, sha256: sha256(bytes) });
    // The committed bytes are kept as the local copy the review reads: refOf points at it.
    expect(await readFile(output.refOf('results/k1.jpg'), 'utf8')).toBe('result bytes v1');

    const again = await (await staged(output, bytes)).commit('results/k1.jpg', { sha256: sha256(bytes) });
    expect(again.sha256).toBe(sha256(bytes));
    const other = Buffer.from('someone else s bytes');
    const conflict = await (await staged(output, other))
      .commit('results/k1.jpg', { sha256: sha256(other) })
      .catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(StorageError);
    expect((conflict as StorageError).code).toBe('object_exists');
    expect((conflict as StorageError).message).toContain('s3://out/once/results/k1.jpg');
    await output.evict('results/k1.jpg');
    expect(await text(output, 'results/k1.jpg')).toBe('result bytes v1');
    // 412s were answered, and no write replaced the object.
    expect(
      s3.requests
        .filter((r) => r.key === 'out/once/results/k1.jpg' && r.method === 'PUT')
        .map((r) => r.status),
    ).toEqual([200, 412, 412]);
  });

  it("an earlier result of the item (the journal's sha256) is replaced, by If-Match on its ETag", async () => {
    const output = store('replace/');
    const old = Buffer.from('the old job result');
    await (await staged(output, old)).commit('results/k1.jpg', { sha256: sha256(old) });
    const next = Buffer.from('the new job result');
    await (await staged(output, next)).commit('results/k1.jpg', {
      sha256: sha256(next),
      replaces: sha256(old),
    });
    await output.evict('results/k1.jpg');
    expect(await text(output, 'results/k1.jpg')).toBe('the new job result');
    const puts = s3.requests.filter((r) => r.key === 'out/replace/results/k1.jpg' && r.method === 'PUT');
    expect(puts.at(-1)?.headers['if-match']).toBeTruthy();
  });

  it('reports, lists and deletes: a streamed writer, keys relative to the prefix', async () => {
    const output = store('reports/');
    const writer = await output.writer('report.csv', { contentType: 'text/csv' });
    for (let i = 0; i < 20_000; i++) await writer.write(`k${i},succeeded,results/k${i}.jpg\n`);
    const stored = await writer.commit();
    expect(stored.size).toBeGreaterThan(500_000);
    await output.put('plan.jsonl', '{"id":"k1"}\n');
    const keys: string[] = [];
    for await (const o of output.list('')) keys.push(o.key);
    expect(keys.sort()).toEqual(['plan.jsonl', 'report.csv']);
    await output.delete('plan.jsonl');
    expect(await output.head('plan.jsonl')).toBeNull();
    expect((await text(output, 'report.csv')).split('\n')[19_999]).toBe(
      'k19999,succeeded,results/k19999.jpg',
    );
  });

  it('503 SlowDown is retried; a store that stays unreachable is store_unavailable', async () => {
    const output = store('flaky/');
    s3.fail({ method: 'PUT', keyPrefix: 'out/flaky/a', times: 1, status: 503 });
    await output.put('a', 'x');
    s3.fail({ method: 'PUT', keyPrefix: 'out/flaky/b', times: 10, status: 503 });
    const down = await output.put('b', 'x').catch((e: unknown) => e);
    expect(isStoreUnavailable(down)).toBe(true);
  });

  it('probe: a missing bucket and refused credentials are store_refused, naming the bucket and the credential source, no secret', async () => {
    const missing = new S3OutputStore({ access, bucket: 'no-such-bucket', prefix: 'x/', cacheDir: cache });
    const refusal = (await missing.probe().catch((e: unknown) => e)) as StorageError;
    expect(refusal.code).toBe('store_refused');
    expect(refusal.message).toMatch(/s3:\/\/no-such-bucket\/x\/.*bucket does not exist.*credentials from/);
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIAWRONG0000000');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'wrongSECRETwrongSECRET');
    const wrong = createS3Client(
      { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' },
      { maxAttempts: 1 },
    );
    try {
      const refused = (await new S3OutputStore({
        access: wrong,
        bucket: 'out',
        prefix: 'y/',
        cacheDir: cache,
      })
        .probe()
        .catch((e: unknown) => e)) as StorageError;
      expect(refused.code).toBe('store_refused');
      expect(refused.message).toContain('access refused');
      expect(refused.message).not.toContain('wrongSECRET');
    } finally {
      wrong.client.destroy();
      vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
      vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
    }
    await store('ok/').probe();
  });
});
