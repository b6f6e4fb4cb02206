/**
 * `enqueue` over remote sources (issue 32): an https-style URL on a real source server and an
 * `s3://` object on a real S3-compatible server (fauxqs), both on 127.0.0.1, queued in a real Redis.
 * A source with a version (ETag, Last-Modified) is only stat'ed: the server records that it never
 * finished sending a body. One without a version is read once. A second enqueue of the unchanged
 * catalogue queues nothing new; a worker whose fingerprint is the sha256 one still owns the job.
 */
import type http from 'node:http';
import type { S3Client } from '@aws-sdk/client-s3';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { enqueueItems } from '../../src/commands/enqueue.js';
import { DEFAULT_MAX_SOURCE_BYTES } from '../../src/limits.js';
import { createS3Client } from '../../src/storage/s3/client.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { SourceStore } from '../../src/storage/types.js';
import type { Item } from '../../src/types.js';
import { BULL_QUEUE, DEFAULT_KEYS } from '../../src/worker/queue.js';
import { reportRows } from '../../src/worker/report.js';
import { JobStore } from '../../src/worker/store.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';
import { HAS_REDIS } from '../support/redis.js';
import {
  FAKE_KEY_ID,
  FAKE_SECRET,
  putObjects,
  startFauxqsServer,
  type TestS3Server,
} from '../support/s3-servers.js';
import { useRedis } from './world.js';

/** A body far larger than any socket buffer: a stat that read it would be seen finishing it. */
const BIG = 64 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x5a);
CHUNK.set([0xff, 0xd8, 0xff, 0xe0]);

/** What the server sent of each path's bodies: bytes, and whether a body was sent to its end. */
const served = new Map<string, { bodies: number; finished: number; bytes: number }>();

/**
 * A route that answers 200 with `headers` and a {@link BIG} body written as the socket takes it,
 * recording how much went out and whether it all did (a dropped body closes the response first).
 */
function bigBody(path: string, headers: () => http.OutgoingHttpHeaders) {
  return (_req: http.IncomingMessage, res: http.ServerResponse) => {
    const seen = served.get(path) ?? { bodies: 0, finished: 0, bytes: 0 };
    served.set(path, seen);
    seen.bodies++;
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': BIG, ...headers() });
    let sent = 0;
    const pump = () => {
      while (sent < BIG && !res.destroyed) {
        sent += CHUNK.length;
        seen.bytes += CHUNK.length;
        if (!res.write(CHUNK)) return void res.once('drain', pump);
      }
      if (sent >= BIG) res.end(() => seen.finished++);
    };
    pump();
  };
}

function item(n: number, ref: string): Item {
  return {
    id: `k${n}__modern`,
    image: ref,
    imagePath: ref,
    module: 'change-style',
    style: 'modern',
    source: { file: 'feed.csv', line: n + 2 },
  };
}

async function* each<T>(values: T[]): AsyncGenerator<T> {
  yield* values;
}

/** A {@link SourceStore} that counts what was asked of the real one (no stand-in: it passes through). */
function counting(store: SourceStore) {
  const calls = { stat: [] as string[], open: [] as string[] };
  const wrapped: SourceStore = {
    stat: (ref) => {
      calls.stat.push(ref);
      return store.stat(ref);
    },
    open: (ref) => {
      calls.open.push(ref);
      return store.open(ref);
    },
  };
  return { store: wrapped, calls };
}

describe.skipIf(!HAS_REDIS)('enqueue with remote sources (real Redis, source server and S3)', () => {
  const redis = useRedis();
  const source = new SourceServer();
  let s3: TestS3Server;
  let admin: S3Client;
  let sources: Sources;
  let etag = '"v1"';
  let connection: Redis;

  beforeAll(async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', FAKE_KEY_ID);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', FAKE_SECRET);
    await source.start();
    source.routes.set(
      '/etag.jpg',
      bigBody('/etag.jpg', () => ({ etag })),
    );
    source.routes.set(
      '/dated.jpg',
      bigBody('/dated.jpg', () => ({ 'last-modified': 'Wed, 25 Nov 2026 10:00:00 GMT' })),
    );
    const plain = await kitchenJpeg(3, 160, 120, 'tinted');
    source.routes.set('/plain.jpg', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': plain.length });
      res.end(plain);
    });
    s3 = await startFauxqsServer(['kitchen']);
    const env = { AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' };
    admin = createS3Client(env).client;
    await putObjects(admin, 'kitchen', { 'kitchens/k4.jpg': await kitchenJpeg(4, 160, 120, 'tinted') });
    // The test's server is on 127.0.0.1: the guard lets it through only with allowPrivate.
    sources = createSources({ maxBytes: DEFAULT_MAX_SOURCE_BYTES, allowPrivate: true, env });
  });
  afterAll(async () => {
    connection?.disconnect();
    sources?.close();
    admin?.destroy();
    await s3?.close();
    await source.stop();
    vi.unstubAllEnvs();
  });

  it('stats versioned sources without their bodies, reads a versionless one once; again: nothing new', async () => {
    connection = new Redis(redis.url);
    const refs = [
      source.url('/etag.jpg?X-Amz-Signature=first'),
      source.url('/dated.jpg'),
      source.url('/plain.jpg'),
      's3://kitchen/kitchens/k4.jpg',
    ];
    const items = refs.map((ref, i) => item(i + 1, ref));
    const rejected: string[] = [];
    const first = counting(sources);
    const counts = await enqueueItems(connection, each(items), (_i, m) => rejected.push(m), {
      sources: first.store,
    });
    expect(rejected).toEqual([]);
    expect(counts).toMatchObject({ items: 4, added: 4, rejected: 0 });
    expect(first.calls.stat.sort()).toEqual([...refs].sort());
    // Only the source that has no version is read (once), to hash it.
    expect(first.calls.open).toEqual([source.url('/plain.jpg')]);
    for (const path of ['/etag.jpg', '/dated.jpg']) {
      const seen = served.get(path)!;
      expect([path, seen.bodies, seen.finished]).toEqual([path, 1, 0]);
      expect(seen.bytes).toBeLessThan(BIG);
    }

    // Unchanged (a pre-signed URL signed again is the same object): the same jobs, nothing added.
    refs[0] = source.url('/etag.jpg?X-Amz-Signature=second');
    const again = await enqueueItems(connection, each(refs.map((ref, i) => item(i + 1, ref))), () => {}, {
      sources,
    });
    expect(again).toMatchObject({ items: 4, added: 0, already_queued: 4, replaced: 0 });
    expect(served.get('/etag.jpg')!.finished).toBe(0);
  });

  it("a worker's state under the sha fingerprint is the queued job's; a changed ETag is a new item", async () => {
    connection = new Redis(redis.url);
    const ref = source.url('/etag.jpg');
    await enqueueItems(connection, each([item(1, ref)]), () => {}, { sources });
    // A worker takes the job and plans the item under the fingerprint its decide computes (sha256
    // of the bytes: not the enqueue's), then ends it, as the worker's steps would.
    const worker = new Worker(BULL_QUEUE, null, {
      prefix: DEFAULT_KEYS.prefix,
      connection: { url: redis.url },
      autorun: false,
    });
    const job = (await worker.getNextJob('token-1'))!;
    expect(job.data.id).toBe('k1__modern');
    const store = new JobStore(connection, job.id!, 'token-1', undefined);
    await store.plan({
      id: 'k1__modern',
      fp: 'sha-fingerprint',
      image: ref,
      module: 'change-style',
      style: 'modern',
      src: null,
    });
    const error = { code: 'too_large', message: 'over --max-source-bytes' };
    await store.record({ t: 'rejected', id: 'k1__modern', fp: 'sha-fingerprint', error });
    await job.moveToCompleted({ status: 'rejected', job_id: null }, 'token-1', false);
    await worker.close();
    // The report matches the state to the job by `queued`, not by fingerprint.
    const rows = [];
    for await (const row of reportRows(connection)) rows.push(row);
    expect(rows).toMatchObject([{ id: 'k1__modern', status: 'rejected', error }]);
    // The next enqueue of the unchanged source finds the job done.
    const again = await enqueueItems(connection, each([item(1, ref)]), () => {}, { sources });
    expect(again).toMatchObject({ added: 0, already_done: 1 });
    // The source changed (its ETag): a new job; the old one, done, stays in the report's history.
    etag = '"v2"';
    const changed = await enqueueItems(connection, each([item(1, ref)]), () => {}, { sources });
    expect(changed).toMatchObject({ added: 1, already_done: 0 });
    const after = [];
    for await (const row of reportRows(connection)) after.push(row);
    expect(after).toMatchObject([
      { id: 'k1__modern', status: 'incomplete', error: { code: 'not_submitted' } },
    ]);
  });

  it('stats at most 16 sources at once (a catalogue of 10^5 items does not open 10^5 sockets)', async () => {
    connection = new Redis(redis.url);
    // Calls into the real store, counted while they are under way: every call starts in the same
    // turn (the items are at hand, the answers need the network), so the most seen is the bound.
    let inFlight = 0;
    let most = 0;
    const bounded: SourceStore = {
      stat: async (ref) => {
        most = Math.max(most, ++inFlight);
        try {
          return await sources.stat(ref);
        } finally {
          inFlight--;
        }
      },
      open: (ref) => sources.open(ref),
    };
    const items: Item[] = [];
    for (let n = 0; n < 40; n++) {
      source.routes.set(`/many/${n}.jpg`, (_req, res) => {
        res.writeHead(200, { 'content-type': 'image/jpeg', etag: `"m${n}"`, 'content-length': 4 });
        res.end(Buffer.from([0xff, 0xd8, 0xff, 0xe0]));
      });
      items.push(item(100 + n, source.url(`/many/${n}.jpg`)));
    }
    const counts = await enqueueItems(connection, each(items), () => {}, { sources: bounded });
    expect(counts).toMatchObject({ items: 40, added: 40 });
    expect(most).toBe(16);
    expect(source.requests.filter((r) => r.url.startsWith('/many/'))).toHaveLength(40);
  });

  it("a source that cannot be stat'ed is named (URL redacted) and not queued", async () => {
    connection = new Redis(redis.url);
    const rejected: string[] = [];
    const counts = await enqueueItems(
      connection,
      each([item(7, source.url('/gone.jpg?sig=s3cr3t')), item(8, 's3://kitchen/kitchens/missing.jpg')]),
      (i, message) => rejected.push(`${i.id}: ${message}`),
      { sources },
    );
    expect(counts).toMatchObject({ items: 2, added: 0, rejected: 2 });
    expect(rejected.join('\n')).not.toContain('s3cr3t');
    expect(rejected[0]).toMatch(
      /^k7__modern: cannot read http:\/\/127\.0\.0\.1:\d+\/gone\.jpg\?sig=\*\*\* \(file_not_found: /,
    );
    expect(rejected[1]).toMatch(
      /^k8__modern: cannot read s3:\/\/kitchen\/kitchens\/missing\.jpg \(file_not_found: /,
    );
  });
});
