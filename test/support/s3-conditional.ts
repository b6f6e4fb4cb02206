/**
 * An S3 endpoint that enforces conditional writes, for the tests of outputs in object storage.
 *
 * Why it exists: no S3 server that installs here implements `If-None-Match` / `If-Match` on
 * PutObject (measured: /work/shared/S3-TESTING.md; s3rver and fauxqs accept the write and
 * overwrite). Write-once results, journal segments and the lease rely on those rules, so this front
 * adds exactly them, as AWS documents them, to a real server, and leaves every other byte as the
 * client sent it (the SDK's signatures stay valid: method, path, headers and body are the client's).
 * Two forms, one set of rules ({@link FrontRules}):
 * - before s3rver (the tests'): a server of its own that forwards each request over HTTP;
 * - inside fauxqs (the benchmark's): hooks of fauxqs's own Fastify server (`buildApp`), one HTTP
 *   hop per request, since the benchmark of issue 33 runs this server on the two cores it measures.
 *
 * What it covers, and nothing more:
 * - PutObject with `If-None-Match: *`: 412 `PreconditionFailed` when the key exists;
 * - PutObject with `If-Match: <etag>`: 404 `NoSuchKey` when the key is missing, 412 when its ETag differs;
 * - both checked and the write done under one lock per key, so two conditional writers of one
 *   key are ordered as on S3 (one wins, the other gets 412);
 * - a body that does not match its signed payload hash (`x-amz-content-sha256`): 400
 *   `XAmzContentSHA256Mismatch`, as S3 refuses it;
 * - a header-signed request (`AWS4-HMAC-SHA256`) of the test key id ({@link SIGNING_KEYS}) whose
 *   signature is not the one its method, path, query, signed headers and payload hash give, or
 *   whose scope is not `<date>/us-east-1/s3/aws4_request`: 403 `SignatureDoesNotMatch`, as S3
 *   refuses it (neither server checks SigV4: s3rver 3.7 says it is "unimplemented");
 * - injected faults ({@link ConditionalS3.fail}): an S3 error status (503 SlowDown, 500, 409
 *   ConditionalRequestConflict), a reset connection, or a request held until released, for the
 *   next N matching requests;
 * - a record of every request (method, key, status, headers), for assertions and secret greps.
 *
 * - Before s3rver, ListObjectsV2 answered through s3rver's ListObjects (v1, `marker`): s3rver 3.7.1
 *   makes its continuation tokens with DES, which OpenSSL 3 (Node >= 17) no longer has, so every
 *   truncated v2 listing (over 1,000 keys) answers 500. The front's token is the last key listed,
 *   base64url. fauxqs pages v2 listings itself.
 *
 * The ETags of keys written through it are remembered, so a conditional write costs the server no
 * HEAD.
 */
import { createHash, createHmac } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { buildApp } from 'fauxqs';
import { startS3rverServer } from './s3-servers.js';

/** One request as the front saw it. */
export interface SeenRequest {
  method: string;
  /** `bucket/key` (decoded), or `bucket` for a bucket-level call. */
  key: string;
  /** The status answered (0 for a reset connection). */
  status: number;
  headers: Record<string, string>;
}

/** The secret of each test key id whose signatures the front checks (`S3RVER` is every test's). */
const SIGNING_KEYS: Readonly<Record<string, string>> = { S3RVER: 'S3RVER' };

/** RFC 3986 percent-encoding, as SigV4 encodes query names and values. */
function strictEncode(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/**
 * Whether a header-signed request's SigV4 signature is right, computed here from the request as it
 * arrived (AWS's "Create a canonical request", independent of the SDK's signer); undefined when it
 * is not one the front checks (unsigned, query-signed, or another key id).
 */
export function signatureHolds(method: string, rawUrl: string, headers: http.IncomingHttpHeaders) {
  const auth = headers.authorization;
  const parts =
    typeof auth === 'string'
      ? /^AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth)
      : null;
  if (!parts) return undefined;
  const [keyId, date, region, service, terminator] = parts[1]!.split('/');
  const secret = SIGNING_KEYS[keyId ?? ''];
  if (secret === undefined) return undefined;
  const amzDate = headers['x-amz-date'];
  const payload = headers['x-amz-content-sha256'];
  if (region !== 'us-east-1' || service !== 's3' || terminator !== 'aws4_request') return false;
  if (typeof amzDate !== 'string' || !amzDate.startsWith(date ?? '-') || typeof payload !== 'string')
    return false;
  const at = rawUrl.indexOf('?');
  const path = at < 0 ? rawUrl : rawUrl.slice(0, at);
  const query = (at < 0 ? '' : rawUrl.slice(at + 1))
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
      const value = eq < 0 ? '' : decodeURIComponent(pair.slice(eq + 1));
      return `${strictEncode(name)}=${strictEncode(value)}`;
    })
    .sort()
    .join('&');
  const signed = parts[2]!.split(';');
  const canonicalHeaders = signed
    .map((name) => {
      const value = headers[name];
      return `${name}:${(Array.isArray(value) ? value.join(',') : (value ?? '')).trim().replace(/\s+/g, ' ')}\n`;
    })
    .join('');
  const canonical = [method, path, query, canonicalHeaders, parts[2], payload].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonical).digest('hex'),
  ].join('\n');
  let key: Buffer = Buffer.from(`AWS4${secret}`);
  for (const part of [date!, region, service, 'aws4_request'])
    key = createHmac('sha256', key).update(part).digest();
  return createHmac('sha256', key).update(toSign).digest('hex') === parts[3];
}

/** A fault to inject: the next `times` requests matching `method` and `keyPrefix` fail so. */
export interface FaultRule {
  method?: string;
  /** Matched against `bucket/key`. */
  keyPrefix?: string;
  times: number;
  /** The S3 error status to answer (503 SlowDown, 500 InternalError, 409 ConditionalRequestConflict). */
  status?: number;
  /** Destroy the connection instead of answering. */
  reset?: boolean;
  /**
   * Hold the request, unanswered and not forwarded, until {@link ConditionalS3.release} (a PUT on
   * its way for as long as a test needs; a client killed meanwhile never stores it).
   */
  hold?: boolean;
}

/** A running conditional front. */
export interface ConditionalS3 {
  endpoint: string;
  requests: SeenRequest[];
  fail(rule: FaultRule): void;
  /** Drops every fault still pending. */
  heal(): void;
  /** Requests held now: `bucket/key` of each. */
  held(): string[];
  /** Lets the held requests go on as if they had just come, or answers them `status` (an S3 error). */
  release(options?: { status?: number }): void;
  close(): Promise<void>;
}

const ERROR_CODES: Record<number, string> = {
  400: 'XAmzContentSHA256Mismatch',
  403: 'SignatureDoesNotMatch',
  404: 'NoSuchKey',
  409: 'ConditionalRequestConflict',
  412: 'PreconditionFailed',
  500: 'InternalError',
  503: 'SlowDown',
};

/** Options of {@link startConditionalS3}. */
export interface ConditionalS3Options {
  /**
   * The real server behind the front. s3rver (files on disk, signatures checked) is the tests'; the
   * benchmark takes fauxqs (in memory), whose CPU per PUT on this machine is about a quarter of
   * s3rver's: on 2 cores the server's CPU is taken from the client it measures.
   * @default 's3rver'
   */
  backend?: 's3rver' | 'fauxqs';
}

/**
 * What the front decides the same way before either server: the request record, the injected
 * faults, the per-key lock of conditional writes and the ETags it knows.
 */
class FrontRules {
  readonly requests: SeenRequest[] = [];
  readonly rules: FaultRule[] = [];
  /** Requests held by a `hold` fault, and how each goes on when released. */
  readonly holding: { key: string; go: (status?: number) => void }[] = [];
  /** The tail of each key's queue of conditional writes. */
  readonly #locks = new Map<string, Promise<void>>();
  /**
   * The ETag of each key this front has seen written (null: seen deleted), so that a conditional
   * write needs no HEAD of its own. Only what is certain is kept: anything else (a multipart
   * upload, a batch delete) forgets the keys it may touch, and they are asked of the server again.
   */
  readonly #known = new Map<string, string | null>();

  /** Records the request; its `status` is filled in when it is answered. */
  see(method: string, key: string, headers: http.IncomingHttpHeaders): SeenRequest {
    const seen: SeenRequest = { method, key, status: 0, headers: flat(headers) };
    this.requests.push(seen);
    return seen;
  }

  /** The fault rule the request falls under (counted), if any. */
  fault(method: string, key: string): FaultRule | undefined {
    const rule = this.rules.find(
      (r) => r.times > 0 && (!r.method || r.method === method) && key.startsWith(r.keyPrefix ?? ''),
    );
    if (rule) rule.times--;
    return rule;
  }

  /**
   * Holds a request until {@link ConditionalS3.release}: the status to answer, or undefined to go on;
   * `gone` when its client closed the connection meanwhile (then it is never forwarded).
   */
  hold(key: string, socket: Socket): Promise<{ status?: number; gone: boolean }> {
    return new Promise((resolve) => {
      const held = {
        key,
        go: (status?: number) => resolve({ ...(status === undefined ? {} : { status }), gone: false }),
      };
      this.holding.push(held);
      // A client gone meanwhile (killed) takes its request with it: it is never forwarded.
      socket.once('close', () => {
        const at = this.holding.indexOf(held);
        if (at >= 0) this.holding.splice(at, 1);
        resolve({ gone: true });
      });
    });
  }

  /** Waits for the key's conditional writes before this one; the function returned lets the next go. */
  async lock(key: string): Promise<() => void> {
    const before = this.#locks.get(key) ?? Promise.resolve();
    let unlock!: () => void;
    const mine = new Promise<void>((resolve) => {
      unlock = resolve;
    });
    const tail = before.then(() => mine);
    this.#locks.set(key, tail);
    await before;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      unlock();
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    };
  }

  /** The conditions of a conditional PutObject (not a multipart part), or null for any other request. */
  conditions(
    req: http.IncomingMessage,
    query: URLSearchParams,
  ): { ifNoneMatch: string | undefined; ifMatch: string | undefined } | null {
    const ifNoneMatch = header(req, 'if-none-match');
    const ifMatch = header(req, 'if-match');
    if (req.method !== 'PUT' || !(ifNoneMatch || ifMatch) || query.has('uploadId')) return null;
    return { ifNoneMatch, ifMatch };
  }

  /** The status a conditional PUT fails with against the stored `etag` (null: none stored), or null when it may go. */
  refuse(ifNoneMatch: string | undefined, ifMatch: string | undefined, etag: string | null): number | null {
    if (ifNoneMatch === '*' && etag !== null) return 412;
    if (ifMatch && etag === null) return 404;
    if (ifMatch && unquote(ifMatch) !== etag) return 412;
    return null;
  }

  /**
   * 400 when the body does not match the payload hash the client signed (`x-amz-content-sha256`
   * as hex; `UNSIGNED-PAYLOAD` and streaming forms are not checked), as S3 refuses it; else null.
   */
  mismatch(headers: http.IncomingHttpHeaders, body: Buffer | undefined): number | null {
    const claimed = headers['x-amz-content-sha256'];
    if (typeof claimed !== 'string' || !/^[0-9a-f]{64}$/.test(claimed)) return null;
    return createHash('sha256')
      .update(body ?? Buffer.alloc(0))
      .digest('hex') === claimed
      ? null
      : 400;
  }

  /** 403 when a request the front can check is not signed right ({@link signatureHolds}), else null. */
  badSignature(method: string, rawUrl: string, headers: http.IncomingHttpHeaders): number | null {
    return signatureHolds(method, rawUrl, headers) === false ? 403 : null;
  }

  /** The ETag known for the key: a string, null (deleted), or undefined (ask the server). */
  known(key: string): string | null | undefined {
    return this.#known.get(key);
  }

  /** Learns from an answered request what the key now holds. */
  learn(
    method: string,
    query: URLSearchParams,
    key: string,
    answer: { status: number; etag: string | undefined; copy: boolean },
  ): void {
    const ok = answer.status < 300;
    // The SDK adds `x-id=PutObject`; a multipart part, its completion or a batch delete is not one write.
    const single = !['uploadId', 'uploads', 'partNumber', 'delete'].some((name) => query.has(name));
    if (method === 'PUT' && ok && single && answer.etag && !answer.copy) {
      this.#known.set(key, unquote(answer.etag));
    } else if (method === 'DELETE' && ok && single) this.#known.set(key, null);
    else if (method !== 'GET' && method !== 'HEAD') {
      for (const seen of this.#known.keys()) if (seen.startsWith(key)) this.#known.delete(seen);
    }
  }

  /** The front's API over these rules; `close` stops the server. */
  api(endpoint: string, close: () => Promise<void>): ConditionalS3 {
    return {
      endpoint,
      requests: this.requests,
      fail: (rule) => {
        this.rules.push({ ...rule });
      },
      heal: () => {
        this.rules.length = 0;
      },
      held: () => this.holding.map((h) => h.key),
      release: ({ status } = {}) => {
        for (const h of this.holding.splice(0)) h.go(status);
      },
      close,
    };
  }
}

/** Starts the backend with `buckets` and the conditional front on 127.0.0.1 before it. */
export async function startConditionalS3(
  buckets: string[],
  options: ConditionalS3Options = {},
): Promise<ConditionalS3> {
  return (options.backend ?? 's3rver') === 's3rver' ? startBeforeS3rver(buckets) : startInFauxqs(buckets);
}

/** A header of an internal request of the front (a HEAD for an ETag), which its own rules let by. */
const INTERNAL = 'x-conditional-front';

/**
 * fauxqs with the front's rules as hooks of its own Fastify server: one HTTP hop per request (the
 * benchmark runs this server on the two cores it measures; a front forwarding over HTTP cost about
 * twice fauxqs's own CPU).
 */
async function startInFauxqs(buckets: string[]): Promise<ConditionalS3> {
  const front = new FrontRules();
  const app = buildApp({ logger: false });
  /** What the hooks read of Fastify's request (fauxqs's Fastify is not this project's dependency). */
  type Request = {
    url: string;
    method: string;
    headers: http.IncomingHttpHeaders;
    raw: http.IncomingMessage;
  };
  /** Each outside request as onRequest saw it: its URL and key (parsed once), its record, its key's lock. */
  const passing = new WeakMap<Request, { url: URL; key: string; seen: SeenRequest; unlock?: () => void }>();
  const answer = (
    reply: { code(n: number): unknown; header(k: string, v: string): unknown; send(b: string): unknown },
    status: number,
    key: string,
  ) => {
    const { body } = errorDocument(status, key);
    reply.code(status);
    reply.header('content-type', 'application/xml');
    reply.send(body);
  };

  app.addHook('onRequest', async (request, reply) => {
    if (request.headers[INTERNAL] !== undefined) return;
    const url = new URL(request.url, 'http://front');
    const key = decodeURIComponent(url.pathname.slice(1));
    passing.set(request, { url, key, seen: front.see(request.method, key, request.headers) });
    const rule = front.fault(request.method, key);
    if (!rule) return;
    if (rule.hold) {
      const { status, gone } = await front.hold(key, request.raw.socket);
      if (gone) {
        reply.hijack();
        return reply;
      }
      if (status === undefined) return;
      answer(reply, status, key);
      return reply;
    }
    if (rule.reset) {
      request.raw.socket.destroy();
      reply.hijack();
      return reply;
    }
    answer(reply, rule.status ?? 503, key);
    return reply;
  });
  app.addHook('preHandler', async (request, reply) => {
    const place = passing.get(request);
    if (!place) return;
    const { url, key } = place;
    // fauxqs parses S3 bodies as Buffers (and only SQS/SNS content types otherwise: not checked).
    const body = (request as Request & { body?: unknown }).body;
    const parsed = body === undefined || body === null || Buffer.isBuffer(body);
    const mismatch =
      front.badSignature(request.method, request.url, request.headers) ??
      (parsed ? front.mismatch(request.headers, body ?? undefined) : null);
    if (mismatch !== null) {
      answer(reply, mismatch, key);
      return reply;
    }
    const conditions = front.conditions(request.raw, url.searchParams);
    if (!conditions) return;
    place.unlock = await front.lock(key);
    let etag = front.known(key);
    if (etag === undefined) {
      const head = await app.inject({ method: 'HEAD', url: url.pathname, headers: { [INTERNAL]: '1' } });
      etag = head.statusCode === 200 ? unquote(String(head.headers.etag ?? '')) : null;
    }
    const refused = front.refuse(conditions.ifNoneMatch, conditions.ifMatch, etag);
    if (refused === null) return;
    answer(reply, refused, key);
    return reply;
  });
  app.addHook('onSend', async (request, reply) => {
    const place = passing.get(request);
    if (!place) return;
    const { url, key } = place;
    const etag = reply.getHeader('etag');
    front.learn(request.method, url.searchParams, key, {
      status: reply.statusCode,
      etag: etag === undefined ? undefined : String(etag),
      copy: request.headers['x-amz-copy-source'] !== undefined,
    });
  });
  const settle = async (request: Request, status: number) => {
    const place = passing.get(request);
    if (!place) return;
    place.unlock?.();
    place.seen.status = status;
  };
  app.addHook('onResponse', async (request, reply) => settle(request, reply.statusCode));
  app.addHook('onRequestAbort', async (request) => settle(request, 0));

  for (const bucket of buckets) {
    const made = await app.inject({ method: 'PUT', url: `/${bucket}`, headers: { [INTERNAL]: '1' } });
    if (made.statusCode !== 200)
      throw new Error(`fauxqs: creating bucket ${bucket} answered ${made.statusCode}`);
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return front.api(`http://127.0.0.1:${port}`, async () => {
    for (const h of front.holding.splice(0)) h.go(503);
    await app.close();
  });
}

/**
 * s3rver behind a front on a port of its own, forwarding every request over HTTP (s3rver is an
 * app of its own, with no hooks to add rules to). ListObjectsV2 is answered through s3rver's
 * ListObjects (v1), see the header.
 */
async function startBeforeS3rver(buckets: string[]): Promise<ConditionalS3> {
  const backend = await startS3rverServer(buckets);
  const target = new URL(backend.endpoint);
  const front = new FrontRules();

  const forward = (
    req: http.IncomingMessage,
    body: Buffer,
    res: http.ServerResponse,
    key: string,
  ): Promise<number> =>
    new Promise((resolve, reject) => {
      const out = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          front.learn(req.method ?? '', new URL(req.url ?? '/', 'http://front').searchParams, key, {
            status: answer.statusCode ?? 500,
            etag: answer.headers.etag,
            copy: req.headers['x-amz-copy-source'] !== undefined,
          });
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('end', () => resolve(answer.statusCode ?? 502));
          answer.on('error', reject);
        },
      );
      out.on('error', reject);
      out.end(body);
    });

  /** The stored object's ETag (quotes stripped), or null when there is none. s3rver serves anonymous HEADs. */
  const etagOf = (path: string, key: string): Promise<string | null> => {
    const seen = front.known(key);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const head = http.request(
        { host: target.hostname, port: target.port, method: 'HEAD', path: path.split('?')[0] },
        (answer) => {
          answer.resume();
          if (answer.statusCode === 404) resolve(null);
          else if (answer.statusCode === 200) resolve(unquote(String(answer.headers.etag ?? '')));
          else reject(new Error(`conditional front: HEAD ${path} answered ${answer.statusCode}`));
        },
      );
      head.on('error', reject);
      head.end();
    });
  };

  /** ListObjectsV2 of `bucket`, asked of s3rver as ListObjects v1 (anonymous, as s3rver allows). */
  const listV2 = async (
    bucket: string,
    query: URLSearchParams,
    res: http.ServerResponse,
  ): Promise<number> => {
    const token = query.get('continuation-token');
    const v1 = new URLSearchParams();
    for (const name of ['prefix', 'delimiter', 'max-keys']) {
      const value = query.get(name);
      if (value !== null) v1.set(name, value);
    }
    const marker = token ? Buffer.from(token, 'base64url').toString('utf8') : query.get('start-after');
    if (marker) v1.set('marker', marker);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const list = http.request(
        { host: target.hostname, port: target.port, method: 'GET', path: `/${bucket}?${v1}` },
        (reply) => {
          const parts: Buffer[] = [];
          reply.on('data', (chunk: Buffer) => parts.push(chunk));
          reply.on('end', () =>
            resolve({ status: reply.statusCode ?? 502, body: Buffer.concat(parts).toString() }),
          );
          reply.on('error', reject);
        },
      );
      list.on('error', reject);
      list.end();
    });
    let body = answer.body;
    if (answer.status === 200) {
      const keys = [...body.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => unescapeXml(m[1]!));
      const prefixes = [...body.matchAll(/<CommonPrefixes><Prefix>([^<]*)<\/Prefix>/g)].map((m) =>
        unescapeXml(m[1]!),
      );
      const last = [...keys, ...prefixes].sort().at(-1);
      const truncated = /<IsTruncated>true<\/IsTruncated>/.test(body);
      const v2 =
        `<KeyCount>${keys.length + prefixes.length}</KeyCount>` +
        (token ? `<ContinuationToken>${escapeXml(token)}</ContinuationToken>` : '') +
        (truncated && last !== undefined
          ? `<NextContinuationToken>${Buffer.from(last).toString('base64url')}</NextContinuationToken>`
          : '');
      body = body.replace(/<Marker>[^<]*<\/Marker>(<NextMarker>[^<]*<\/NextMarker>)?/, v2);
    }
    res.writeHead(answer.status, { 'content-type': 'application/xml' });
    res.end(body);
    return answer.status;
  };

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://front');
    const key = decodeURIComponent(url.pathname.slice(1));
    const seen = front.see(req.method ?? '', key, req.headers);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const rule = front.fault(req.method ?? '', key);
    if (rule) {
      if (rule.hold) {
        const { status, gone } = await front.hold(key, req.socket);
        if (gone || req.socket.destroyed) return;
        if (status !== undefined) {
          seen.status = answerError(res, status, key);
          return;
        }
      } else if (rule.reset) {
        req.socket.destroy();
        return;
      } else {
        seen.status = answerError(res, rule.status ?? 503, key);
        return;
      }
    }
    const mismatch =
      front.badSignature(req.method ?? '', req.url ?? '/', req.headers) ?? front.mismatch(req.headers, body);
    if (mismatch !== null) {
      seen.status = answerError(res, mismatch, key);
      return;
    }
    if (req.method === 'GET' && url.searchParams.get('list-type') === '2' && /^[^/]+\/?$/.test(key)) {
      try {
        seen.status = await listV2(key.replace(/\/$/, ''), url.searchParams, res);
      } catch (error) {
        seen.status = answerError(res, 500, key, String(error));
      }
      return;
    }
    const conditions = front.conditions(req, url.searchParams);
    try {
      if (!conditions) {
        seen.status = await forward(req, body, res, key);
        return;
      }
      const unlock = await front.lock(key);
      try {
        const { ifNoneMatch, ifMatch } = conditions;
        const refused = front.refuse(ifNoneMatch, ifMatch, await etagOf(req.url ?? '/', key));
        seen.status = refused === null ? await forward(req, body, res, key) : answerError(res, refused, key);
      } finally {
        unlock();
      }
    } catch (error) {
      if (!res.headersSent) seen.status = answerError(res, 500, key, String(error));
      else res.destroy();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return front.api(`http://127.0.0.1:${port}`, async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await backend.close();
  });
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function unquote(etag: string): string {
  return etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
}

function flat(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The S3 error document answered with `status`. */
function errorDocument(status: number, key: string, message?: string): { body: string } {
  const code = ERROR_CODES[status] ?? 'InternalError';
  const text =
    message ?? (status === 412 ? 'At least one of the pre-conditions you specified did not hold' : code);
  return {
    body:
      `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${escapeXml(text)}</Message>` +
      `<Key>${escapeXml(key)}</Key><RequestId>front</RequestId></Error>`,
  };
}

/** Answers an S3 error document with `status`; returns the status. */
function answerError(res: http.ServerResponse, status: number, key: string, message?: string): number {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(errorDocument(status, key, message).body);
  return status;
}

function unescapeXml(text: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
  return text.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (whole, name: string) => {
    if (name[0] !== '#') return named[name] ?? whole;
    return String.fromCodePoint(
      name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1)),
    );
  });
}

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}
