import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  fetchSource,
  fetchSourceBytes,
  type SourceBytes,
  type SourceNotModified,
} from '../../../src/storage/http/fetch.js';
import { failure, options } from './helpers.js';
import { jpegLike, SourceServer } from './source-server.js';

const IMAGE = jpegLike(4096);
const ETAG = '"v1-abc"';
const LAST_MODIFIED = 'Tue, 24 Nov 2026 10:00:00 GMT';

let server: SourceServer;

beforeEach(async () => {
  server = await new SourceServer().start();
  server.routes.set('/a.jpg', (req, res) => {
    if (req.headers['if-none-match'] === ETAG || req.headers['if-modified-since'] === LAST_MODIFIED) {
      res.writeHead(304, { etag: ETAG, 'last-modified': LAST_MODIFIED }).end();
      return;
    }
    res.writeHead(200, {
      'content-type': 'image/jpeg',
      'content-length': String(IMAGE.length),
      etag: ETAG,
      'last-modified': LAST_MODIFIED,
    });
    res.end(IMAGE);
  });
});
afterEach(async () => {
  await server.stop();
});

describe('fetchSource: answers', () => {
  it('reads an image with its ETag, Last-Modified, type and size, in one request without credentials', async () => {
    const got = (await fetchSourceBytes(server.url('/a.jpg'), options())) as SourceBytes;
    expect(got.notModified).toBe(false);
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(got).toMatchObject({ status: 200, size: 4096, etag: ETAG, lastModified: LAST_MODIFIED });
    expect(got.contentType).toBe('image/jpeg');
    expect(got.attempts).toBe(1);
    expect(server.requests).toHaveLength(1);
    const headers = server.requests[0]!.headers;
    expect(headers.authorization).toBeUndefined();
    expect(headers.cookie).toBeUndefined();
    expect(headers['proxy-authorization']).toBeUndefined();
    expect(headers['x-api-key']).toBeUndefined();
    expect(headers['accept-encoding']).toBe('identity');
    expect(headers['if-none-match']).toBeUndefined();
  });

  it('streams: size from Content-Length, the body as a stream', async () => {
    const got = await fetchSource(server.url('/a.jpg'), options());
    if (got.notModified) throw new Error('expected a body');
    expect(got.size).toBe(4096);
    const chunks: Buffer[] = [];
    for await (const chunk of got.body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(IMAGE)).toBe(true);
  });

  it('a matching If-None-Match or If-Modified-Since answers notModified, and the server saw the header', async () => {
    const byEtag = (await fetchSource(
      server.url('/a.jpg'),
      options({ ifNoneMatch: ETAG }),
    )) as SourceNotModified;
    expect(byEtag).toMatchObject({ notModified: true, status: 304, etag: ETAG });
    const byDate = await fetchSourceBytes(
      server.url('/a.jpg'),
      options({ ifModifiedSince: new Date(Date.parse(LAST_MODIFIED)) }),
    );
    expect(byDate.notModified).toBe(true);
    const changed = await fetchSourceBytes(server.url('/a.jpg'), options({ ifNoneMatch: '"v0-old"' }));
    expect(changed.notModified).toBe(false);
    expect(server.requests.map((r) => [r.headers['if-none-match'], r.headers['if-modified-since']])).toEqual([
      [ETAG, undefined],
      [undefined, LAST_MODIFIED],
      ['"v0-old"', undefined],
    ]);
  });

  it('a 304 to an unconditional request is not a success', async () => {
    server.routes.set('/odd', (_req, res) => res.writeHead(304).end());
    const error = await failure(fetchSourceBytes(server.url('/odd'), options({ retries: 0 })));
    expect(error).toMatchObject({ code: 'source_unavailable', status: 304 });
  });
});

describe('fetchSource: statuses', () => {
  for (const [status, code] of [
    [404, 'file_not_found'],
    [410, 'file_not_found'],
    [401, 'source_forbidden'],
    [403, 'source_forbidden'],
  ] as const) {
    it(`${status} is ${code} at once, without retries`, async () => {
      server.routes.set('/s', (_req, res) => res.writeHead(status).end('<html>no</html>'));
      const error = await failure(fetchSourceBytes(server.url('/s'), options()));
      expect(error).toMatchObject({ code, status, attempts: 1 });
      expect(error.retryLater).toBe(false);
      expect(server.seen('/s')).toHaveLength(1);
    });
  }

  it('500 on every try is source_unavailable after 1 + retries requests, with the backoff between them', async () => {
    server.routes.set('/s', (_req, res) => res.writeHead(500).end());
    const opts = options({ retries: 2 });
    const error = await failure(fetchSourceBytes(server.url('/s'), opts));
    expect(error).toMatchObject({ code: 'source_unavailable', status: 500, attempts: 3 });
    expect(error.retryLater).toBe(true);
    expect(server.seen('/s')).toHaveLength(3);
    expect(opts.waits).toEqual([10, 20]);
  });

  it('503 then 200 succeeds on the second request', async () => {
    server.routes.set('/s', (_req, res, hit) => (hit === 1 ? res.writeHead(503).end() : res.end(IMAGE)));
    const opts = options();
    const got = (await fetchSourceBytes(server.url('/s'), opts)) as SourceBytes;
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(got.attempts).toBe(2);
    expect(server.seen('/s')).toHaveLength(2);
    expect(opts.waits).toEqual([10]);
  });

  it('429 with Retry-After in seconds: waits that long (measured at the server), then succeeds', async () => {
    server.routes.set('/s', (_req, res, hit) =>
      hit === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.end(IMAGE),
    );
    const opts = options();
    const started = performance.now();
    const got = await fetchSourceBytes(server.url('/s'), opts);
    const elapsed = performance.now() - started;
    expect(got.notModified).toBe(false);
    const seen = server.seen('/s');
    expect(seen).toHaveLength(2);
    expect(opts.waits).toEqual([1000]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(990);
    expect(elapsed).toBeLessThan(2500);
  });

  it('429 with Retry-After as an HTTP-date is measured against the response Date', async () => {
    server.routes.set('/s', (_req, res, hit) => {
      if (hit > 1) return void res.end(IMAGE);
      const now = Math.floor(Date.now() / 1000) * 1000;
      res.setHeader('date', new Date(now).toUTCString());
      res.writeHead(429, { 'retry-after': new Date(now + 2000).toUTCString() }).end();
    });
    const opts = options();
    await fetchSourceBytes(server.url('/s'), opts);
    expect(opts.waits).toEqual([2000]);
    const seen = server.seen('/s');
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(1990);
  });

  it('a Retry-After over the cap gives up at once: one request, no wait', async () => {
    server.routes.set('/s', (_req, res) => res.writeHead(429, { 'retry-after': '3600' }).end());
    const opts = options({ maxRetryAfterMs: 60_000 });
    const started = performance.now();
    const error = await failure(fetchSourceBytes(server.url('/s'), opts));
    expect(error).toMatchObject({ code: 'source_unavailable', status: 429 });
    expect(error.message).toMatch(/Retry-After asks for 3600 s, over the 60 s cap/);
    expect(server.seen('/s')).toHaveLength(1);
    expect(opts.waits).toEqual([]);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a connection reset before the head is retried', async () => {
    server.routes.set('/s', (req, res, hit) => (hit === 1 ? req.socket.destroy() : res.end(IMAGE)));
    const got = (await fetchSourceBytes(server.url('/s'), options())) as SourceBytes;
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(got.attempts).toBe(2);
  });

  it('a body cut mid-way is fetched again from the start (bytes mode)', async () => {
    server.routes.set('/s', (req, res, hit) => {
      res.writeHead(200, { 'content-length': String(IMAGE.length) });
      if (hit === 1) res.write(IMAGE.subarray(0, 100), () => req.socket.destroy());
      else res.end(IMAGE);
    });
    const got = (await fetchSourceBytes(server.url('/s'), options())) as SourceBytes;
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(server.seen('/s')).toHaveLength(2);
  });
});

describe('fetchSource: redirects', () => {
  function chain(length: number): void {
    for (let i = 0; i < length; i++) {
      server.routes.set(`/r${i}`, (_req, res) =>
        res.writeHead(302, { location: `/r${i + 1}`, 'set-cookie': 'sid=1' }).end(),
      );
    }
    server.routes.set(`/r${length}`, (_req, res) => res.end(IMAGE));
  }

  it('follows 5 redirects (relative Location), sends no cookie it was given, and reports the final URL', async () => {
    chain(5);
    const got = (await fetchSourceBytes(server.url('/r0'), options())) as SourceBytes;
    expect(got.redirects).toBe(5);
    expect(got.url).toBe(server.url('/r5'));
    expect(server.requests).toHaveLength(6);
    expect(server.requests.every((r) => r.headers.cookie === undefined)).toBe(true);
  });

  it('refuses the 6th redirect without requesting its target', async () => {
    chain(6);
    const error = await failure(fetchSourceBytes(server.url('/r0'), options()));
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'redirects' });
    expect(server.requests.map((r) => r.url)).toEqual(['/r0', '/r1', '/r2', '/r3', '/r4', '/r5']);
  });
});

describe('fetchSource: where a redirect may go', () => {
  for (const [what, location, code, reason] of [
    ['a file: URL', 'file:///etc/passwd', 'source_blocked', 'scheme'],
    ['a URL with user:password', 'http://admin:pw@127.0.0.1/a.jpg', 'source_blocked', 'credentials'],
    ['no URL at all', 'http://[oops', 'source_unavailable', 'redirects'],
  ] as const) {
    it(`a redirect to ${what} is refused without following it`, async () => {
      server.routes.set('/hop', (_req, res) => res.writeHead(302, { location }).end());
      const error = await failure(fetchSourceBytes(server.url('/hop'), options()));
      expect(error).toMatchObject({ code, reason });
      expect(error.message).not.toContain(':pw@');
      expect(server.requests.map((r) => r.url)).toEqual(['/hop']);
    });
  }
});
