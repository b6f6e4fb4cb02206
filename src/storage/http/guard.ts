import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { redactUrl } from '../../util/redact-url.js';
import { ADDRESS_CLASS_WORDS, type AddressClass, classifyAddress } from './address.js';
import { SourceError } from './errors.js';

/** The flag that lets loopback and private sources through, named in every refusal it would lift. */
export const ALLOW_PRIVATE_FLAG = '--allow-private-sources';
/** The environment twin of {@link ALLOW_PRIVATE_FLAG}. */
export const ALLOW_PRIVATE_ENV = 'KITCHEN_ALLOW_PRIVATE_SOURCES';

/** Whether the environment asks for private sources (`KITCHEN_ALLOW_PRIVATE_SOURCES=1`). */
export function allowPrivateFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[ALLOW_PRIVATE_ENV] === '1';
}

/** Classes `allowPrivate` lets through: an internal DAM, and the tests on 127.0.0.1. */
const LIFTED_BY_FLAG: ReadonlySet<AddressClass> = new Set(['loopback', 'private']);

/** One answer of a resolver. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Host name → addresses. The default is the system resolver (`dns.lookup`, all addresses, in the
 * system's order); tests inject one that answers differently on each call.
 */
export type SourceResolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The guard's policy. */
export interface SourceGuardOptions {
  /** Let loopback and private (RFC 1918, fc00::/7) addresses through. Link-local and metadata: never. */
  allowPrivate?: boolean;
  /** Resolver used at connect time (default: the system's). */
  resolve?: SourceResolver;
}

const systemResolver: SourceResolver = async (hostname) => {
  const found = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return found.map((entry) => ({ address: entry.address, family: entry.family === 6 ? 6 : 4 }));
};

/** The class that refuses `address` under the policy, or undefined when it may be connected to. */
export function refusedClass(address: string, allowPrivate: boolean): AddressClass | undefined {
  const cls = classifyAddress(address);
  if (cls === 'public') return undefined;
  if (allowPrivate && LIFTED_BY_FLAG.has(cls)) return undefined;
  return cls;
}

/** The refusal for `address`, with the class in words and what (if anything) would lift it. */
export function blockedError(host: string, address: string, cls: AddressClass): SourceError {
  const bare = address.replace(/^\[|\]$/g, '');
  const subject = host.replace(/^\[|\]$/g, '') === bare ? `${bare} is` : `${host} resolves to ${bare},`;
  const words = ADDRESS_CLASS_WORDS[cls];
  const remedy = LIFTED_BY_FLAG.has(cls)
    ? `${ALLOW_PRIVATE_FLAG} lets ${cls} addresses through`
    : `refused always (${ALLOW_PRIVATE_FLAG} does not lift it)`;
  return new SourceError({
    code: 'source_blocked',
    reason: 'address',
    message: `source host ${subject} ${words}; ${remedy}`,
    address: bare,
    addressClass: cls,
  });
}

/** Throws {@link blockedError} when the policy refuses `address`. */
export function assertAddressAllowed(host: string, address: string, allowPrivate: boolean): void {
  const cls = refusedClass(address, allowPrivate);
  if (cls !== undefined) throw blockedError(host, address, cls);
}

/**
 * Parses a source URL and refuses what no policy allows: anything but http/https, and userinfo
 * (`user:password@`), which would otherwise be sent as Basic credentials. Never echoes the secret.
 */
export function parseSourceUrl(raw: string | URL): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (error) {
    throw new SourceError({
      code: 'source_blocked',
      reason: 'scheme',
      message: `not a valid http(s) URL: ${redactUrl(String(raw))}`,
      cause: error,
    });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new SourceError({
      code: 'source_blocked',
      reason: 'scheme',
      message: `only http and https sources are fetched, not ${url.protocol}`,
    });
  }
  if (url.username !== '' || url.password !== '') {
    throw new SourceError({
      code: 'source_blocked',
      reason: 'credentials',
      message: `source URL ${redactUrl(url.href)} carries user:password; credentials in source URLs are refused`,
    });
  }
  return url;
}

/** The host of a URL without IPv6 brackets, as `net.connect` and the resolver want it. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/**
 * Checks a host as the connection would reach it: an IP literal directly (Node skips `lookup` for
 * those), a name through the resolver. Resolves to the allowed addresses. This is the pre-check a
 * `plan` can show; it does not replace the connect-time check, which resolves again.
 */
export async function checkHost(host: string, options: SourceGuardOptions = {}): Promise<ResolvedAddress[]> {
  const allowPrivate = options.allowPrivate ?? false;
  const family = isIP(host);
  if (family !== 0) {
    assertAddressAllowed(host, host, allowPrivate);
    return [{ address: host, family: family === 6 ? 6 : 4 }];
  }
  const found = await (options.resolve ?? systemResolver)(host);
  if (found.length === 0) {
    throw new SourceError({
      code: 'source_unavailable',
      reason: 'network',
      message: `source host ${host} has no address`,
      errno: 'ENOTFOUND',
    });
  }
  // Every answer is checked, not only the first: with Happy Eyeballs Node may connect to any of them,
  // and a mixed answer (one public, one 169.254.169.254) is the shape of a rebinding attack.
  for (const entry of found) assertAddressAllowed(host, entry.address, allowPrivate);
  return found;
}

/**
 * A `lookup` for `net.connect` that resolves through the guard: the addresses the socket will
 * connect to are the ones just checked, so a DNS answer that changes after any pre-check cannot slip
 * by. Errors (a refusal included) fail the connection before a byte is sent.
 */
export function guardedLookup(options: SourceGuardOptions = {}): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    checkHost(hostname, options).then(
      (found) => {
        const wanted = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : 0;
        const usable = wanted === 0 ? found : found.filter((entry) => entry.family === wanted);
        if (lookupOptions.all) {
          callback(null, usable);
          return;
        }
        const first = usable[0];
        if (!first) {
          const error: NodeJS.ErrnoException = new Error(`no IPv${wanted} address for ${hostname}`);
          error.code = 'ENOTFOUND';
          callback(error, '', 0);
          return;
        }
        callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 0),
    );
  };
}

/**
 * Re-checks the peer once the socket has connected, before the request's first byte leaves (the
 * request's own writes wait on the same `connect` event, and this listener was added first). It
 * catches whatever reached `connect` without our lookup: an IP literal or a path we did not foresee.
 */
function checkOnConnect(socket: Duplex, host: string, allowPrivate: boolean): void {
  const net = socket as Socket;
  net.once('connect', () => {
    const peer = net.remoteAddress;
    const cls = peer === undefined ? 'reserved' : refusedClass(peer, allowPrivate);
    if (cls !== undefined) net.destroy(blockedError(host, peer ?? 'an unknown address', cls));
  });
}

/** Options of {@link SourceAgents}. */
export interface SourceAgentsOptions extends SourceGuardOptions {
  /** Extra trusted CA certificates (PEM) for https sources, on top of Node's own store. */
  ca?: string | string[];
  /** Keep connections open between fetches (default true): 10^5 sources mostly share few hosts. */
  keepAlive?: boolean;
}

/**
 * The http and https agents every source request goes through: guarded lookup, connect-time peer
 * check, and no proxy whatever the environment says. `proxyEnv: {}` is explicit on purpose: Node
 * 24.5+ can read HTTP(S)_PROXY into agents (NODE_USE_ENV_PROXY, `--use-env-proxy`,
 * `http.setGlobalProxyFromEnv()`), and a proxy would resolve the host itself, out of the guard's
 * sight. Reuse one instance across fetches for keep-alive; `destroy()` it at the end of the run.
 */
export class SourceAgents {
  readonly allowPrivate: boolean;
  readonly http: http.Agent;
  readonly https: https.Agent;
  readonly #resolve: SourceResolver | undefined;

  constructor(options: SourceAgentsOptions = {}) {
    this.allowPrivate = options.allowPrivate ?? false;
    this.#resolve = options.resolve;
    const guard: SourceGuardOptions = { allowPrivate: this.allowPrivate };
    if (options.resolve) guard.resolve = options.resolve;
    const lookup = guardedLookup(guard);
    const allowPrivate = this.allowPrivate;
    const common = { keepAlive: options.keepAlive ?? true, lookup, proxyEnv: {} };

    class GuardedHttpAgent extends http.Agent {
      override createConnection(...args: Parameters<http.Agent['createConnection']>) {
        const socket = super.createConnection(...args);
        if (socket) checkOnConnect(socket, String(args[0].host ?? ''), allowPrivate);
        return socket;
      }
    }
    class GuardedHttpsAgent extends https.Agent {
      override createConnection(...args: Parameters<https.Agent['createConnection']>) {
        const socket = super.createConnection(...args);
        if (socket) checkOnConnect(socket, String(args[0].host ?? ''), allowPrivate);
        return socket;
      }
    }
    this.http = new GuardedHttpAgent(common);
    this.https = new GuardedHttpsAgent(options.ca === undefined ? common : { ...common, ca: options.ca });
  }

  /** The agent for a URL's scheme. */
  for(url: URL): http.Agent {
    return url.protocol === 'https:' ? this.https : this.http;
  }

  /** The guard options these agents enforce (for pre-checks that must agree with them). */
  get guard(): SourceGuardOptions {
    return this.#resolve
      ? { allowPrivate: this.allowPrivate, resolve: this.#resolve }
      : { allowPrivate: this.allowPrivate };
  }

  /** Closes pooled connections. */
  destroy(): void {
    this.http.destroy();
    this.https.destroy();
  }
}
