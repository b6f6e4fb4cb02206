import diagnostics from 'node:diagnostics_channel';
import http from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SourceError } from '../../../src/storage/http/errors.js';
import { fetchSourceBytes, type SourceBytes } from '../../../src/storage/http/fetch.js';
import {
  allowPrivateFromEnv,
  checkHost,
  type ResolvedAddress,
  SourceAgents,
} from '../../../src/storage/http/guard.js';
import { failure } from './helpers.js';
import { jpegLike, SourceServer } from './source-server.js';

const IMAGE = jpegLike(2048);

/** Counts client sockets Node creates (its own diagnostics channel): "no connection" made observable. */
let sockets = 0;
const onSocket = (): void => {
  sockets++;
};

/** A resolver that answers from a script, one answer per call (the last one repeats), and counts. */
function scripted(...answers: string[][]): {
  resolve: (host: string) => Promise<ResolvedAddress[]>;
  calls: string[];
} {
  const calls: string[] = [];
  return {
    calls,
    resolve: async (host) => {
      calls.push(host);
      const answer = answers[Math.min(calls.length, answers.length) - 1] ?? [];
      return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

let server: SourceServer;
beforeEach(async () => {
  sockets = 0;
  diagnostics.subscribe('net.client.socket', onSocket);
  server = await new SourceServer().start();
  server.routes.set('/a.jpg', (_req, res) => res.end(IMAGE));
});
afterEach(async () => {
  diagnostics.unsubscribe('net.client.socket', onSocket);
  await server.stop();
});

describe('address guard: allowPrivate off (the default)', () => {
  it('refuses a loopback literal before any socket exists, naming the class and the flag', async () => {
    const error = await failure(fetchSourceBytes(server.url('/a.jpg')));
    expect(error).toMatchObject({ code: 'source_blocked', reason: 'address', addressClass: 'loopback' });
    expect(error.message).toBe(
      'source host 127.0.0.1 is a loopback address; --allow-private-sources lets loopback addresses through',
    );
    expect(sockets).toBe(0);
    expect(server.connections).toBe(0);
  });

  it('refuses loopback however the URL spells it (hex, dword, short, IPv4-mapped IPv6)', async () => {
    const port = server.port;
    for (const host of ['0x7f.1', '2130706433', '127.1', '[::ffff:127.0.0.1]', '[::1]', '0.0.0.0']) {
      const error = await failure(fetchSourceBytes(`http://${host}:${port}/a.jpg`));
      expect(error, host).toMatchObject({ code: 'source_blocked', reason: 'address' });
    }
    expect(sockets).toBe(0);
    expect(server.connections).toBe(0);
  });

  it('refuses localhost through the system resolver, at connect time, before a byte is sent', async () => {
    const error = await failure(fetchSourceBytes(server.url('/a.jpg', 'localhost')));
    expect(error).toMatchObject({ code: 'source_blocked', addressClass: 'loopback' });
    expect(error.message).toMatch(
      /^source host localhost resolves to (127\.0\.0\.1|::1), a loopback address;/,
    );
    expect(server.connections).toBe(0);
  });

  it('refuses a name that resolves to a private address, with the flag in the message', async () => {
    const dns = scripted(['10.0.0.5']);
    const error = await failure(fetchSourceBytes('http://dam.internal.test/a.jpg', { resolve: dns.resolve }));
    expect(error.message).toBe(
      'source host dam.internal.test resolves to 10.0.0.5, a private address; --allow-private-sources lets private addresses through',
    );
    expect(dns.calls).toEqual(['dam.internal.test']);
  });

  it('KITCHEN_ALLOW_PRIVATE_SOURCES=1 and nothing else turns allowPrivate on', () => {
    expect(allowPrivateFromEnv({ KITCHEN_ALLOW_PRIVATE_SOURCES: '1' })).toBe(true);
    expect(allowPrivateFromEnv({ KITCHEN_ALLOW_PRIVATE_SOURCES: 'true' })).toBe(false);
    expect(allowPrivateFromEnv({})).toBe(false);
  });
});

describe('address guard: at connect time', () => {
  it('a name resolving to loopback is fetched with allowPrivate, through the injected resolver', async () => {
    const dns = scripted(['127.0.0.1']);
    const url = `http://images.example.test:${server.port}/a.jpg`;
    const got = (await fetchSourceBytes(url, { allowPrivate: true, resolve: dns.resolve })) as SourceBytes;
    expect(got.bytes.equals(IMAGE)).toBe(true);
    expect(server.requests[0]!.headers.host).toBe(`images.example.test:${server.port}`);
    expect(dns.calls).toEqual(['images.example.test']);
  });

  it('DNS rebinding: a pre-check passes, the answer at connect time is metadata, nothing connects', async () => {
    const dns = scripted(['127.0.0.1'], ['169.254.169.254']);
    const guard = { allowPrivate: true, resolve: dns.resolve };
    await expect(checkHost('rebind.example.test', guard)).resolves.toEqual([
      { address: '127.0.0.1', family: 4 },
    ]);
    const error = await failure(fetchSourceBytes(`http://rebind.example.test:${server.port}/a.jpg`, guard));
    expect(error).toMatchObject({
      code: 'source_blocked',
      addressClass: 'metadata',
      address: '169.254.169.254',
    });
    expect(error.message).toMatch(/refused always \(--allow-private-sources does not lift it\)/);
    expect(dns.calls).toHaveLength(2);
    expect(server.connections).toBe(0);
  });

  it('an answer mixing an allowed and a refused address is refused whole', async () => {
    const dns = scripted(['127.0.0.1', 'fe80::1']);
    const error = await failure(
      fetchSourceBytes(`http://mixed.example.test:${server.port}/a.jpg`, {
        allowPrivate: true,
        resolve: dns.resolve,
      }),
    );
    expect(error).toMatchObject({ code: 'source_blocked', addressClass: 'link-local' });
    expect(server.connections).toBe(0);
  });

  it('the agents alone close a socket to a refused IP literal on connect, before the request is written', async () => {
    // Node skips `lookup` for IP literals; exchange() pre-checks those, but the agents must hold on
    // their own too (a caller that uses them directly): the connect-time peer check does.
    const agents = new SourceAgents({ allowPrivate: false });
    const error = await new Promise<unknown>((resolve) => {
      const request = http.get({ host: '127.0.0.1', port: server.port, path: '/a.jpg', agent: agents.http });
      request.on('error', resolve);
      request.on('response', () => resolve(new Error('got a response')));
    });
    agents.destroy();
    expect(error).toBeInstanceOf(SourceError);
    expect(error).toMatchObject({ code: 'source_blocked', addressClass: 'loopback' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(server.connections).toBe(1); // TCP reached the server ...
    expect(server.requests).toHaveLength(0); // ... but not one byte of the request did
  });

  it('a per-request lookup cannot replace the agents’ guarded one', async () => {
    const agents = new SourceAgents({ allowPrivate: false, resolve: scripted(['10.1.2.3']).resolve });
    const error = await new Promise<unknown>((resolve) => {
      const request = http.get({
        host: 'sneaky.example.test',
        port: server.port,
        path: '/a.jpg',
        agent: agents.http,
        lookup: (_host, _opts, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]),
      });
      request.on('error', resolve);
      request.on('response', () => resolve(new Error('got a response')));
    });
    agents.destroy();
    expect(error).toMatchObject({ code: 'source_blocked', addressClass: 'private', address: '10.1.2.3' });
    expect(server.connections).toBe(0);
  });
});

describe('address guard: on every redirect hop', () => {
  const targets: Array<[string, string, string]> = [
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data/iam/', 'metadata'],
    ['IPv6 metadata', 'http://[fd00:ec2::254]/latest/', 'metadata'],
    ['IPv4-mapped metadata', 'http://[::ffff:169.254.169.254]/', 'metadata'],
    ['link-local', 'http://169.254.10.10/', 'link-local'],
    ['CGNAT', 'http://100.64.0.1/', 'cgnat'],
    ['a name resolving to metadata', 'http://metadata.example.test/computeMetadata/v1/', 'metadata'],
  ];
  for (const [what, target, cls] of targets) {
    it(`a redirect to ${what} is refused without any connection to it (allowPrivate on)`, async () => {
      server.routes.set('/hop', (_req, res) => res.writeHead(302, { location: target }).end());
      const dns = scripted(['169.254.169.254']);
      const error = await failure(
        fetchSourceBytes(server.url('/hop'), { allowPrivate: true, resolve: dns.resolve, retries: 0 }),
      );
      expect(error).toMatchObject({ code: 'source_blocked', addressClass: cls });
      if (target.includes('.test/')) {
        // A name: Node makes the socket object, then our lookup refuses before connect() is tried.
        expect(dns.calls).toEqual(['metadata.example.test']);
      } else {
        expect(sockets).toBe(1); // the first hop's, to 127.0.0.1; none for the literal target
        expect(dns.calls).toEqual([]);
      }
      expect(server.requests).toHaveLength(1);
    });
  }

  it('a redirect to 0.0.0.0 (which Linux routes to this host) is refused, the server sees one request', async () => {
    server.routes.set('/hop', (_req, res) =>
      res.writeHead(302, { location: `http://0.0.0.0:${server.port}/a.jpg` }).end(),
    );
    const error = await failure(fetchSourceBytes(server.url('/hop'), { allowPrivate: true }));
    expect(error).toMatchObject({ code: 'source_blocked', addressClass: 'unspecified' });
    expect(server.requests.map((r) => r.url)).toEqual(['/hop']);
  });

  it('a redirect to a private address goes through with allowPrivate, to a name resolved again at its hop', async () => {
    const dns = scripted(['127.0.0.1']);
    server.routes.set('/hop', (_req, res) =>
      res.writeHead(307, { location: `http://dam.internal.test:${server.port}/a.jpg` }).end(),
    );
    const got = await fetchSourceBytes(server.url('/hop'), { allowPrivate: true, resolve: dns.resolve });
    expect(got.notModified).toBe(false);
    expect(dns.calls).toEqual(['dam.internal.test']);
  });
});

describe('agents', () => {
  it('shared agents keep one connection for several fetches', async () => {
    const agents = new SourceAgents({ allowPrivate: true });
    try {
      for (let i = 0; i < 3; i++) await fetchSourceBytes(server.url('/a.jpg'), { agents });
    } finally {
      agents.destroy();
    }
    expect(server.requests).toHaveLength(3);
    expect(server.connections).toBe(1);
  });

  it('refuses guard options beside agents, so two policies cannot disagree', async () => {
    const agents = new SourceAgents();
    await expect(fetchSourceBytes(server.url('/a.jpg'), { agents, allowPrivate: true })).rejects.toThrow(
      TypeError,
    );
    agents.destroy();
  });
});

describe('proxy environment', () => {
  let proxy: SourceServer;
  let restore: (() => void) | undefined;
  const saved = { ...process.env };
  beforeEach(async () => {
    proxy = await new SourceServer().start();
    proxy.server.on('connect', (_req, socket) => socket.destroy());
  });
  afterEach(async () => {
    restore?.();
    for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy']) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
    await proxy.stop();
  });

  // Node 22 has no http.setGlobalProxyFromEnv (there the proxy variables reach the global agent only
  // through NODE_USE_ENV_PROXY at start-up), so this case is skipped there.
  const globalProxy =
    typeof (http as { setGlobalProxyFromEnv?: unknown }).setGlobalProxyFromEnv === 'function';
  it.skipIf(!globalProxy)(
    'HTTP_PROXY/HTTPS_PROXY, even applied to Node’s global agent, never carry a source request (skipped without http.setGlobalProxyFromEnv)',
    async () => {
      const proxyUrl = `http://127.0.0.1:${proxy.port}`;
      Object.assign(process.env, {
        HTTP_PROXY: proxyUrl,
        HTTPS_PROXY: proxyUrl,
        http_proxy: proxyUrl,
        NO_PROXY: '',
      });
      restore = http.setGlobalProxyFromEnv();
      // Control: the proxy does catch a request made the ordinary way, so "saw nothing" below means something.
      await new Promise<void>((resolve, reject) =>
        http.get(server.url('/control'), (res) => res.resume().on('end', resolve)).on('error', reject),
      );
      expect(proxy.requests.map((r) => r.url)).toEqual([server.url('/control')]);

      const got = await fetchSourceBytes(server.url('/a.jpg'), { allowPrivate: true });
      expect(got.notModified).toBe(false);
      expect(proxy.requests).toHaveLength(1);
      expect(server.seen('/a.jpg')).toHaveLength(1);
    },
  );
});
