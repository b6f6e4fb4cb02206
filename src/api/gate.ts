import pRetry from 'p-retry';
import type { Logger } from 'pino';
import { ApiError } from '../api/errors.js';
import type { Priority, RateGovernor } from '../api/governor.js';
import {
  type BackoffOptions,
  backoffDelay,
  isRetryable,
  MAX_RETRY_AFTER_MS,
  type RequestKind,
  retryDelay,
} from '../api/policy.js';
import { monotonicMs, sleep } from '../util/time.js';

/** Retry budget of one service call. */
export interface RetryOptions extends BackoffOptions {
  /** Retries of transient failures (429s do not count). @default 6 */
  retries?: number;
  /** Total time one call may spend retrying, 429 storms included. @default 600_000 */
  maxRetryTimeMs?: number;
}

/** Counters the report and the progress line show. */
export interface ServiceStats {
  requests: number;
  retries: number;
  rateLimited: number;
  successes: number;
}

/**
 * The pipeline's one door to the service: every request passes the shared rate governor and the one
 * retry policy (p-retry with our classifier and our delays: Retry-After first, else full-jitter
 * backoff). 429s pause the whole client through the governor and do not use up the retry budget.
 */
export class ServiceGate {
  readonly stats: ServiceStats = { requests: 0, retries: 0, rateLimited: 0, successes: 0 };
  /** Monotonic time of the last answer from the service (any status but 5xx/429 counts as alive). */
  lastAliveAt = Number.NEGATIVE_INFINITY;
  readonly #governor: RateGovernor;
  readonly #retry: RetryOptions;
  readonly #logger: Logger;
  #consecutive429 = 0;

  constructor(governor: RateGovernor, retry: RetryOptions, logger: Logger) {
    this.#governor = governor;
    this.#retry = retry;
    this.#logger = logger;
  }

  /**
   * Runs `attempt` under the governor and the retry policy.
   * @param retryable decides which failures are retried; defaults to the classifier for `kind`.
   */
  async call<T>(
    kind: RequestKind,
    priority: Priority,
    attempt: (signal: AbortSignal | undefined) => Promise<T>,
    options: { signal?: AbortSignal; label?: string; retryable?: (error: unknown) => boolean } = {},
  ): Promise<T> {
    const retryable = options.retryable ?? ((error: unknown) => isRetryable(error, kind));
    const gated = async () => {
      if (kind === 'download') await this.#governor.waitForPause(options.signal);
      else await this.#governor.acquire(priority, options.signal);
      this.stats.requests++;
      try {
        const result = await attempt(options.signal);
        this.stats.successes++;
        this.#consecutive429 = 0;
        this.lastAliveAt = monotonicMs();
        if (kind !== 'download') this.#governor.onSuccess();
        return result;
      } catch (error) {
        if (error instanceof ApiError && error.rateLimited) {
          this.stats.rateLimited++;
          this.#consecutive429++;
          // The whole client waits: the governor pauses every request, this caller's next one included.
          const fallback = backoffDelay(this.#consecutive429 - 1, this.#retry);
          const retryAfter =
            error.retryAfterMs === undefined ? undefined : Math.min(error.retryAfterMs, MAX_RETRY_AFTER_MS);
          if (error.retryAfterMs !== undefined && error.retryAfterMs > MAX_RETRY_AFTER_MS) {
            this.#logger.warn(
              { event: 'retry_after_capped', retry_after_ms: error.retryAfterMs, cap_ms: MAX_RETRY_AFTER_MS },
              'Retry-After is absurdly long; waiting the cap instead',
            );
          }
          this.#governor.onRateLimited(retryAfter, fallback);
        } else if (error instanceof ApiError && error.kind === 'http' && (error.status ?? 500) < 500) {
          this.lastAliveAt = monotonicMs();
        }
        throw error;
      }
    };
    return pRetry(gated, {
      retries: this.#retry.retries ?? 6,
      maxRetryTime: this.#retry.maxRetryTimeMs ?? 600_000,
      minTimeout: 0,
      maxTimeout: 0,
      factor: 1,
      // No `signal` here on purpose: p-retry checks it again after a *successful* attempt and throws,
      // which would drop the answer of a POST that was already accepted (a job id lost = a duplicate
      // charge on the rerun). The stop is honoured before each attempt and during each wait instead.
      shouldConsumeRetry: ({ error }) => !(error instanceof ApiError && error.rateLimited),
      shouldRetry: ({ error }) => !options.signal?.aborted && retryable(error),
      onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
        if (options.signal?.aborted || !retryable(error) || retriesLeft <= 0) return;
        this.stats.retries++;
        const api = error instanceof ApiError ? error : undefined;
        const ms = api?.rateLimited
          ? this.#governor.pauseRemainingMs
          : retryDelay(error, attemptNumber - 1, this.#retry).ms;
        this.#logger.info(
          {
            event: 'retry',
            kind,
            item: options.label,
            attempt: attemptNumber,
            reason: api ? api.code : String(error),
            status: api?.status,
            errno: api?.errno,
            delay_ms: ms,
          },
          `retrying ${kind}: ${(error as Error).message}`,
        );
        // After a 429 the governor's pause holds the next attempt back (and everyone else's).
        if (!api?.rateLimited) await sleep(ms, options.signal);
      },
    });
  }
}
