/**
 * The conditional front of the tests (test/support/s3-conditional.ts) enforces what AWS documents for
 * PutObject's If-None-Match and If-Match; the write-once and lease tests of issue 33 rely on it, so
 * its rules are checked here against each real server it can stand before (s3rver for the tests,
 * fauxqs for the benchmark).
 */
import { createHash } from 'node:crypto';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  PutObjectCommand,
  paginateListObjectsV2,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createS3Client, withPayloadHash } from '../../../src/storage/s3/client.js';
import { type ConditionalS3, startConditionalS3 } from '../../support/s3-conditional.js';

let s3: ConditionalS3;
const sha256 = (body: string) => createHash('sha256').update(body).digest('hex');
let client: S3Client;

const put = (Key: string, body: string, condition: { IfNoneMatch?: string; IfMatch?: string } = {}) =>
  client.send(new PutObjectCommand({ Bucket: 'out', Key, Body: Buffer.from(body), ...condition }));
const text = async (Key: string) =>
  (await client.send(new GetObjectCommand({ Bucket: 'out', Key }))).Body!.transformToString();
const status = (error: unknown) =>
  (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;

describe.each(['s3rver', 'fauxqs'] as const)('the conditional S3 front before %s', (backend) => {
  beforeAll(async () => {
    s3 = await startConditionalS3(['out'], { backend });
    // The SDK's default chain reads credentials from the process's environment.
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
    client = createS3Client(
      { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' },
      { maxAttempts: 1 },
    ).client;
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    client?.destroy();
    await s3?.close();
  });

  it('If-None-Match: * writes once; If-Match needs the current ETag; other calls pass through', async () => {
    await put('a#1+?.txt', 'first', { IfNoneMatch: '*' });
    const again = await put('a#1+?.txt', 'second', { IfNoneMatch: '*' }).catch((e: unknown) => e);
    expect(status(again)).toBe(412);
    expect(await text('a#1+?.txt')).toBe('first');

    const { ETag } = await put('lease', 'v1', { IfNoneMatch: '*' });
    const stale = await put('lease', 'v2', { IfMatch: '"0123456789abcdef0123456789abcdef"' }).catch(
      (e: unknown) => e,
    );
    expect(status(stale)).toBe(412);
    const renewed = await put('lease', 'v2', { IfMatch: ETag! });
    expect(renewed.ETag).not.toBe(ETag);
    const missing = await put('nothing', 'v', { IfMatch: ETag! }).catch((e: unknown) => e);
    expect(status(missing)).toBe(404);
    expect(await text('lease')).toBe('v2');
    await put('plain', 'x');
    await put('plain', 'y');
    expect(await text('plain')).toBe('y');
  });

  it('of two racing If-None-Match writers exactly one wins', async () => {
    const tries = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => put('segment-0001', `writer ${i}`, { IfNoneMatch: '*' })),
    );
    const won = tries.filter((t) => t.status === 'fulfilled');
    expect(won).toHaveLength(1);
    expect(
      tries.filter((t) => t.status === 'rejected').map((t) => status((t as PromiseRejectedResult).reason)),
    ).toEqual(Array(7).fill(412));
  });

  it('injects S3 errors and resets for the next N matching requests', async () => {
    s3.fail({ method: 'PUT', keyPrefix: 'out/flaky', times: 1, status: 503 });
    const slow = await put('flaky', 'x').catch((e: unknown) => e);
    expect(status(slow)).toBe(503);
    expect((slow as Error).name).toBe('SlowDown');
    s3.fail({ method: 'GET', keyPrefix: 'out/plain', times: 1, reset: true });
    await expect(text('plain')).rejects.toThrow();
    expect(await text('plain')).toBe('y');
    await put('flaky', 'x');
    expect(s3.requests.filter((r) => r.key === 'out/flaky').map((r) => r.status)).toEqual([503, 200]);
  });

  it('refuses a body that does not match its signed payload hash, as S3 does (400 XAmzContentSHA256Mismatch)', async () => {
    const claimed = (body: string, hashOf: string) =>
      client.send(
        new PutObjectCommand(
          withPayloadHash({ Bucket: 'out', Key: 'claimed', Body: Buffer.from(body) }, sha256(hashOf)),
        ),
      );
    const refused = await claimed('these bytes', 'other bytes').catch((e: unknown) => e);
    expect(status(refused)).toBe(400);
    expect((refused as Error).name).toBe('XAmzContentSHA256Mismatch');
    expect(status(await text('claimed').catch((e: unknown) => e))).toBe(404);
    await claimed('these bytes', 'these bytes');
    expect(await text('claimed')).toBe('these bytes');
  });

  it('holds a request unanswered until released: then stored, or answered with an S3 error', async () => {
    s3.fail({ method: 'PUT', keyPrefix: 'out/held', times: 2, hold: true });
    const first = put('held', 'one', { IfNoneMatch: '*' });
    await vi.waitFor(() => expect(s3.held()).toEqual(['out/held']));
    expect(status(await text('held').catch((e: unknown) => e))).toBe(404);
    s3.release();
    await first;
    expect(await text('held')).toBe('one');
    const second = put('held', 'two').catch((e: unknown) => e);
    await vi.waitFor(() => expect(s3.held()).toEqual(['out/held']));
    s3.release({ status: 500 });
    expect(status(await second)).toBe(500);
    expect(await text('held')).toBe('one');
  });

  it('asks the server for an ETag it no longer knows (after a batch delete) before a conditional write', async () => {
    await put('known', 'v1', { IfNoneMatch: '*' });
    // A DeleteObjects of another key: the front forgets what it knew of the bucket's keys.
    await client.send(new DeleteObjectsCommand({ Bucket: 'out', Delete: { Objects: [{ Key: 'other' }] } }));
    const again = await put('known', 'v2', { IfNoneMatch: '*' }).catch((e: unknown) => e);
    expect(status(again)).toBe(412);
    expect(await text('known')).toBe('v1');
  });

  it('lists over 1,000 keys in pages (ListObjectsV2 continuation), with and without a delimiter', async () => {
    // s3rver alone answers 500 to any truncated v2 listing (its DES tokens are gone from OpenSSL 3).
    const keys = Array.from(
      { length: 1203 },
      (_, i) => `many/${i % 3 === 0 ? 'sub/' : ''}k&${String(i).padStart(4, '0')}`,
    );
    for (let i = 0; i < keys.length; i += 50)
      await Promise.all(keys.slice(i, i + 50).map((k) => put(k, 'x')));
    const listed: string[] = [];
    let pages = 0;
    for await (const page of paginateListObjectsV2({ client }, { Bucket: 'out', Prefix: 'many/' })) {
      pages++;
      for (const object of page.Contents ?? []) listed.push(object.Key!);
    }
    expect(pages).toBe(2);
    expect(listed).toEqual([...keys].sort());
    const top: string[] = [];
    const prefixes: string[] = [];
    for await (const page of paginateListObjectsV2(
      { client, pageSize: 500 },
      { Bucket: 'out', Prefix: 'many/', Delimiter: '/' },
    )) {
      for (const object of page.Contents ?? []) top.push(object.Key!);
      for (const prefix of page.CommonPrefixes ?? []) prefixes.push(prefix.Prefix!);
    }
    expect(top).toEqual(keys.filter((k) => !k.startsWith('many/sub/')).sort());
    expect(prefixes).toEqual(['many/sub/']);
  }, 60_000);
});
