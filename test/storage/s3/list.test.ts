import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import fg from 'fast-glob';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SourceError } from '../../../src/storage/http/errors.js';
import { createS3Client } from '../../../src/storage/s3/client.js';
import { listS3Glob, type S3ListedObject } from '../../../src/storage/s3/list.js';
import {
  FAKE_KEY_ID,
  FAKE_SECRET,
  putObjects,
  startFauxqsServer,
  startS3rverServer,
  type TestS3Server,
} from '../../support/s3-servers.js';

const BUCKET = 'kitchen';
// Keys with the characters a URL parser would eat, dot files and folders, case, a folder marker.
const KEYS = [
  'kitchens/a.jpg',
  'kitchens/B.JPG',
  'kitchens/sku #1.jpg',
  'kitchens/what?.jpg',
  'kitchens/a+b c.jpg',
  'kitchens/küche.jpg',
  'kitchens/.hidden.jpg',
  'kitchens/.cache/x.jpg',
  'kitchens/2024/sku1.jpg',
  'kitchens/2024/sku2.png',
  'kitchens/2024/deep/sku3.jpg',
  'kitchens/a b/c#d/e+f.jpg',
  'kitchensX/outside.jpg',
  'other/o.jpg',
  'top.jpg',
];
const FOLDER_MARKER = 'kitchens/empty.jpg/';
const PATTERNS = [
  'kitchens/**/*.jpg',
  'kitchens/*.jpg',
  'kitchens/**/*.{jpg,png}',
  'kitchens/**/sku+(1|3).jpg',
  'kitchens/**/*#*',
  'kitchens/*\\?.jpg',
  'kitchens/[ab]*',
  'kitchens/a b/**',
  '**/*.jpg',
  'kitchens*/*.jpg',
  '*.jpg',
  'kitchens/**',
  'kitchens/**/!(sku1).jpg',
  'kitchens/[[:alpha:]]*.jpg',
  'kitchens/*.JPG',
];

async function collect(iterable: AsyncIterable<S3ListedObject>): Promise<S3ListedObject[]> {
  const out: S3ListedObject[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

describe('listS3Glob on fauxqs', () => {
  let server: TestS3Server;
  let client: S3Client;
  let dir: string;
  let listCalls = 0;

  beforeAll(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    server = await startFauxqsServer([BUCKET]);
    client = createS3Client({ AWS_ENDPOINT_URL_S3: server.endpoint, AWS_REGION: 'us-east-1' }).client;
    // Counts the ListObjectsV2 requests that reach the wire (observes; changes nothing).
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'ListObjectsV2Command') listCalls += 1;
        return next(args);
      },
      { step: 'finalizeRequest' },
    );
    await putObjects(
      client,
      BUCKET,
      Object.fromEntries([...KEYS, FOLDER_MARKER].map((k) => [k, `body of ${k}`])),
    );
    // The same keys as local files, for fast-glob to match with the manifest's options.
    dir = await mkdtemp(path.join(tmpdir(), 'kb-s3glob-'));
    for (const key of KEYS) {
      await mkdir(path.dirname(path.join(dir, key)), { recursive: true });
      await writeFile(path.join(dir, key), key);
    }
  });
  afterAll(async () => {
    client.destroy();
    await server.close();
    await rm(dir, { recursive: true, force: true });
    vi.unstubAllEnvs();
  });

  it.each(PATTERNS)(
    '%s matches the keys fast-glob matches as files, in the listing order',
    async (pattern) => {
      const local = await fg(pattern, { cwd: dir, onlyFiles: true, unique: true, followSymbolicLinks: true });
      const listed = await collect(listS3Glob(client, `s3://${BUCKET}/${pattern}`));
      const keys = listed.map((o) => o.key);
      expect([...keys].sort(byteOrder)).toEqual([...local].sort(byteOrder));
      expect(keys.length).toBeGreaterThan(0);
      // Yielded in the server's listing order (AWS: UTF-8 binary order; fauxqs sorts otherwise).
      const raw = await client.send(new ListObjectsV2Command({ Bucket: BUCKET }));
      const serverOrder = (raw.Contents ?? [])
        .map((o) => o.Key)
        .filter((k) => k !== undefined && keys.includes(k));
      expect(keys).toEqual(serverOrder);
    },
  );

  it('yields ref, key, size, etag and lastModified; never a folder marker', async () => {
    const listed = await collect(listS3Glob(client, `s3://${BUCKET}/kitchens/**/*+*`));
    expect(listed.map((o) => o.ref).sort()).toEqual([
      `s3://${BUCKET}/kitchens/a b/c#d/e+f.jpg`,
      `s3://${BUCKET}/kitchens/a+b c.jpg`,
    ]);
    const first = listed.find((o) => o.key === 'kitchens/a b/c#d/e+f.jpg');
    expect(first).toMatchObject({ size: Buffer.byteLength('body of kitchens/a b/c#d/e+f.jpg') });
    expect(first?.etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(Math.abs((first?.lastModified ?? 0) - Date.now())).toBeLessThan(120_000);
    const all = await collect(listS3Glob(client, `s3://${BUCKET}/kitchens/**`));
    expect(all.map((o) => o.key)).not.toContain(FOLDER_MARKER);
  });

  // fauxqs 2.4.1 sorts a listing with localeCompare but resumes after the continuation key with `<=`
  // (code units): where the two orders differ (`+`, spaces, case, accents) its pages repeat or skip
  // keys. AWS lists in UTF-8 binary order. So paging is checked on keys both orders agree on.
  it('pages with ContinuationToken: page size 4 gives the same objects as one page, over several requests', async () => {
    const paged = Object.fromEntries(
      Array.from({ length: 25 }, (_, i) => [
        `paged/k${String(i).padStart(3, '0')}.${i % 5 === 0 ? 'png' : 'jpg'}`,
        `${i}`,
      ]),
    );
    await putObjects(client, BUCKET, { ...paged, 'paged/.k999.jpg': 'dot', 'pagedX/k000.jpg': 'outside' });
    listCalls = 0;
    const whole = await collect(listS3Glob(client, `s3://${BUCKET}/paged/*.jpg`));
    expect(listCalls).toBe(1);
    expect(whole.map((o) => o.key)).toEqual(Object.keys(paged).filter((k) => k.endsWith('.jpg')));
    listCalls = 0;
    const pages = await collect(listS3Glob(client, `s3://${BUCKET}/paged/*.jpg`, { pageSize: 4 }));
    expect(pages).toEqual(whole);
    // 26 keys under the prefix `paged/` (the dot file included, `pagedX/` not), 4 a page.
    expect(listCalls).toBe(7);
  });

  it('lists lazily: taking the first match sends one request', async () => {
    listCalls = 0;
    for await (const first of listS3Glob(client, `s3://${BUCKET}/paged/*.jpg`, { pageSize: 3 })) {
      expect(first.key).toBe('paged/k001.jpg');
      break;
    }
    expect(listCalls).toBe(1);
  });

  it('a missing bucket is file_not_found; a bad page size or reference is refused before any request', async () => {
    const error = await collect(listS3Glob(client, 's3://no-such-bucket/**/*.jpg')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SourceError);
    expect(error).toMatchObject({ code: 'file_not_found' });
    expect((error as Error).message).toMatch(
      /^s3:\/\/no-such-bucket\/\*\*\/\*\.jpg: the bucket does not exist/,
    );
    await expect(collect(listS3Glob(client, `s3://${BUCKET}/*`, { pageSize: 0 }))).rejects.toThrow(
      /pageSize/,
    );
    await expect(collect(listS3Glob(client, 's3://kitchen'))).rejects.toThrow(/no object key/);
  });
});

describe('listS3Glob on s3rver', () => {
  let server: TestS3Server;

  beforeAll(async () => {
    server = await startS3rverServer([BUCKET]);
  });
  afterAll(async () => {
    await server.close();
    vi.unstubAllEnvs();
  });

  it('lists in one page, and an unknown access key is source_forbidden without the key in the message', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
    const good = createS3Client({ AWS_ENDPOINT_URL_S3: server.endpoint, AWS_REGION: 'us-east-1' }).client;
    await putObjects(good, BUCKET, { 'k/a #1.jpg': 'a', 'k/b+c.jpg': 'b', 'k/.d.jpg': 'd' });
    expect((await collect(listS3Glob(good, `s3://${BUCKET}/k/*.jpg`))).map((o) => o.key)).toEqual([
      'k/a #1.jpg',
      'k/b+c.jpg',
    ]);
    good.destroy();

    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    const bad = createS3Client(
      { AWS_ENDPOINT_URL_S3: server.endpoint, AWS_REGION: 'us-east-1' },
      { maxAttempts: 1 },
    );
    const error = await collect(listS3Glob(bad.client, `s3://${BUCKET}/k/*.jpg`)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'source_forbidden', status: 403 });
    expect((error as Error).message).not.toContain(FAKE_KEY_ID);
    expect((error as Error).message).not.toContain(FAKE_SECRET);
    bad.client.destroy();
  });
});
