import { ApiError } from './errors.js';

/** Shape of the retry policy: capped exponential backoff with full jitter. */
export interface BackoffOptions {
  /** First delay's ceiling. @default 500 */
  baseMs?: number;
  /** Largest delay. @default 30_000 */
  capMs?: number;
  /** Randomness source in [0,1), injectable for tests. @default Math.random */
  random?: () => number;
}

/**
 * Full-jitter backoff (AWS "Exponential Backoff and Jitter"): a uniform delay in
 * [0, min(cap, base·2^attempt)]. `attempt` counts from 0. Pure given `random`.
 * Never returns less than 50 ms, so a storm never turns into a busy loop.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 500;
  const cap = options.capMs ?? 30_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  return Math.max(50, Math.round(random() * ceiling));
}

/** Longest `Retry-After` we honour; larger values are capped (and the cap is logged by the caller). */
export const MAX_RETRY_AFTER_MS = 15 * 60_000;

/** What a request is, for the retry decision. */
export type RequestKind = 'submit' | 'poll' | 'download' | 'styles';

/**
 * The one retry classifier. Polls, downloads and the styles list retry anything transient.
 * A submission (a paid job) retries only when the service cannot have created the job
 * (429, 503, a connection that never opened); the rest is the contract's `submit_unknown`.
 * 4xx other than 429 never retry.
 */
export function isRetryable(error: unknown, kind: RequestKind): boolean {
  if (!(error instanceof ApiError)) return false;
  if (!error.transient) return false;
  if (kind === 'submit') return !error.mayHaveCreatedJob;
  return true;
}

/** The wait before the next attempt: the service's Retry-After when usable, else backoff. */
export function retryDelay(
  error: unknown,
  attempt: number,
  options: BackoffOptions = {},
): { ms: number; capped: boolean } {
  if (error instanceof ApiError && error.retryAfterMs !== undefined) {
    const capped = error.retryAfterMs > MAX_RETRY_AFTER_MS;
    return { ms: capped ? MAX_RETRY_AFTER_MS : error.retryAfterMs, capped };
  }
  return { ms: backoffDelay(attempt, options), capped: false };
}
