import http from 'node:http';
import https from 'node:https';
import { isIP, type Socket } from 'node:net';
import { Transform, type TransformCallback } from 'node:stream';
import { redactUrl, redactUrlsInText } from '../../util/redact-url.js';
import { SourceError } from './errors.js';
import { assertAddressAllowed, bareHost, type SourceAgents } from './guard.js';

/**
 * One HTTP exchange with a source: a GET, its response head, and its body as a capped stream.
 * Redirects, retries and the total deadline belong to `fetch.ts`; this file owns what happens on
 * one connection (connect and idle timeouts, the byte cap, mapping socket errors to codes).
 */

/** What one exchange needs. */
export interface ExchangeOptions {
  agents: SourceAgents;
  maxBytes: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  /** Extra request headers: only conditional ones (the fetcher takes no credentials at all). */
  conditional: { ifNoneMatch?: string; ifModifiedSince?: string };
  userAgent: string;
  /** Aborts the exchange (caller's signal or the fetch's total deadline), with its reason. */
  signal: AbortSignal;
}

/** A response head, and the body behind it (already capped and error-mapped). */
export interface Exchange {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Transform;
  /** Closes the exchange without reading the body (redirects, error statuses). */
  discard(): void;
}

/** Socket errors that a second attempt may not meet (resets, refusals, transient DNS). */
const TRANSIENT_ERRNO: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'EHOSTDOWN',
  'UND_ERR_SOCKET',
]);

/** Whether a `SourceError` is worth another attempt now (as opposed to a rerun later). */
export function isTransient(error: SourceError): boolean {
  if (error.code !== 'source_unavailable') return false;
  if (error.reason === 'timeout') return true;
  return error.reason === 'network' && error.errno !== undefined && TRANSIENT_ERRNO.has(error.errno);
}

/** A socket-level failure as a `SourceError` (refusals and aborts pass through untouched). */
export function mapNetworkError(error: unknown, url: URL): unknown {
  if (error instanceof SourceError) return error;
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  if (errno === 'ABORT_ERR') return error;
  const text = error instanceof Error ? error.message : String(error);
  return new SourceError({
    code: 'source_unavailable',
    reason: 'network',
    message: `source ${redactUrl(url.href)} failed: ${redactUrlsInText(text)}`,
    ...(errno === undefined ? {} : { errno }),
    cause: error,
  });
}

function timeoutError(what: string, ms: number, url: URL): SourceError {
  return new SourceError({
    code: 'source_unavailable',
    reason: 'timeout',
    message: `source ${redactUrl(url.href)}: ${what} timed out after ${ms} ms`,
    errno: 'ETIMEDOUT',
  });
}

/** The refusal for a body over the cap. */
export function tooLargeError(url: URL, maxBytes: number, seen: string): SourceError {
  return new SourceError({
    code: 'too_large',
    reason: 'size',
    message: `source ${redactUrl(url.href)} is larger than the ${maxBytes}-byte cap (${seen})`,
  });
}

/**
 * Sends one GET and resolves with the response head. The body is a Transform that counts bytes and
 * fails with `too_large` the moment the count passes `maxBytes`, destroying the response (and with it
 * the socket), so the rest is never read.
 */
export function exchange(url: URL, options: ExchangeOptions): Promise<Exchange> {
  const host = bareHost(url);
  // Node's `net.connect` skips `lookup` for IP literals, so those are checked here, before any socket.
  if (isIP(host) !== 0) assertAddressAllowed(host, host, options.agents.allowPrivate);
  const { signal } = options;
  if (signal.aborted) return Promise.reject(signal.reason);

  return new Promise<Exchange>((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = {
      'user-agent': options.userAgent,
      accept: 'image/*, */*;q=0.5',
      // Bytes as stored: the cap and the journal's size/sha256 are about the file, not a transfer form.
      'accept-encoding': 'identity',
    };
    if (options.conditional.ifNoneMatch !== undefined)
      headers['if-none-match'] = options.conditional.ifNoneMatch;
    if (options.conditional.ifModifiedSince !== undefined) {
      headers['if-modified-since'] = options.conditional.ifModifiedSince;
    }
    const request = (url.protocol === 'https:' ? https : http).request({
      protocol: url.protocol,
      hostname: host,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      agent: options.agents.for(url),
      headers,
      // Any `servername` other than the URL's host would weaken TLS checking: leave Node's default.
    });

    let body: Transform | undefined;
    let settled = false;
    const fail = (error: unknown): void => {
      // The caller's own abort reason goes back to it as it was given, never dressed as a network error.
      const mapped = signal.aborted && error === signal.reason ? error : mapNetworkError(error, url);
      if (body) body.destroy(mapped instanceof Error ? mapped : new Error(String(mapped)));
      else if (!settled) {
        settled = true;
        reject(mapped);
      }
      request.destroy();
      cleanup();
    };
    const onAbort = (): void => fail(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const connectTimer = setTimeout(
      () => fail(timeoutError('connecting', options.connectTimeoutMs, url)),
      options.connectTimeoutMs,
    );
    const cleanup = (): void => {
      clearTimeout(connectTimer);
      signal.removeEventListener('abort', onAbort);
    };

    request.on('socket', (socket) => {
      const net = socket as Socket;
      if (!net.connecting)
        clearTimeout(connectTimer); // a pooled keep-alive socket
      else
        net.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
    });
    // Idle: no byte in either direction for this long, while waiting for the head or the body.
    request.setTimeout(options.idleTimeoutMs, () =>
      fail(timeoutError('waiting for data', options.idleTimeoutMs, url)),
    );
    request.on('error', fail);

    request.on('response', (response) => {
      clearTimeout(connectTimer);
      // A connection cut mid-body surfaces here as ECONNRESET "aborted" (Content-Length or chunked).
      response.on('error', fail);
      let seen = 0;
      const maxBytes = options.maxBytes;
      const capped = new Transform({
        transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
          seen += chunk.length;
          if (seen > maxBytes) done(tooLargeError(url, maxBytes, `more than ${maxBytes} bytes sent`));
          else done(null, chunk);
        },
        destroy(error, done) {
          // Whoever ends the body early (the cap, the caller, a deadline) closes the connection too.
          if (!response.complete) response.destroy();
          cleanup();
          done(error);
        },
      });
      capped.on('end', cleanup);
      body = capped;
      response.pipe(capped);
      settled = true;
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        body: capped,
        discard: () => {
          capped.destroy();
          request.destroy();
        },
      });
    });
    request.end();
  });
}
