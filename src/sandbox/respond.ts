/**
 * How the sandbox answers: one `send` for every JSON or text answer (with the `slowMs` delay, the
 * skewed `Date`, `Retry-After` in the configured mode and the after-body reset), and the two
 * streaming bodies of the result faults (slow drip, oversized).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sleep } from '../util/time.js';
import { retryAfterValue, type SandboxFaults } from './faults.js';
import type { SandboxRequestRecord } from './types.js';

/** Slow-drip pace: small enough that a 100 KB image takes close to a minute. */
export const DRIP_BYTES = 512;
export const DRIP_INTERVAL_MS = 250;
/** Size of the `oversized` result body: far past any sane image cap. */
export const OVERSIZED_BYTES = 200 * 1024 * 1024;

/** One request being answered, with the per-request state the response path needs. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request's entry in the statistics; routes set its `fault`. */
  record: SandboxRequestRecord;
  /** Reset the connection instead of answering (the `after-body` reset). */
  resetInsteadOfAnswer: boolean;
}

/** What the response helpers read from the sandbox. */
export interface ResponseEnv {
  /** The current fault knobs. */
  faults(): Pick<SandboxFaults, 'slowMs' | 'dateSkewMs' | 'retryAfter'>;
  /** Aborts when the sandbox closes: pending delays end and streaming bodies stop. */
  signal: AbortSignal;
}

/** Answer options of {@link send}. */
export interface SendOptions {
  headers?: Record<string, string>;
  /** Add a Retry-After for this wait, in the configured mode. */
  retryAfterMs?: number;
  /** Send this text verbatim instead of JSON-encoding `body`. */
  raw?: { text: string; contentType: string };
}

/** The spec's error body. */
export function errorBody(code: string, message: string): unknown {
  return { error: { code, message } };
}

/**
 * Sleeps `ms` unless the sandbox closes first. Resolves `true` when the wait ran out and `false`
 * when the sandbox closed (before or during the wait); never rejects.
 */
export async function waitWhileOpen(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, signal);
    return true;
  } catch {
    return false;
  }
}

/** The `slowMs` knob; `false` when the sandbox closed meanwhile. */
export async function slowDelay(env: ResponseEnv): Promise<boolean> {
  const ms = env.faults().slowMs;
  return ms > 0 ? waitWhileOpen(ms, env.signal) : !env.signal.aborted;
}

/**
 * Writes the status line and headers with the (possibly skewed) `Date`. `serverNow` is the skewed
 * time already used for a `Retry-After` date, so both headers agree.
 */
export function writeHead(
  env: ResponseEnv,
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  serverNow?: number,
): void {
  res.setHeader('date', new Date(serverNow ?? Date.now() + env.faults().dateSkewMs).toUTCString());
  res.writeHead(status, headers);
}

/** Answers (after `slowMs`), or resets the connection when an after-body reset was rolled. */
export async function send(
  env: ResponseEnv,
  ex: Exchange,
  status: number,
  body: unknown,
  options: SendOptions = {},
): Promise<void> {
  const { res } = ex;
  if (!(await slowDelay(env))) return;
  if (res.destroyed || res.headersSent) return;
  if (ex.resetInsteadOfAnswer) {
    ex.record.fault = 'reset';
    res.socket?.resetAndDestroy();
    return;
  }
  const faults = env.faults();
  const serverNow = Date.now() + faults.dateSkewMs;
  const text = options.raw ? options.raw.text : JSON.stringify(body);
  const headers: Record<string, string> = {
    'content-type': options.raw ? options.raw.contentType : 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...options.headers,
  };
  if (options.retryAfterMs !== undefined) {
    const value = retryAfterValue(faults.retryAfter, options.retryAfterMs, serverNow);
    if (value !== undefined) headers['retry-after'] = value;
  }
  writeHead(env, res, status, headers, serverNow);
  res.end(text);
}

/** Writes `data` in {@link DRIP_BYTES} pieces every {@link DRIP_INTERVAL_MS}; headers already sent. */
export async function drip(env: ResponseEnv, res: ServerResponse, data: Buffer): Promise<void> {
  for (let offset = 0; offset < data.length; offset += DRIP_BYTES) {
    if (res.destroyed || env.signal.aborted) return;
    res.write(data.subarray(offset, offset + DRIP_BYTES));
    if (!(await waitWhileOpen(DRIP_INTERVAL_MS, env.signal))) return;
  }
  res.end();
}

/**
 * Writes the image followed by zero padding up to {@link OVERSIZED_BYTES}; headers already sent.
 * Stops when the client goes away or the sandbox closes.
 */
export async function writeOversized(env: ResponseEnv, res: ServerResponse, image: Buffer): Promise<void> {
  res.write(image);
  const padding = Buffer.alloc(64 * 1024);
  let sent = image.length;
  while (sent < OVERSIZED_BYTES) {
    if (res.destroyed || env.signal.aborted) return;
    const chunk = padding.subarray(0, Math.min(padding.length, OVERSIZED_BYTES - sent));
    sent += chunk.length;
    if (!res.write(chunk)) {
      // Honour backpressure so a client that stops reading does not balloon our memory.
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  res.end();
}
