/**
 * The retry policy: which failures are retried, how long to wait, and how many attempts each kind
 * of request gets. Pure functions, so the whole policy is unit-tested without a server; the gate
 * (`gate.ts`) is the one place that applies it.
 */
import { ResultDecodeError } from '../errors.js';
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

/** Retry budget of service calls. */
export interface RetryOptions extends BackoffOptions {
  /** Retries of a transient failure of a submission, a download or the styles list (429s do not count). @default 6 */
  retries?: number;
  /** Total time one such call may spend retrying, 429 storms included. @default 600_000 */
  maxRetryTimeMs?: number;
  /**
   * Consecutive failed polls of one job before it is left `incomplete/poll_failed` (429s do not
   * count). Polls have no time budget: `--job-timeout` bounds them.
   * @default 10
   */
  pollAttempts?: number;
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

/**
 * What a request is, for the retry decision:
 * - `submit`: a paid job submission, resent only when the service cannot have created the job;
 * - `submit-ambiguous`: the same under `--retry-ambiguous`, resent on any transient failure;
 * - `poll`, `styles`: reads, retried on any transient failure;
 * - `download`: a result download, retried on transient failures and on a result that does not decode.
 */
export type RequestKind = 'submit' | 'submit-ambiguous' | 'poll' | 'download' | 'styles';

/**
 * The one retry classifier. Reads retry anything transient. A submission (a paid job) retries only
 * when the service cannot have created the job (429, 503, a connection that never opened); the rest
 * is the contract's `submit_unknown` (docs/contract.md#rules). 4xx other than 429 never retry: an
 * expired result URL (403/404/410) is re-polled for a fresh one by the download stage instead.
 */
export function isRetryable(error: unknown, kind: RequestKind): boolean {
  if (error instanceof ResultDecodeError) return kind === 'download';
  if (!(error instanceof ApiError)) return false;
  if (!error.transient) return false;
  if (kind === 'submit') return !error.mayHaveCreatedJob;
  return true;
}

/** How many attempts a call of `kind` gets and for how long (p-retry's `retries` and `maxRetryTime`). */
export function retryBudget(
  kind: RequestKind,
  options: RetryOptions = {},
): { retries: number; maxRetryTime: number } {
  if (kind === 'poll')
    return { retries: Math.max(0, (options.pollAttempts ?? 10) - 1), maxRetryTime: Infinity };
  return { retries: options.retries ?? 6, maxRetryTime: options.maxRetryTimeMs ?? 600_000 };
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
