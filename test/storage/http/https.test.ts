import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fetchSourceBytes, type SourceBytes } from '../../../src/storage/http/fetch.js';
import { failure } from './helpers.js';
import { jpegLike, SourceServer, selfSigned } from './source-server.js';

const IMAGE = jpegLike(3000);
const here = dirname(fileURLToPath(import.meta.url));
let tls: ReturnType<typeof selfSigned>;
let secure: SourceServer;
let plain: SourceServer;

beforeAll(() => {
  tls = selfSigned();
});
afterAll(() => tls.cleanup());
beforeEach(async () => {
  secure = await new SourceServer({ key: tls.key, cert: tls.cert }).start();
  plain = await new SourceServer().start();
  for (const server of [secure, plain]) {
    server.routes.set('/a.jpg', (_req, res) =>
      res.writeHead(200, { etag: '"tls-1"', 'content-type': 'image/jpeg' }).end(IMAGE),
    );
  }
});
afterEach(async () => {
  await secure.stop();
  await plain.stop();
});

describe('https sources', () => {
  it('fetches from a self-signed server trusted through `ca`, sending no credentials', async () => {
    const got = (await fetchSourceBytes(secure.url('/a.jpg'), {
      allowPrivate: true,
      ca: tls.cert,
    })) as SourceBytes;
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(got.etag).toBe('"tls-1"');
    expect(secure.requests).toHaveLength(1);
    expect(secure.requests[0]!.headers.authorization).toBeUndefined();
    expect(secure.requests[0]!.headers.cookie).toBeUndefined();
  });

  it('an untrusted certificate fails before any request, as source_unavailable, not retried', async () => {
    const error = await failure(fetchSourceBytes(secure.url('/a.jpg'), { allowPrivate: true }));
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'network', attempts: 1 });
    expect(error.errno).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
    expect(secure.requests).toHaveLength(0);
  });

  it('an https → http redirect is refused: the http server sees nothing', async () => {
    secure.routes.set('/down', (_req, res) => res.writeHead(301, { location: plain.url('/a.jpg') }).end());
    const error = await failure(fetchSourceBytes(secure.url('/down'), { allowPrivate: true, ca: tls.cert }));
    expect(error).toMatchObject({ code: 'source_blocked', reason: 'downgrade', status: 301 });
    expect(plain.connections).toBe(0);
  });

  it('an http → https redirect is followed', async () => {
    plain.routes.set('/up', (_req, res) => res.writeHead(308, { location: secure.url('/a.jpg') }).end());
    const got = (await fetchSourceBytes(plain.url('/up'), {
      allowPrivate: true,
      ca: tls.cert,
    })) as SourceBytes;
    expect(got.url).toBe(secure.url('/a.jpg'));
    expect(got.redirects).toBe(1);
  });

  it('a TLS handshake that never completes is the connect timeout', async () => {
    const { createServer } = await import('node:net');
    const mute = createServer(() => {}); // accepts TCP, never says a TLS word
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    const port = (mute.address() as { port: number }).port;
    const started = performance.now();
    const error = await failure(
      fetchSourceBytes(`https://127.0.0.1:${port}/a.jpg`, {
        allowPrivate: true,
        connectTimeoutMs: 300,
        idleTimeoutMs: 10_000,
        retries: 1,
        backoffMs: () => 0,
      }),
    );
    mute.close();
    expect(error).toMatchObject({ code: 'source_unavailable', reason: 'timeout', attempts: 2 });
    expect(error.message).toMatch(/connecting timed out after 300 ms/);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(2000);
  });
});

describe('a child process with NODE_EXTRA_CA_CERTS and NODE_USE_ENV_PROXY', () => {
  it('trusts the CA from the environment, and the proxy sees the control request but not the fetch', async () => {
    const proxy = await new SourceServer().start();
    let tunnels = 0;
    proxy.server.on('connect', (_req, socket) => {
      tunnels++;
      socket.destroy();
    });
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(here, 'child-fetch.ts'), secure.url('/a.jpg')],
      {
        env: {
          ...process.env,
          NODE_EXTRA_CA_CERTS: tls.certPath,
          NODE_USE_ENV_PROXY: '1',
          HTTPS_PROXY: proxyUrl,
          HTTP_PROXY: proxyUrl,
          NO_PROXY: '',
          no_proxy: '',
        },
        timeout: 30_000,
      },
    );
    await proxy.stop();
    const result = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    expect(result.control).toMatch(/^error/); // the global agent went to the proxy, which hung up
    expect(tunnels).toBe(1);
    expect(result).toMatchObject({ ok: true, size: 3000, etag: '"tls-1"' });
    expect(secure.requests.map((r) => r.url)).toEqual(['/a.jpg']);
  });
});
