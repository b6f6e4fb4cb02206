/**
 * The run path of `s3://` sources (issue 32) against a real S3 server (fauxqs on 127.0.0.1) seen
 * through a recording pass-through on 127.0.0.1 that counts each request, its status and the body
 * bytes it carried, and answers for a few keys with S3's own faults (AccessDenied, SlowDown).
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPreflighter, type Preflighter } from '../../src/preflight/index.js';
import { type Decision, decide, releaseDecision } from '../../src/stages/decide.js';
import { type ItemState, newItemState } from '../../src/state/state.js';
import { createS3Client } from '../../src/storage/s3/client.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { Item } from '../../src/types.js';
import { sha256 } from '../../src/util/fs.js';
import { type TempDir, tempDirForTest } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';
import { FAKE_KEY_ID, FAKE_SECRET, startFauxqsServer, type TestS3Server } from '../support/s3-servers.js';

const BUCKET = 'kitchen';

/** What the pass-through saw of one request. */
interface Seen {
  method: string;
  path: string;
  ifNoneMatch: string | undefined;
  status: number;
  bytes: number;
}

/** A recording pass-through to `target`; `faults` answers for a path instead of the server. */
async function recorder(target: string, faults: Map<string, { status: number; code: string }>) {
  const seen: Seen[] = [];
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const entry: Seen = {
      method: req.method ?? '',
      path: (req.url ?? '').split('?')[0] ?? '',
      ifNoneMatch: req.headers['if-none-match'] as string | undefined,
      status: 0,
      bytes: 0,
    };
    seen.push(entry);
    const fault = faults.get(entry.path);
    if (fault) {
      entry.status = fault.status;
      res.writeHead(fault.status, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0"?><Error><Code>${fault.code}</Code><Message>${fault.code}</Message></Error>`,
      );
      return;
    }
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        entry.status = answer.statusCode ?? 0;
        res.writeHead(entry.status, answer.headers);
        answer.on('data', (chunk: Buffer) => {
          entry.bytes += chunk.length;
        });
        answer.pipe(res);
      },
    );
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    gets: (key: string) => seen.filter((s) => s.method === 'GET' && s.path === `/${BUCKET}/${key}`),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let s3: TestS3Server;
let client: S3Client;
let proxy: Awaited<ReturnType<typeof recorder>>;
const faults = new Map<string, { status: number; code: string }>();
let sources: Sources;
let tmp: TempDir;
let preflighter: Preflighter;
let image: Buffer;

beforeAll(async () => {
  vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
  s3 = await startFauxqsServer([BUCKET]);
  client = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' }).client;
  proxy = await recorder(s3.endpoint, faults);
  image = await kitchenJpeg(1, 320, 240);
});

afterAll(async () => {
  client.destroy();
  await proxy.close();
  await s3.close();
  vi.unstubAllEnvs();
});

beforeEach(async () => {
  sources = createSources({
    allowPrivate: true,
    maxBytes: 2_000_000,
    env: { AWS_ENDPOINT_URL_S3: proxy.url, AWS_REGION: 'us-east-1' },
  });
  tmp = await tempDirForTest('kb-s3-remote-');
  preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
});

afterEach(async () => {
  await preflighter.close();
  sources.close();
  faults.clear();
});

const put = (key: string, body: Buffer) =>
  client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));

function itemOf(key: string, style = 'modern'): Item {
  const ref = `s3://${BUCKET}/${key}`;
  return {
    id: `k__${style}`,
    image: ref,
    imagePath: ref,
    module: 'change-style',
    style,
    source: { file: 'm.csv', line: 2 },
  };
}

const decideFor = (item: Item, state?: ItemState) =>
  decide(item, { preflighter, state, outDir: tmp.dir, retryFailed: false, verify: false });

/** A finished item's state for `decision`, with its result on disk. */
async function finished(item: Item, decision: Decision): Promise<ItemState> {
  await tmp.write('results/k.jpg', 'result');
  const { size, mtimeMs } = await stat(tmp.file('results/k.jpg'));
  const planned = newItemState({
    t: 'item',
    id: item.id,
    fp: decision.fp,
    image: item.image,
    module: item.module,
    style: 'modern',
    src: decision.src,
  });
  return {
    ...planned,
    phase: 'downloaded',
    jobId: 'j1',
    output: 'results/k.jpg',
    sha256: sha256('result'),
    bytes: size,
    mtimeMs,
  };
}

describe('s3:// sources through preflight and decide', () => {
  it('six styles of one key: one GetObject, six uploads from one spooled file, gone after the last release', async () => {
    await put('six/k.jpg', image);
    const items = ['modern', 'rustic', 'scandi', 'industrial', 'coastal', 'classic'].map((s) =>
      itemOf('six/k.jpg', s),
    );
    const decisions = await Promise.all(items.map((item) => decideFor(item)));
    expect(proxy.gets('six/k.jpg')).toHaveLength(1);
    const file = decisions[0]?.action === 'submit' ? decisions[0].upload.path : '';
    expect(decisions.map((d) => (d.action === 'submit' ? d.upload.path : null))).toEqual(Array(6).fill(file));
    expect(decisions[0]?.src).toMatchObject({
      path: 's3://kitchen/six/k.jpg',
      sha256: sha256(image),
      etag: expect.stringMatching(/^"/),
    });
    for (const [i, decision] of decisions.entries()) {
      expect(await readFile(file)).toEqual(image);
      await releaseDecision(preflighter, items[i] as Item, decision);
      expect(existsSync(file)).toBe(i < 5);
    }
  });

  it('conditional rerun: If-None-Match with the journal ETag, 304, no body, sha reused; a replaced object is a new item', async () => {
    await put('rerun/k.jpg', image);
    const item = itemOf('rerun/k.jpg');
    const first = await decideFor(item);
    await releaseDecision(preflighter, item, first);
    const done = await finished(item, first);

    const rerun = await decideFor(item, done);
    expect(rerun).toMatchObject({ action: 'skip', reason: 'done', fp: first.fp, preflight: null });
    const [, conditional] = proxy.gets('rerun/k.jpg');
    expect(conditional).toMatchObject({ ifNoneMatch: first.src?.etag, status: 304, bytes: 0 });

    const edited = await kitchenJpeg(4, 320, 240);
    await put('rerun/k.jpg', edited);
    // A "not modified" is shared by the items decided soon after: the next run (preflighter) asks again.
    await preflighter.close();
    preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
    const changed = await decideFor(item, done);
    expect(proxy.gets('rerun/k.jpg')).toHaveLength(3); // the conditional GET's body is what preflight read
    expect(changed).toMatchObject({ action: 'submit', src: { sha256: sha256(edited) } });
    expect(changed.fp).not.toBe(first.fp);
    expect(changed.src?.etag).not.toBe(first.src?.etag);
    await releaseDecision(preflighter, item, changed);
  });

  it('NoSuchKey → file_not_found, AccessDenied → source_forbidden, SlowDown → source_unavailable', async () => {
    const missing = await decideFor(itemOf('nowhere/k.jpg'));
    expect(missing).toMatchObject({ action: 'reject', error: { code: 'file_not_found' } });
    faults.set(`/${BUCKET}/denied/k.jpg`, { status: 403, code: 'AccessDenied' });
    faults.set(`/${BUCKET}/slow/k.jpg`, { status: 503, code: 'SlowDown' });
    const denied = await decideFor(itemOf('denied/k.jpg'));
    expect(denied).toMatchObject({ action: 'reject', error: { code: 'source_forbidden' } });
    const slow = await decideFor(itemOf('slow/k.jpg'));
    expect(slow).toMatchObject({ action: 'reject', error: { code: 'source_unavailable' } });
    expect(proxy.gets('slow/k.jpg').length).toBeGreaterThan(1); // the SDK's own retries first
    for (const d of [missing, denied, slow])
      expect(d.action === 'reject' && d.error.message).toContain('s3://kitchen/');
    for (const [d, key] of [
      [missing, 'nowhere/k.jpg'],
      [denied, 'denied/k.jpg'],
      [slow, 'slow/k.jpg'],
    ] as const)
      await releaseDecision(preflighter, itemOf(key), d);
  });
});
