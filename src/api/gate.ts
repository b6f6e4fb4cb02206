import pRetry from 'p-retry';
import type { Logger } from 'pino';
import { UNREACHABLE_MS } from '../limits.js';
import { monotonicMs, sleep } from '../util/time.js';
import { ApiError } from './errors.js';
import type { Priority, RateLimiter } from './governor.js';
import {
  backoffDelay,
  isRetryable,
  MAX_RETRY_AFTER_MS,
  type RequestKind,
  type RetryOptions,
  retryBudget,
  retryDelay,
} from './policy.js';

/** Counters the report and the progress line show. */
export interface ServiceStats {
  requests: number;
  /** Of which to the service's API (styles, submissions, polls), all under its rate limit; the rest are downloads. */
  api: number;
  retries: number;
  rateLimited: number;
  successes: number;
}

/** Options of {@link ServiceGate}. */
export interface GateOptions {
  /** Retry budget and backoff. */
  retry?: RetryOptions;
  /** No answer from the service for this long while calls keep failing: it counts as unreachable. @default 120_000 */
  unreachableMs?: number;
  /** Told of every attempt's answer by status class (the run's metrics count them by endpoint). */
  onRequest?: (kind: RequestKind, status: RequestStatusClass) => void;
}

/** An attempt's answer as metrics count it: an HTTP status class, or no answer at all. */
export type RequestStatusClass = '2xx' | '4xx' | '5xx' | 'network';

/** Per-call options of {@link ServiceGate.call}. */
export interface CallOptions {
  /** The soft stop: no new attempt starts once it aborts, and waits end early. */
  signal?: AbortSignal;
  /** Names the item in retry log lines. */
  label?: string;
  /**
   * Runs before every attempt, before the rate slot is taken (so a slot is never held while it
   * waits): the poll stage waits for the job's turn here and checks its timeout.
   */
  beforeAttempt?: () => Promise<void>;
}

const PRIORITY: Record<Exclude<RequestKind, 'download'>, Priority> = {
  submit: 'submit',
  'submit-ambiguous': 'submit',
  poll: 'poll',
  styles: 'poll',
};

/**
 * The pipeline's one door to the service: every request passes the shared rate governor and the one
 * retry policy (p-retry with our classifier and our delays: Retry-After first, else full-jitter
 * backoff). 429s pause the whole client through the governor and do not use up the retry budget.
 * Result downloads are not rate limited, but wait out a 429 pause too.
 */
export class ServiceGate {
  readonly stats: ServiceStats = { requests: 0, api: 0, retries: 0, rateLimited: 0, successes: 0 };
  readonly #governor: RateLimiter;
  readonly #retry: RetryOptions;
  readonly #unreachableMs: number;
  readonly #logger: Logger;
  readonly #createdAt = monotonicMs();
  /** Monotonic time of the last answer from the service (any status but 5xx/429 counts as alive). */
  #lastAliveAt = Number.NEGATIVE_INFINITY;
  #consecutive429 = 0;
  readonly #onRequest: GateOptions['onRequest'];

  constructor(governor: RateLimiter, logger: Logger, options: GateOptions = {}) {
    this.#governor = governor;
    this.#retry = options.retry ?? {};
    this.#unreachableMs = options.unreachableMs ?? UNREACHABLE_MS;
    this.#logger = logger;
    this.#onRequest = options.onRequest;
  }

  /** The request rate the governor allows now, per second. */
  get rate(): number {
    return this.#governor.rate;
  }

  /** What the key sustains as learnt from 429s (the governor's estimate), else the rate held now. */
  get learntRate(): number {
    return this.#governor.estimate ?? this.#governor.rate;
  }

  /**
   * True when calls keep failing and the service has said nothing for `unreachableMs` (or has never
   * answered at all): the run should end with exit 3 rather than mark every item incomplete.
   */
  get unreachable(): boolean {
    const silentFor = monotonicMs() - Math.max(this.#lastAliveAt, this.#createdAt);
    return silentFor >= this.#unreachableMs || this.stats.successes === 0;
  }

  /** Runs `attempt` under the governor and the retry policy for `kind`. */
  async call<T>(kind: RequestKind, attempt: () => Promise<T>, options: CallOptions = {}): Promise<T> {
    const { signal } = options;
    const retryable = (error: unknown) => !signal?.aborted && isRetryable(error, kind);
    const gated = async () => {
      await options.beforeAttempt?.();
      let ticket: unknown;
      if (kind === 'download') await this.#governor.waitForPause(signal);
      else ticket = await this.#governor.acquire(PRIORITY[kind], signal);
      this.stats.requests++;
      if (kind !== 'download') this.stats.api++;
      try {
        const result = await attempt();
        this.#onRequest?.(kind, '2xx');
        this.stats.successes++;
        this.#consecutive429 = 0;
        this.#lastAliveAt = monotonicMs();
        if (kind !== 'download') this.#governor.onSuccess();
        return result;
      } catch (error) {
        const status = error instanceof ApiError && error.kind === 'http' ? error.status : undefined;
        this.#onRequest?.(kind, status === undefined ? 'network' : status >= 500 ? '5xx' : '4xx');
        this.#observe(error, ticket);
        throw error;
      } finally {
        // After the 429 (if it was one) has paused the governor: the next request waits for that.
        if (kind !== 'download') this.#governor.settled?.();
      }
    };
    const { retries, maxRetryTime } = retryBudget(kind, this.#retry);
    return pRetry(gated, {
      retries,
      maxRetryTime,
      minTimeout: 0,
      maxTimeout: 0,
      factor: 1,
      // No `signal` here on purpose: p-retry checks it again after a *successful* attempt and throws,
      // which would drop the answer of a POST that was already accepted (a job id lost = a duplicate
      // charge on the rerun). The stop is honoured before each attempt and during each wait instead.
      shouldConsumeRetry: ({ error }) => !(error instanceof ApiError && error.rateLimited),
      shouldRetry: ({ error }) => retryable(error),
      onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
        if (!retryable(error) || retriesLeft <= 0) return;
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
            reason: api ? api.code : (error as { code?: unknown }).code,
            status: api?.status,
            errno: api?.errno,
            delay_ms: ms,
          },
          `retrying ${kind}: ${error.message}`,
        );
        // After a 429 the governor's pause holds the next attempt back (and everyone else's).
        if (!api?.rateLimited) await sleep(ms, signal);
      },
    });
  }

  /** What a failed attempt tells about the service: a 429 pauses everyone; a 4xx proves it is up. */
  #observe(error: unknown, ticket: unknown): void {
    if (!(error instanceof ApiError)) return;
    if (error.rateLimited) {
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
      this.#governor.onRateLimited(retryAfter, fallback, ticket);
    } else if (error.kind === 'http' && (error.status ?? 500) < 500) {
      this.#lastAliveAt = monotonicMs();
    }
  }
}
