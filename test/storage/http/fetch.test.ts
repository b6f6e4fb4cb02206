import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SourceError } from '../../../src/storage/http/errors.js';
import {
  type FetchSourceOptions,
  fetchSource,
  fetchSourceBytes,
  type SourceBytes,
  type SourceNotModified,
} from '../../../src/storage/http/fetch.js';
import { jpegLike, SourceServer } from './source-server.js';

const IMAGE = jpegLike(4096);
const ETAG = '"v1-abc"';
const LAST_MODIFIED = 'Tue, 24 Nov 2026 10:00:00 GMT';

/** Loopback is the test server's address, so the tests opt in; waits are recorded, not slept. */
function options(extra: FetchSourceOptions = {}): FetchSourceOptions & { waits: number[] } {
  const waits: number[] = [];
  return {
    allowPrivate: true,
    backoffMs: (retry) => retry * 10,
    sleep: async (ms) => {
      waits.push(ms);
      await new Promise((resolve) => setTimeout(resolve, ms));
    },
    ...extra,
    waits,
  };
}

async function failure(promise: Promise<unknown>): Promise<SourceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SourceError);
  return error as SourceError;
}

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

describe('fetchSource: size cap', () => {
  it('a Content-Length over the cap is refused before reading the body', async () => {
    let closedEarly = false;
    server.routes.set('/big', (_req, res) => {
      res.writeHead(200, { 'content-length': String(64 * 1024 * 1024) });
      const chunk = Buffer.alloc(64 * 1024);
      let sent = 0;
      const pump = (): void => {
        while (sent < 64 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => {
        closedEarly = sent < 64 * 1024 * 1024;
      });
      pump();
    });
    const error = await failure(fetchSource(server.url('/big'), options({ maxBytes: 1024 * 1024 })));
    expect(error).toMatchObject({ code: 'too_large', reason: 'size' });
    expect(error.message).toMatch(/Content-Length 67108864/);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closedEarly).toBe(true);
  });

  it('without Content-Length, the stream is cut as soon as it passes the cap: the server sent far less', async () => {
    const total = 64 * 1024 * 1024;
    let sent = 0;
    let closed = false;
    server.routes.set('/big', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' }); // chunked: no Content-Length
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = (): void => {
        while (sent < total && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      res.on('close', () => {
        closed = true;
      });
      pump();
    });
    const error = await failure(fetchSourceBytes(server.url('/big'), options({ maxBytes: 1024 * 1024 })));
    expect(error).toMatchObject({ code: 'too_large' });
    expect(error.message).toMatch(/more than 1048576 bytes/);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(true);
    expect(sent).toBeLessThan(total / 4);
    expect(server.seen('/big')).toHaveLength(1); // too_large is not retried
  });
});

describe('fetchSource: timeouts and abort', () => {
  /** Headers and a first byte, then one byte every 500 ms: a body that drips. */
  function drip(): void {
    server.routes.set('/drip', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.write('x');
      const timer = setInterval(() => res.write('x'), 500);
      res.on('close', () => clearInterval(timer));
    });
  }

  it('a dripping body fails on the idle timeout, is retried once, then is source_unavailable', async () => {
    drip();
    const started = performance.now();
    const error = await failure(
      fetchSourceBytes(server.url('/drip'), options({ idleTimeoutMs: 200, retries: 1 })),
    );
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'timeout' });
    expect(error.message).toMatch(/waiting for data timed out after 200 ms/);
    expect(server.seen('/drip')).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(1500);
  });

  it('a head that never comes fails on the idle timeout too', async () => {
    server.routes.set('/mute', () => {});
    const error = await failure(
      fetchSource(server.url('/mute'), options({ idleTimeoutMs: 150, retries: 0 })),
    );
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'timeout' });
    expect(server.seen('/mute')).toHaveLength(1);
  });

  it('the total deadline stops a body that keeps dripping under the idle timeout', async () => {
    drip();
    const started = performance.now();
    const got = await fetchSource(server.url('/drip'), options({ totalTimeoutMs: 700, idleTimeoutMs: 5000 }));
    if (got.notModified) throw new Error('expected a body');
    const error = await failure(
      (async () => {
        for await (const _ of got.body);
      })(),
    );
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'timeout' });
    expect(error.message).toMatch(/700 ms total/);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(650);
    expect(elapsed).toBeLessThan(1500);
  });

  it('the caller’s signal stops a Retry-After wait at once, with its own reason', async () => {
    server.routes.set('/s', (_req, res) => res.writeHead(503, { 'retry-after': '30' }).end());
    const controller = new AbortController();
    const reason = new Error('run stopped');
    setTimeout(() => controller.abort(reason), 200);
    const started = performance.now();
    const error = await fetchSourceBytes(server.url('/s'), {
      allowPrivate: true,
      maxRetryAfterMs: 60_000,
      signal: controller.signal,
    }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(server.seen('/s')).toHaveLength(1);
  });

  it('the caller’s signal stops a body mid-stream', async () => {
    drip();
    const controller = new AbortController();
    const got = await fetchSource(server.url('/drip'), options({ signal: controller.signal }));
    if (got.notModified) throw new Error('expected a body');
    setTimeout(() => controller.abort(new Error('stop')), 100);
    const error = await (async () => {
      for await (const _ of got.body);
    })().catch((e: unknown) => e);
    expect((error as Error).message).toBe('stop');
  });
});

describe('fetchSource: secrets in URLs', () => {
  it('the error message shows the signature as ***, the server received it whole', async () => {
    const query = 'X-Amz-Credential=AKIA%2Fx&X-Amz-Signature=deadbeefsecret&Expires=1700000000';
    const error = await failure(fetchSourceBytes(server.url(`/missing.jpg?${query}`), options()));
    expect(error.code).toBe('file_not_found');
    expect(error.message).toContain('X-Amz-Signature=***');
    expect(error.message).toContain('X-Amz-Credential=***');
    expect(error.message).toContain('Expires=1700000000');
    expect(error.message).not.toContain('deadbeefsecret');
    expect(server.requests[0]!.url).toBe(`/missing.jpg?${query}`);
  });

  it('a URL with user:password is refused before any connection, and the message does not echo it', async () => {
    const url = server.url('/a.jpg').replace('://', '://alice:hunter2@');
    const error = await failure(fetchSourceBytes(url, options()));
    expect(error).toMatchObject({ code: 'source_blocked', reason: 'credentials' });
    expect(error.message).not.toContain('hunter2');
    expect(server.connections).toBe(0);
  });

  it('anything but http(s) is refused', async () => {
    for (const url of ['ftp://127.0.0.1/a.jpg', 'file:///etc/passwd', 'not a url']) {
      const error = await failure(fetchSourceBytes(url, options()));
      expect(error, url).toMatchObject({ code: 'source_blocked', reason: 'scheme' });
    }
  });
});
