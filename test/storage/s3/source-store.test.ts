import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SourceError } from '../../../src/storage/http/errors.js';
import { createS3Client } from '../../../src/storage/s3/client.js';
import { S3SourceStore } from '../../../src/storage/s3/source-store.js';
import {
  FAKE_KEY_ID,
  FAKE_SECRET,
  FAKE_SESSION,
  putObjects,
  startFauxqsServer,
  startS3rverServer,
  type TestS3Server,
} from '../../support/s3-servers.js';

const BUCKET = 'kitchen';
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(5000, 7)]);
const ODD_KEY = 'sources/küche #1 ?v=2 +a b.jpg';

/** The error `promise` rejects with, checked to hold no credential in its message. */
async function failure(promise: Promise<unknown>): Promise<SourceError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SourceError);
  const message = (error as Error).message;
  for (const secret of [FAKE_KEY_ID, FAKE_SECRET, FAKE_SESSION]) expect(message).not.toContain(secret);
  return error as SourceError;
}

function clientFor(endpoint: string, maxAttempts = 2): S3Client {
  return createS3Client({ AWS_ENDPOINT_URL_S3: endpoint, AWS_REGION: 'us-east-1' }, { maxAttempts }).client;
}

describe('S3SourceStore on fauxqs', () => {
  let server: TestS3Server;
  let client: S3Client;
  let store: S3SourceStore;

  beforeAll(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    vi.stubEnv('AWS_SESSION_TOKEN', FAKE_SESSION);
    server = await startFauxqsServer([BUCKET]);
    client = clientFor(server.endpoint);
    store = new S3SourceStore(client, { maxBytes: 1_000_000 });
    await putObjects(client, BUCKET, { [ODD_KEY]: JPEG, 'sources/small.txt': 'hello' });
  });
  afterAll(async () => {
    client.destroy();
    await server.close();
    vi.unstubAllEnvs();
  });

  it('stat: size, Last-Modified, ETag as version, for a key with #, ?, +, spaces and unicode', async () => {
    const info = await store.stat(`s3://${BUCKET}/${ODD_KEY}`);
    expect(info).toMatchObject({ ref: `s3://${BUCKET}/${ODD_KEY}`, size: JPEG.length, versionId: null });
    expect(info.etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(info.version).toBe(info.etag);
    expect(Math.abs(info.mtimeMs - Date.now())).toBeLessThan(120_000);
  });

  it('open: the body streamed whole, head() peeks without losing bytes, a second read is another GET', async () => {
    const opened = await store.open(`s3://${BUCKET}/${ODD_KEY}`);
    expect(opened.localPath).toBeNull();
    expect(opened.size).toBe(JPEG.length);
    expect(await opened.head(4)).toEqual(JPEG.subarray(0, 4));
    expect(await opened.bytes()).toEqual(JPEG);
    // The held body is used up: these go to S3 again, pinned to the ETag.
    expect(await opened.head(3)).toEqual(JPEG.subarray(0, 3));
    expect(await opened.bytes()).toEqual(JPEG);
    expect(await opened.head(JPEG.length + 100)).toEqual(JPEG);
    // An opened source nobody reads is released by close() (twice is harmless).
    const unread = await store.open(`s3://${BUCKET}/${ODD_KEY}`);
    unread.close();
    unread.close();
    expect(await unread.head(2)).toEqual(JPEG.subarray(0, 2));
  });

  it('a missing key or bucket is file_not_found, naming the s3:// reference', async () => {
    const stat = await failure(store.stat(`s3://${BUCKET}/sources/missing.jpg`));
    expect(stat.code).toBe('file_not_found');
    expect(stat.status).toBe(404);
    expect(stat.message).toBe(`s3://${BUCKET}/sources/missing.jpg: no such object (NotFound, HTTP 404)`);
    const open = await failure(store.open(`s3://${BUCKET}/sources/missing.jpg`));
    expect(open.code).toBe('file_not_found');
    expect(open.message).toContain('NoSuchKey');
    const bucket = await failure(store.open('s3://no-such-bucket/x.jpg'));
    expect(bucket.code).toBe('file_not_found');
  });

  it('size cap: refused from Content-Length before the body is read', async () => {
    const small = new S3SourceStore(client, { maxBytes: 100 });
    const error = await failure(small.open(`s3://${BUCKET}/${ODD_KEY}`));
    expect(error.code).toBe('too_large');
    expect(error.message).toBe(
      `s3://${BUCKET}/${ODD_KEY} is ${JPEG.length} bytes, over the source size cap of 100 bytes (--max-source-bytes)`,
    );
    // The per-read cap wins over the store's.
    expect((await store.open(`s3://${BUCKET}/sources/small.txt`, { maxBytes: 5 })).size).toBe(5);
    const over = await failure(store.open(`s3://${BUCKET}/sources/small.txt`, { maxBytes: 4 }));
    expect(over.code).toBe('too_large');
  });

  it('conditional read: the known ETag answers not-modified with no body; another ETag reads', async () => {
    const ref = `s3://${BUCKET}/${ODD_KEY}`;
    const { etag } = await store.stat(ref);
    expect(await store.openIfChanged(ref, etag)).toEqual({ notModified: true, ref, etag });
    const changed = await store.openIfChanged(ref, '"0123456789abcdef0123456789abcdef"');
    expect('notModified' in changed).toBe(false);
    if (!('notModified' in changed)) expect(await changed.bytes()).toEqual(JPEG);
  });

  it('a re-read after the object was replaced fails (If-Match on the first ETag) instead of mixing versions', async () => {
    const ref = `s3://${BUCKET}/sources/replaced.jpg`;
    await putObjects(client, BUCKET, { 'sources/replaced.jpg': JPEG });
    const opened = await store.open(ref);
    expect(await opened.bytes()).toEqual(JPEG);
    await putObjects(client, BUCKET, { 'sources/replaced.jpg': 'other bytes' });
    const error = await failure(opened.bytes());
    expect(error).toMatchObject({ code: 'source_unavailable', status: 412 });
    expect(error.message).toContain('changed while it was being read');
  });

  it('an aborted signal cancels the request with the abort, not a source error', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await store
      .open(`s3://${BUCKET}/${ODD_KEY}`, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(SourceError);
    expect((error as Error).name).toBe('AbortError');
  });
});

describe('S3SourceStore on s3rver (checks the access key id)', () => {
  let server: TestS3Server;

  beforeAll(async () => {
    server = await startS3rverServer([BUCKET]);
  });
  afterAll(async () => {
    await server.close();
    vi.unstubAllEnvs();
  });

  it('an access key the server does not know is source_forbidden, on HEAD (403) and GET (InvalidAccessKeyId)', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
    const good = clientFor(server.endpoint);
    await putObjects(good, BUCKET, { 'k/a.jpg': JPEG });
    expect((await new S3SourceStore(good).stat(`s3://${BUCKET}/k/a.jpg`)).size).toBe(JPEG.length);
    good.destroy();

    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    const bad = clientFor(server.endpoint);
    const store = new S3SourceStore(bad);
    const head = await failure(store.stat(`s3://${BUCKET}/k/a.jpg`));
    expect(head).toMatchObject({ code: 'source_forbidden', status: 403 });
    expect(head.message).toBe(
      `s3://${BUCKET}/k/a.jpg: access refused (HTTP 403); check the credentials and the bucket policy`,
    );
    const get = await failure(store.open(`s3://${BUCKET}/k/a.jpg`));
    expect(get.code).toBe('source_forbidden');
    expect(get.message).toBe(
      `s3://${BUCKET}/k/a.jpg: access refused (InvalidAccessKeyId, HTTP 403); check the credentials and the bucket policy`,
    );
    bad.destroy();
  });
});

/** A node:http server playing S3 for the faults no S3 server here can be asked to make. */
async function faultServer(handle: (req: IncomingMessage, res: import('node:http').ServerResponse) => void) {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handle(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('S3SourceStore faults', () => {
  beforeAll(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
  });
  afterAll(() => vi.unstubAllEnvs());

  it('503 SlowDown after the SDK retries is source_unavailable; the request count is maxAttempts', async () => {
    const server = await faultServer((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end(
        '<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>',
      );
    });
    const client = clientFor(server.endpoint, 3);
    const error = await failure(new S3SourceStore(client).open(`s3://${BUCKET}/a.jpg`));
    expect(error).toMatchObject({ code: 'source_unavailable', status: 503, attempts: 3 });
    expect(error.message).toBe(
      `s3://${BUCKET}/a.jpg: S3 is unavailable after 3 attempts (SlowDown, HTTP 503)`,
    );
    expect(server.requests).toEqual(Array(3).fill(`GET /${BUCKET}/a.jpg?x-id=GetObject`));
    client.destroy();
    await server.close();
  });

  it('a refused connection is source_unavailable (network)', async () => {
    const server = await faultServer(() => {});
    await server.close();
    const client = clientFor(server.endpoint, 2);
    const error = await failure(new S3SourceStore(client).stat(`s3://${BUCKET}/a.jpg`));
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'network', errno: 'ECONNREFUSED' });
    client.destroy();
  });

  it('aborting mid-body ends the stream with the abort, not a source error', async () => {
    const server = await faultServer((_req, res) => {
      res.writeHead(200, { etag: '"abc"', 'content-type': 'image/jpeg' });
      res.write(Buffer.alloc(1024, 1)); // then nothing more: a stalled body
    });
    const client = clientFor(server.endpoint, 1);
    const controller = new AbortController();
    const opened = await new S3SourceStore(client).open(`s3://${BUCKET}/slow.jpg`, {
      signal: controller.signal,
    });
    expect((await opened.head(10)).length).toBe(10);
    const reading = opened.bytes().catch((e: unknown) => e);
    setTimeout(() => controller.abort(), 50);
    const error = await reading;
    expect(error).not.toBeInstanceOf(SourceError);
    expect((error as Error).name).toBe('AbortError');
    client.destroy();
    await server.close();
  });

  it('a body without Content-Length that runs past the cap is cut there with too_large', async () => {
    let sent = 0;
    const server = await faultServer((_req, res) => {
      res.writeHead(200, { etag: '"abc"', 'content-type': 'image/jpeg' });
      // Chunked, no length: 64 KiB chunks until the client goes away (at most 4 MiB).
      const pump = () => {
        while (sent < 4 * 1024 * 1024 && res.write(Buffer.alloc(65536, 1))) sent += 65536;
        if (sent >= 4 * 1024 * 1024) res.end();
      };
      res.on('drain', pump);
      pump();
    });
    const client = clientFor(server.endpoint, 1);
    const opened = await new S3SourceStore(client, { maxBytes: 200_000 }).open(`s3://${BUCKET}/big.jpg`);
    const error = await failure(opened.bytes());
    expect(error.code).toBe('too_large');
    expect(error.message).toBe(
      `s3://${BUCKET}/big.jpg is larger than the source size cap of 200000 bytes (--max-source-bytes)`,
    );
    // The body was abandoned near the cap, not read to its end.
    expect(sent).toBeLessThan(4 * 1024 * 1024);
    client.destroy();
    await server.close();
  });
});
