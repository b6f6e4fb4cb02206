/**
 * S3 globs and manifests in S3, against a real fauxqs server on 127.0.0.1 (pages of 1,000 keys),
 * seen through a counting proxy so that the number of ListObjectsV2 requests is asserted, not
 * assumed. s3rver stands in for a store that refuses the credentials (403).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkManifestFile, openManifest, readManifest } from '../../src/manifest/index.js';
import { createS3Client } from '../../src/storage/s3/client.js';
import { defaultSourceAccess, type SourceAccess } from '../../src/storage/sources.js';
import { useTempDir } from '../helpers/tmp.js';
import {
  FAKE_KEY_ID,
  FAKE_SECRET,
  putObjects,
  startFauxqsServer,
  startS3rverServer,
  type TestS3Server,
} from '../support/s3-servers.js';
import { manifestError } from './helpers.js';

const tmp = useTempDir('kb-manifest-s3-');
const BUCKET = 'kitchen';
const BIG = 1005;

/** A pass-through proxy in front of the S3 server that counts ListObjectsV2 requests. */
async function countingProxy(
  target: string,
): Promise<{ endpoint: string; lists: () => number; close(): Promise<void> }> {
  const upstream = new URL(target);
  let lists = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && /[?&]list-type=2(&|$)/.test(req.url ?? '')) lists++;
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    lists: () => lists,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('S3 globs and manifests in S3 (fauxqs)', () => {
  let s3: TestS3Server;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let client: S3Client;
  let access: SourceAccess;

  beforeAll(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    s3 = await startFauxqsServer([BUCKET]);
    proxy = await countingProxy(s3.endpoint);
    const env = { AWS_ENDPOINT_URL_S3: proxy.endpoint, AWS_REGION: 'us-east-1' };
    access = defaultSourceAccess(env);
    client = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' }).client;
    const big: Record<string, string> = {};
    for (let n = 0; n < BIG; n++) big[`big/k${String(n).padStart(4, '0')}.jpg`] = 'x';
    const entries = Object.entries(big);
    for (let at = 0; at < entries.length; at += 50) {
      await Promise.all(
        entries
          .slice(at, at + 50)
          .map(([key, body]) =>
            client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: Buffer.from(body) })),
          ),
      );
    }
    await putObjects(client, BUCKET, {
      'big/notes.txt': 'not an image',
      'mkt/sku123.jpg': 'a',
      'mkt/sku123.png': 'b',
      'mkt/sub/k1.jpg': 'c',
      'mkt/.hidden.jpg': 'd',
      'mkt/sub/K1.webp': 'e',
      'feeds/m.csv':
        'id,image,style\n,images/k1.jpg,modern\n,../top.jpg,modern\nset,images/*.jpg,modern\n,https://cdn.example/u/x.jpg?sig=S,modern\n',
      'feeds/m.jsonl?v=2': '{"image": "images/k2.jpg", "style": "modern"}\n',
      'feeds/images/k1.jpg': 'k1',
      'feeds/images/k2.jpg': 'k2',
    });
  }, 120_000);

  afterAll(async () => {
    client?.destroy();
    await proxy?.close();
    await s3?.close();
    vi.unstubAllEnvs();
  });

  it('lists a glob over two pages once per manifest, sorted, ids from the key names', async () => {
    await tmp.write(
      'm.csv',
      `id,image,style\n,s3://${BUCKET}/big/*.jpg,modern\nagain,s3://${BUCKET}/big/*.jpg,modern\n`,
    );
    const before = proxy.lists();
    const manifest = await openManifest('m.csv', { cwd: tmp.dir, access });
    // Two pages (1,000 + the rest) for the first row; the second row's same glob is not listed again.
    expect(proxy.lists() - before).toBe(2);
    expect(manifest.count).toBe(2 * BIG);
    const items = [];
    for await (const item of manifest.items()) items.push(item);
    await manifest.close();
    // The second reading uses the listing kept from the first.
    expect(proxy.lists() - before).toBe(2);
    expect(items).toHaveLength(2 * BIG);
    expect(items[0]).toMatchObject({
      id: 'k0000__modern',
      image: `s3://${BUCKET}/big/k0000.jpg`,
      imagePath: `s3://${BUCKET}/big/k0000.jpg`,
    });
    expect(items[BIG - 1]?.id).toBe(`k${BIG - 1}__modern`);
    expect(items[BIG]?.id).toBe('again-k0000__modern');
    expect(items.every((i) => i.rejection === undefined)).toBe(true);
    const ids = items.slice(0, BIG).map((i) => i.id);
    expect(ids).toEqual([...ids].sort());
  });

  it('names matches as local globs do: shared stems take the extension, the row id prefixes, dot files skipped', async () => {
    await tmp.write(
      'm.csv',
      `id,image,style\n,"s3://${BUCKET}/mkt/**/*.{jpg,png}",modern\nset,s3://${BUCKET}/mkt/**/*,modern\n`,
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir, access });
    expect(items.map((i) => [i.id, i.image])).toEqual([
      ['sku123-jpg__modern', `s3://${BUCKET}/mkt/sku123.jpg`],
      ['sku123-png__modern', `s3://${BUCKET}/mkt/sku123.png`],
      ['k1__modern', `s3://${BUCKET}/mkt/sub/k1.jpg`],
      ['set-sku123-jpg__modern', `s3://${BUCKET}/mkt/sku123.jpg`],
      ['set-sku123-png__modern', `s3://${BUCKET}/mkt/sku123.png`],
      ['set-K1-webp__modern', `s3://${BUCKET}/mkt/sub/K1.webp`],
      ['set-k1-jpg__modern', `s3://${BUCKET}/mkt/sub/k1.jpg`],
    ]);
  });

  it('a glob that matches nothing, and a bucket that does not exist: that row rejected, the rest goes on', async () => {
    await tmp.write(
      'm.csv',
      `id,image,style\n,s3://${BUCKET}/mkt/*.gif,modern\nmissing,s3://no-such-bucket/x/*.jpg,modern\n,s3://${BUCKET}/mkt/sku123.jpg,modern\n`,
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir, access });
    expect(items.map((i) => [i.id, i.imagePath, i.rejection?.code])).toEqual([
      ['s3---kitchen-mkt--.gif__modern', '', 'file_not_found'],
      ['missing__modern', '', 'file_not_found'],
      ['sku123__modern', `s3://${BUCKET}/mkt/sku123.jpg`, undefined],
    ]);
    expect(items[0]?.rejection?.message).toBe(`no object matches the glob "s3://${BUCKET}/mkt/*.gif"`);
    expect(items[1]?.rejection?.message).toMatch(
      /^cannot list the glob "s3:\/\/no-such-bucket\/x\/\*\.jpg": the bucket does not exist \(NoSuchBucket/,
    );
  });

  it('a manifest in S3: fetched once, relative refs and globs resolve in its folder', async () => {
    const { items, warnings } = await readManifest(`s3://${BUCKET}/feeds/m.csv`, { access });
    expect(warnings).toEqual([]);
    expect(items.map((i) => [i.id, i.imagePath, i.source.file, i.rejection])).toEqual([
      ['k1__modern', `s3://${BUCKET}/feeds/images/k1.jpg`, `s3://${BUCKET}/feeds/m.csv`, undefined],
      ['top__modern', `s3://${BUCKET}/top.jpg`, `s3://${BUCKET}/feeds/m.csv`, undefined],
      ['set-k1__modern', `s3://${BUCKET}/feeds/images/k1.jpg`, `s3://${BUCKET}/feeds/m.csv`, undefined],
      ['set-k2__modern', `s3://${BUCKET}/feeds/images/k2.jpg`, `s3://${BUCKET}/feeds/m.csv`, undefined],
      ['x__modern', 'https://cdn.example/u/x.jpg?sig=S', `s3://${BUCKET}/feeds/m.csv`, undefined],
    ]);
  });

  it('a key holding `?` is a key: its extension is the key’s, not a query’s', async () => {
    const error = await manifestError(readManifest(`s3://${BUCKET}/feeds/m.jsonl?v=2`, { access }));
    expect(error.message).toBe(
      `s3://${BUCKET}/feeds/m.jsonl?v=2: unsupported manifest type ".jsonl?v=2"; use .csv, .json, .jsonl or .ndjson`,
    );
  });

  it('an object that appears between the two readings is not read unchecked', async () => {
    await putObjects(client, BUCKET, { 'late/a.jpg': 'a' });
    await tmp.write('m.csv', `image,style\ns3://${BUCKET}/late/*.jpg,modern\n`);
    const manifest = await openManifest('m.csv', { cwd: tmp.dir, access });
    await putObjects(client, BUCKET, { 'late/b.jpg': 'b' });
    const items = [];
    for await (const item of manifest.items()) items.push(item);
    await manifest.close();
    // The listing kept from the check is the one read again: what was checked is what is run.
    expect(items.map((i) => [i.id, i.rejection])).toEqual([['a__modern', undefined]]);
    expect(manifest.count).toBe(1);
  });

  it('a manifest that is not in the bucket: a manifest error naming it and the reason', async () => {
    const checked = await manifestError(checkManifestFile(`s3://${BUCKET}/feeds/none.csv`, tmp.dir, access));
    expect(checked.message).toBe(
      `s3://${BUCKET}/feeds/none.csv: cannot fetch the manifest: no such object (NotFound, HTTP 404)`,
    );
    const error = await manifestError(readManifest(`s3://${BUCKET}/feeds/none.csv`, { access }));
    expect(error.message).toMatch(
      new RegExp(`^s3://${BUCKET}/feeds/none\\.csv: cannot fetch the manifest: no such object \\(NoSuchKey`),
    );
  });
});

describe('S3 listing refused (s3rver knows one key, not ours)', () => {
  let s3: TestS3Server;

  beforeAll(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    s3 = await startS3rverServer([BUCKET]);
  });

  afterAll(async () => {
    await s3?.close();
    vi.unstubAllEnvs();
  });

  it('rejects the glob’s row source_forbidden with a message naming the glob; no credential shows', async () => {
    await tmp.write('m.csv', `image,style\ns3://${BUCKET}/k/*.jpg,modern\nlocal.jpg,modern\n`);
    const access = defaultSourceAccess({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' });
    const { items } = await readManifest('m.csv', { cwd: tmp.dir, access });
    expect(items.map((i) => [i.id, i.rejection?.code])).toEqual([
      ['s3---kitchen-k--.jpg__modern', 'source_forbidden'],
      ['local__modern', undefined],
    ]);
    const message = items[0]?.rejection?.message ?? '';
    expect(message).toMatch(
      /^cannot list the glob "s3:\/\/kitchen\/k\/\*\.jpg": access refused \(InvalidAccessKeyId/,
    );
    expect(message).not.toContain(FAKE_KEY_ID);
    expect(message).not.toContain(FAKE_SECRET);
  });
});
