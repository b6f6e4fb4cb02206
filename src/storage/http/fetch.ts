import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { DEFAULT_MAX_SOURCE_BYTES } from '../../limits.js';
import { redactUrl } from '../../util/redact-url.js';
import { parseRetryAfter } from '../../util/retry-after.js';
import { sleep as defaultSleep } from '../../util/time.js';
import { SourceError } from './errors.js';
import { type Exchange, exchange, isTransient, tooLargeError } from './exchange.js';
import { parseSourceUrl, SourceAgents, type SourceAgentsOptions } from './guard.js';

/** Issue 32's default `--max-source-bytes`: 200 MB. */
export { DEFAULT_MAX_SOURCE_BYTES };
/** Issue 32: at most 5 redirects. */
export const MAX_REDIRECTS = 5;

/** Options of {@link fetchSource}. There is deliberately no way to pass headers or credentials. */
export interface FetchSourceOptions extends SourceAgentsOptions {
  /**
   * Agents to reuse across fetches (keep-alive). Their guard settings apply: passing `allowPrivate`,
   * `resolve` or `ca` as well is refused, so two policies can never disagree.
   */
  agents?: SourceAgents;
  /** Refuse a body over this many bytes (default {@link DEFAULT_MAX_SOURCE_BYTES}). */
  maxBytes?: number;
  /** Conditional request: the ETag the journal holds. A match answers `notModified`. */
  ifNoneMatch?: string;
  /** Conditional request: the Last-Modified the journal holds (HTTP-date string or Date). */
  ifModifiedSince?: string | Date;
  /** Until the socket is connected (TLS handshake included). Default 10 s. */
  connectTimeoutMs?: number;
  /** No byte received for this long, waiting for the head or mid-body. Default 30 s. */
  idleTimeoutMs?: number;
  /** The whole fetch: hops, retries, waits and (for a stream) the body. Default 10 min. */
  totalTimeoutMs?: number;
  /** Retries after 429, 5xx, resets and timeouts (default 3, so 4 attempts). */
  retries?: number;
  /** A Retry-After longer than this gives up at once (`source_unavailable`). Default 60 s. */
  maxRetryAfterMs?: number;
  /** Wait before retry `n` (1-based) when the source sent no Retry-After. */
  backoffMs?: (retry: number) => number;
  /** Redirects to follow, at most {@link MAX_REDIRECTS} (a larger value is clamped). */
  maxRedirects?: number;
  /** Stops everything, with the signal's reason. */
  signal?: AbortSignal;
  /** Injected for tests: how to wait (default: `sleep` of util/time, abortable). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Injected for tests: wall clock for HTTP-date Retry-After without a Date header. */
  now?: () => number;
  userAgent?: string;
}

/** What the source says about its bytes (for the journal and conditional reruns). */
export interface SourceMeta {
  /** The final URL after redirects, whole: the journal keeps it; redact it before showing it. */
  url: string;
  status: number;
  redirects: number;
  /** Requests sent, redirect hops and retries included. */
  attempts: number;
  etag: string | undefined;
  lastModified: string | undefined;
}

/** A 2xx answer: metadata and the body as a stream the caller must read or destroy. */
export interface SourceResponse extends SourceMeta {
  notModified: false;
  /** Content-Length when the source sent one (already checked against the cap). */
  size: number | undefined;
  /** As sent; whether the bytes are an image is decided by the caller's sniffing. */
  contentType: string | undefined;
  /** Capped at `maxBytes`; errors with a `SourceError` (`too_large`, `source_unavailable`). */
  body: Readable;
}

/** A 304 to a conditional request: the journal's copy is current. */
export interface SourceNotModified extends SourceMeta {
  notModified: true;
}

/** A 2xx answer read whole. */
export interface SourceBytes extends Omit<SourceResponse, 'body' | 'size'> {
  bytes: Buffer;
  size: number;
}

const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** Default backoff: 0.5 s, 1 s, 2 s, … capped at 10 s, with jitter so many sources do not retry in step. */
export function defaultBackoffMs(retry: number): number {
  const base = Math.min(10_000, 500 * 2 ** Math.max(0, retry - 1));
  return base / 2 + Math.random() * (base / 2);
}

/** The state of one fetch across hops, retries and (for `fetchSourceBytes`) body re-reads. */
class FetchRun {
  readonly agents: SourceAgents;
  readonly #ownAgents: boolean;
  readonly controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly #onCallerAbort: () => void;
  readonly #callerSignal: AbortSignal | undefined;
  attempts = 0;
  retriesLeft: number;
  retriesDone = 0;

  constructor(
    readonly options: FetchSourceOptions,
    start: URL,
  ) {
    if (
      options.agents &&
      (options.allowPrivate !== undefined || options.resolve || options.ca !== undefined)
    ) {
      throw new TypeError(
        'fetchSource: pass allowPrivate/resolve/ca to new SourceAgents(), not beside agents',
      );
    }
    this.#ownAgents = options.agents === undefined;
    this.agents = options.agents ?? new SourceAgents({ ...options, keepAlive: false });
    this.retriesLeft = options.retries ?? 3;
    const total = options.totalTimeoutMs ?? 600_000;
    this.#timer = setTimeout(() => {
      this.controller.abort(
        new SourceError({
          code: 'source_unavailable',
          reason: 'timeout',
          message: `source ${redactUrl(start.href)} took longer than its ${total} ms total`,
          errno: 'ETIMEDOUT',
        }),
      );
    }, total);
    this.#callerSignal = options.signal;
    this.#onCallerAbort = () => this.controller.abort(options.signal?.reason);
    if (options.signal?.aborted) this.#onCallerAbort();
    else options.signal?.addEventListener('abort', this.#onCallerAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Ends the run: timers, listeners, and agents it made itself. */
  close(): void {
    clearTimeout(this.#timer);
    this.#callerSignal?.removeEventListener('abort', this.#onCallerAbort);
    if (this.#ownAgents) this.agents.destroy();
  }

  /** Waits before a retry, or throws `error` when none is left; the deadline and signal cut it short. */
  async backoff(error: SourceError, retryAfterMs: number | undefined): Promise<void> {
    if (this.retriesLeft <= 0) throw error;
    this.retriesLeft--;
    this.retriesDone++;
    const wait = retryAfterMs ?? (this.options.backoffMs ?? defaultBackoffMs)(this.retriesDone);
    await (this.options.sleep ?? defaultSleep)(wait, this.signal);
  }
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function statusError(status: number, url: URL): SourceError {
  const shown = redactUrl(url.href);
  if (status === 404 || status === 410) {
    return new SourceError({
      code: 'file_not_found',
      reason: 'status',
      status,
      message: `source ${shown}: ${status}`,
    });
  }
  if (status === 401 || status === 403) {
    return new SourceError({
      code: 'source_forbidden',
      reason: 'status',
      status,
      message: `source ${shown}: ${status} (no credentials are ever sent to sources; a pre-signed URL may have expired)`,
    });
  }
  return new SourceError({
    code: 'source_unavailable',
    reason: 'status',
    status,
    message: `source ${shown}: ${status}`,
  });
}

function httpDate(value: string | Date): string {
  return typeof value === 'string' ? value : value.toUTCString();
}

/**
 * Follows redirects and retries until a 2xx or 304 head, which it returns with its URL. Every hop
 * goes through the guarded agents (and the IP-literal check in `exchange`), so each redirect target
 * is checked at its own connect time.
 */
async function head(run: FetchRun, start: URL): Promise<{ url: URL; redirects: number; ex: Exchange }> {
  const { options } = run;
  const maxRedirects = Math.min(options.maxRedirects ?? MAX_REDIRECTS, MAX_REDIRECTS);
  const conditional: { ifNoneMatch?: string; ifModifiedSince?: string } = {};
  if (options.ifNoneMatch !== undefined) conditional.ifNoneMatch = options.ifNoneMatch;
  if (options.ifModifiedSince !== undefined) conditional.ifModifiedSince = httpDate(options.ifModifiedSince);
  let url = start;
  let redirects = 0;
  for (;;) {
    let ex: Exchange;
    try {
      run.attempts++;
      ex = await exchange(url, {
        agents: run.agents,
        maxBytes: options.maxBytes ?? DEFAULT_MAX_SOURCE_BYTES,
        connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
        idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
        conditional,
        userAgent: options.userAgent ?? 'kitchen-batch',
        signal: run.signal,
      });
    } catch (error) {
      if (error instanceof SourceError && isTransient(error) && !run.signal.aborted) {
        await run.backoff(error, undefined);
        continue;
      }
      throw error;
    }
    const { status, headers } = ex;
    if (REDIRECT_STATUSES.has(status) && header(headers, 'location') !== undefined) {
      ex.discard();
      redirects++;
      if (redirects > maxRedirects) {
        throw new SourceError({
          code: 'source_unavailable',
          reason: 'redirects',
          status,
          message: `source ${redactUrl(start.href)} redirected more than ${maxRedirects} times`,
        });
      }
      const next = parseSourceUrl(redirectTarget(header(headers, 'location') ?? '', url, status));
      if (url.protocol === 'https:' && next.protocol === 'http:') {
        throw new SourceError({
          code: 'source_blocked',
          reason: 'downgrade',
          status,
          message: `source ${redactUrl(url.href)} redirects from https to http (${redactUrl(next.href)}); refused`,
        });
      }
      url = next;
      continue;
    }
    const conditionalSent =
      conditional.ifNoneMatch !== undefined || conditional.ifModifiedSince !== undefined;
    if ((status >= 200 && status < 300) || (status === 304 && conditionalSent)) return { url, redirects, ex };
    ex.discard();
    const error = statusError(status, url);
    if (status !== 429 && status !== 408 && status < 500) throw error;
    const retryAfter = parseRetryAfter(headers, (options.now ?? Date.now)());
    const cap = options.maxRetryAfterMs ?? 60_000;
    if (retryAfter !== undefined && retryAfter > cap) {
      throw new SourceError({
        code: 'source_unavailable',
        reason: 'status',
        status,
        message: `${error.message}; Retry-After asks for ${Math.ceil(retryAfter / 1000)} s, over the ${cap / 1000} s cap`,
      });
    }
    await run.backoff(error, retryAfter);
  }
}

/** A Location resolved against the URL that sent it; one that is no URL at all is the source's fault. */
function redirectTarget(location: string, from: URL, status: number): URL {
  try {
    return new URL(location, from);
  } catch (error) {
    throw new SourceError({
      code: 'source_unavailable',
      reason: 'redirects',
      status,
      message: `source ${redactUrl(from.href)} redirects to an invalid Location`,
      cause: error,
    });
  }
}

/** The head as the caller's answer (the body, if any, is the caller's to attach). */
function meta(run: FetchRun, url: URL, redirects: number, ex: Exchange): SourceMeta {
  return {
    url: url.href,
    status: ex.status,
    redirects,
    attempts: run.attempts,
    etag: header(ex.headers, 'etag'),
    lastModified: header(ex.headers, 'last-modified'),
  };
}

/** Refuses a declared Content-Length over the cap before a body byte is read. */
function declaredSize(ex: Exchange, url: URL, maxBytes: number): number | undefined {
  const raw = header(ex.headers, 'content-length');
  const size = raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
  if (size !== undefined && size > maxBytes) {
    ex.discard();
    throw tooLargeError(url, maxBytes, `Content-Length ${size}`);
  }
  return size;
}

function withAttempts(run: FetchRun, error: unknown): unknown {
  if (error instanceof SourceError) error.attempts = run.attempts;
  return error;
}

/**
 * Fetches an http(s) source through the address guard: at most 5 redirects (never https → http),
 * bounded retries of 429/5xx/resets/timeouts with the source's own backoff and `Retry-After`, and
 * a byte cap. Resolves with the head and a body stream (read it or destroy it: the total deadline
 * keeps running until it ends), or `notModified` for a 304 to `ifNoneMatch`/`ifModifiedSince`.
 * Rejects with a {@link SourceError}, or with `signal.reason` when the caller aborts.
 */
export async function fetchSource(
  url: string | URL,
  options: FetchSourceOptions = {},
): Promise<SourceResponse | SourceNotModified> {
  const start = parseSourceUrl(url);
  const run = new FetchRun(options, start);
  try {
    const { url: final, redirects, ex } = await head(run, start);
    if (ex.status === 304) {
      ex.discard();
      run.close();
      return { ...meta(run, final, redirects, ex), notModified: true };
    }
    const size = declaredSize(ex, final, options.maxBytes ?? DEFAULT_MAX_SOURCE_BYTES);
    // The stream's own errors do not carry `attempts`; the run closes with the body, whichever way.
    ex.body.once('close', () => run.close());
    return {
      ...meta(run, final, redirects, ex),
      notModified: false,
      size,
      contentType: header(ex.headers, 'content-type'),
      body: ex.body,
    };
  } catch (error) {
    run.close();
    throw withAttempts(run, error);
  }
}

/**
 * {@link fetchSource}, read whole into memory (for sources small enough to hold: the cap decides).
 * A body cut short by a reset or an idle timeout is fetched again from the start within the same
 * retry budget and deadline.
 */
export async function fetchSourceBytes(
  url: string | URL,
  options: FetchSourceOptions = {},
): Promise<SourceBytes | SourceNotModified> {
  const start = parseSourceUrl(url);
  const run = new FetchRun(options, start);
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_SOURCE_BYTES;
  try {
    for (;;) {
      const { url: final, redirects, ex } = await head(run, start);
      if (ex.status === 304) {
        ex.discard();
        return { ...meta(run, final, redirects, ex), notModified: true };
      }
      declaredSize(ex, final, maxBytes);
      const chunks: Buffer[] = [];
      try {
        for await (const chunk of ex.body) chunks.push(chunk as Buffer);
      } catch (error) {
        if (error instanceof SourceError && isTransient(error) && !run.signal.aborted) {
          await run.backoff(error, undefined);
          continue;
        }
        throw run.signal.aborted ? run.signal.reason : error;
      }
      const bytes = Buffer.concat(chunks);
      return {
        ...meta(run, final, redirects, ex),
        notModified: false,
        size: bytes.length,
        contentType: header(ex.headers, 'content-type'),
        bytes,
      };
    }
  } catch (error) {
    throw withAttempts(run, error);
  } finally {
    run.close();
  }
}
