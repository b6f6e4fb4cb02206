import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fetchSource, fetchSourceBytes } from '../../../src/storage/http/fetch.js';
import { failure, options } from './helpers.js';
import { SourceServer } from './source-server.js';

let server: SourceServer;

beforeEach(async () => {
  server = await new SourceServer().start();
});
afterEach(async () => {
  await server.stop();
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
