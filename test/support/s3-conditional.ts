/**
 * An S3 endpoint that enforces conditional writes, for the tests of outputs in object storage.
 *
 * Why it exists: no S3 server that installs here implements `If-None-Match` / `If-Match` on
 * PutObject (measured: /work/shared/S3-TESTING.md; s3rver and fauxqs accept the write and
 * overwrite). Write-once results, journal segments and the lease rely on those rules, so this front
 * adds exactly them, as AWS documents them, in front of a real s3rver (or fauxqs), and forwards every other
 * byte unchanged (the SDK's signatures stay valid: method, path, headers and body are the client's).
 *
 * What it covers, and nothing more:
 * - PutObject with `If-None-Match: *`: 412 `PreconditionFailed` when the key exists;
 * - PutObject with `If-Match: <etag>`: 404 `NoSuchKey` when the key is missing, 412 when its ETag differs;
 * - both checked and the write forwarded under one lock per key, so two conditional writers of one
 *   key are ordered as on S3 (one wins, the other gets 412);
 * - injected faults ({@link ConditionalS3.fail}): an S3 error status (503 SlowDown, 500, 409
 *   ConditionalRequestConflict) or a reset connection, for the next N matching requests;
 * - a record of every request (method, key, status, headers), for assertions and secret greps.
 *
 * - ListObjectsV2 answered through s3rver's ListObjects (v1, `marker`): s3rver 3.7.1 makes its
 *   continuation tokens with DES, which OpenSSL 3 (Node >= 17) no longer has, so every truncated
 *   v2 listing (over 1,000 keys) answers 500. The front's token is the last key listed, base64url.
 *
 * The ETags of keys written through it are remembered, so a conditional write costs s3rver no HEAD
 * (the benchmark of issue 33 runs this server on the machine it measures).
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFauxqsServer, startS3rverServer } from './s3-servers.js';

/** One request as the front saw it. */
export interface SeenRequest {
  method: string;
  /** `bucket/key` (decoded), or `bucket` for a bucket-level call. */
  key: string;
  /** The status answered (0 for a reset connection). */
  status: number;
  headers: Record<string, string>;
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

/** Starts the backend with `buckets` and the conditional front on 127.0.0.1 before it. */
export async function startConditionalS3(
  buckets: string[],
  options: ConditionalS3Options = {},
): Promise<ConditionalS3> {
  const s3rver = (options.backend ?? 's3rver') === 's3rver';
  const backend = await (s3rver ? startS3rverServer(buckets) : startFauxqsServer(buckets));
  const target = new URL(backend.endpoint);
  const requests: SeenRequest[] = [];
  const rules: FaultRule[] = [];
  /** Requests held by a `hold` fault, and how each goes on when released. */
  const holding: { key: string; go: (status?: number) => void }[] = [];
  /** The tail of each key's queue of conditional writes. */
  const locks = new Map<string, Promise<void>>();

  /**
   * The ETag of each key this front has seen written (null: seen deleted), so that a conditional
   * write needs no HEAD of its own. Only what is certain is kept: anything else (a multipart
   * upload, a batch delete) forgets the keys it may touch, and they are asked of s3rver again.
   */
  const known = new Map<string, string | null>();
  const learn = (req: http.IncomingMessage, key: string, answer: http.IncomingMessage): void => {
    const ok = (answer.statusCode ?? 500) < 300;
    const query = new URL(req.url ?? '/', 'http://front').searchParams;
    // The SDK adds `x-id=PutObject`; a multipart part, its completion or a batch delete is not one write.
    const single = !['uploadId', 'uploads', 'partNumber', 'delete'].some((name) => query.has(name));
    if (req.method === 'PUT' && ok && single && answer.headers.etag && !req.headers['x-amz-copy-source']) {
      known.set(key, unquote(String(answer.headers.etag)));
    } else if (req.method === 'DELETE' && ok && single) known.set(key, null);
    else if (req.method !== 'GET' && req.method !== 'HEAD') {
      for (const seen of known.keys()) if (seen.startsWith(key)) known.delete(seen);
    }
  };

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
          learn(req, key, answer);
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
    const seen = known.get(key);
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
    const seen: SeenRequest = { method: req.method ?? '', key, status: 0, headers: flat(req.headers) };
    requests.push(seen);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const rule = rules.find(
      (r) => r.times > 0 && (!r.method || r.method === req.method) && key.startsWith(r.keyPrefix ?? ''),
    );
    if (rule) {
      rule.times--;
      if (rule.hold) {
        const status = await new Promise<number | undefined>((resolve) => {
          const held = { key, go: resolve };
          holding.push(held);
          // A client gone meanwhile (killed) takes its request with it: it is never forwarded.
          req.socket.once('close', () => {
            const at = holding.indexOf(held);
            if (at >= 0) holding.splice(at, 1);
            resolve(undefined);
          });
        });
        if (req.socket.destroyed) return;
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
    if (
      s3rver &&
      req.method === 'GET' &&
      url.searchParams.get('list-type') === '2' &&
      /^[^/]+\/?$/.test(key)
    ) {
      try {
        seen.status = await listV2(key.replace(/\/$/, ''), url.searchParams, res);
      } catch (error) {
        seen.status = answerError(res, 500, key, String(error));
      }
      return;
    }
    const ifNoneMatch = header(req, 'if-none-match');
    const ifMatch = header(req, 'if-match');
    const conditional = req.method === 'PUT' && (ifNoneMatch || ifMatch) && !url.searchParams.has('uploadId');
    try {
      if (!conditional) {
        seen.status = await forward(req, body, res, key);
        return;
      }
      const before = locks.get(key) ?? Promise.resolve();
      let unlock!: () => void;
      const mine = new Promise<void>((resolve) => {
        unlock = resolve;
      });
      const tail = before.then(() => mine);
      locks.set(key, tail);
      await before;
      try {
        const etag = await etagOf(req.url ?? '/', key);
        if (ifNoneMatch === '*' && etag !== null) seen.status = answerError(res, 412, key);
        else if (ifMatch && etag === null) seen.status = answerError(res, 404, key);
        else if (ifMatch && unquote(ifMatch) !== etag) seen.status = answerError(res, 412, key);
        else seen.status = await forward(req, body, res, key);
      } finally {
        unlock();
        if (locks.get(key) === tail) locks.delete(key);
      }
    } catch (error) {
      if (!res.headersSent) seen.status = answerError(res, 500, key, String(error));
      else res.destroy();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    fail: (rule) => {
      rules.push({ ...rule });
    },
    heal: () => {
      rules.length = 0;
    },
    held: () => holding.map((h) => h.key),
    release: ({ status } = {}) => {
      for (const h of holding.splice(0)) h.go(status);
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await backend.close();
    },
  };
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

/** Answers an S3 error document with `status`; returns the status. */
function answerError(res: http.ServerResponse, status: number, key: string, message?: string): number {
  const code = ERROR_CODES[status] ?? 'InternalError';
  const text =
    message ?? (status === 412 ? 'At least one of the pre-conditions you specified did not hold' : code);
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${escapeXml(text)}</Message>` +
      `<Key>${escapeXml(key)}</Key><RequestId>front</RequestId></Error>`,
  );
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
