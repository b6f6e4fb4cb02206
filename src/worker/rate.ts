/**
 * One rate for every worker on one API key (docs/contract.md#worker-mode): the pacing bucket of the
 * single-process governor (`src/api/governor.ts`) kept in Redis, taken and refilled by Lua scripts
 * on Redis's own clock, so that every worker on every machine draws from the same tokens, a 429
 * seen by one pauses all of them until its `Retry-After`, and the key's rate is learnt once from
 * all their requests (the same estimator: requests accepted between two 429s over the time between
 * them, the first estimate from the best window before the first 429).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  decreaseEvent,
  type GovernorEvent,
  type GovernorOptions,
  type Priority,
  type RateLimiter,
  takeNext,
} from '../api/governor.js';
import { monotonicMs, sleep } from '../util/time.js';
import { LIMITED, TAKE } from './rate-lua.js';

/** Where one API key's shared rate lives: its bucket and estimator (a hash) and its latest grants (a list). */
export interface RateKeys {
  rate: string;
  grants: string;
}

/**
 * The shared-rate keys of an API key: one rate per key on this Redis, whatever queue its workers
 * work on (the key's limit is the key's). Named by a fingerprint of the key (never the key), which
 * is also their hash tag: both keys are in one Cluster slot, apart from every queue's keys.
 */
export function rateKeys(apiKey: string): RateKeys {
  const fp = createHash('sha256').update(`kitchen-batch rate\n${apiKey}`).digest('hex').slice(0, 16);
  return { rate: `kb:rate:{${fp}}`, grants: `kb:rate:{${fp}}:grants` };
}

/** How long a worker waits before asking Redis again when the bucket is empty (at most). */
const MAX_WAIT_MS = 250;
/** How fast {@link SharedRate.pressure} follows the local queue: its time constant, ms. */
const PRESSURE_TAU_MS = 5000;

/** Options of {@link SharedRate}. */
export interface SharedRateOptions
  extends Pick<
    GovernorOptions,
    | 'initialRate'
    | 'minRate'
    | 'maxRate'
    | 'probeGain'
    | 'quietSeconds'
    | 'quietGain'
    | 'holdShare'
    | 'assumedBurstSeconds'
    | 'onChange'
  > {
  /** The API key's shared-rate keys ({@link rateKeys}). */
  keys: RateKeys;
  logger?: Logger;
}

interface Waiter {
  priority: Priority;
  resolve: (ticket: number) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

type SharedRedis = Redis & {
  kbTake(...args: string[]): Promise<string[]>;
  kbLimited(...args: string[]): Promise<string[]>;
};

/**
 * The worker mode's {@link RateLimiter}: this worker's requests wait in a local queue (submissions
 * before polls, as `takeNext` has it) and draw tokens one at a time from the bucket in Redis; the
 * rate, the estimate and a 429 pause are the same for every worker. A Redis that does not answer
 * holds requests back (they wait, they are not sent unpaced) until it is back.
 */
export class SharedRate implements RateLimiter {
  readonly #redis: SharedRedis;
  readonly #keys: RateKeys;
  readonly #args: string[];
  readonly #burstS: number;
  readonly #waiters: Waiter[] = [];
  readonly #onChange: ((event: GovernorEvent) => void) | undefined;
  readonly #logger: Logger | undefined;
  #pumping = false;
  #closed = false;
  #rate: number;
  #estimate: number | null = null;
  #pausedUntil = 0;
  #lastReportedRate: number;
  #pressure = 0;
  #pressureAt = monotonicMs();
  #redisDown = false;
  /** 429s seen by this worker. */
  rateLimited = 0;

  constructor(redis: Redis, options: SharedRateOptions) {
    this.#keys = options.keys;
    const min = options.minRate ?? 0.2;
    const max = options.maxRate ?? 1000;
    const initial = Math.min(max, Math.max(min, options.initialRate ?? 8));
    this.#args = [
      initial,
      min,
      max,
      options.holdShare ?? 0.98,
      options.probeGain ?? 0.002,
      options.quietSeconds ?? 15,
      options.quietGain ?? 0.01,
    ].map(String);
    this.#burstS = options.assumedBurstSeconds ?? 1;
    this.#rate = initial;
    this.#lastReportedRate = initial;
    this.#onChange = options.onChange;
    this.#logger = options.logger;
    redis.defineCommand('kbTake', { numberOfKeys: 2, lua: TAKE });
    redis.defineCommand('kbLimited', { numberOfKeys: 2, lua: LIMITED });
    this.#redis = redis as SharedRedis;
  }

  get rate(): number {
    return this.#rate;
  }

  get estimate(): number | null {
    return this.#estimate;
  }

  get pressure(): number {
    this.#updatePressure();
    return this.#pressure;
  }

  get pauseRemainingMs(): number {
    return Math.max(0, this.#pausedUntil - monotonicMs());
  }

  async waitForPause(signal?: AbortSignal): Promise<void> {
    for (let left = this.pauseRemainingMs; left > 0; left = this.pauseRemainingMs) await sleep(left, signal);
  }

  /** Resolves with the grant's sequence number in the shared bucket (the ticket of a later 429). */
  acquire(priority: Priority, signal?: AbortSignal): Promise<number> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#closed) return Promise.reject(new Error('the shared rate is closed'));
    return new Promise<number>((resolve, reject) => {
      const waiter: Waiter = { priority, resolve, reject, signal, onAbort: undefined };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#updatePressure();
      this.#waiters.push(waiter);
      void this.#pump();
    });
  }

  onRateLimited(retryAfterMs: number | undefined, fallbackMs: number, ticket?: unknown): void {
    this.rateLimited++;
    const pauseMs = retryAfterMs ?? fallbackMs;
    // This worker stops at once; the others when they next ask Redis.
    this.#pausedUntil = Math.max(this.#pausedUntil, monotonicMs() + pauseMs);
    const seq = typeof ticket === 'number' ? ticket : 0;
    this.#redis
      .kbLimited(
        this.#keys.rate,
        this.#keys.grants,
        ...this.#args,
        String(seq),
        String(pauseMs),
        String(this.#burstS),
      )
      .then(([fresh, rate, estimate, pauseLeft]) => {
        this.#learnt(Number(rate), Number(estimate));
        this.#pausedUntil = Math.max(this.#pausedUntil, monotonicMs() + Number(pauseLeft));
        if (fresh === '1') {
          this.#lastReportedRate = this.#rate;
          this.#onChange?.(decreaseEvent(this.#rate, pauseMs, retryAfterMs, this.#estimate));
        }
      })
      .catch((error: unknown) => this.#redisError(error));
  }

  onSuccess(): void {}

  close(reason: unknown): void {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) {
      if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.reject(reason);
    }
  }

  /** One loop per worker: asks Redis for a token for the first waiter, sleeps as told, again. */
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#waiters.length > 0 && !this.#closed) {
        const local = this.pauseRemainingMs;
        if (local > 0) {
          await sleep(local);
          continue;
        }
        let answer: string[];
        try {
          answer = await this.#redis.kbTake(this.#keys.rate, this.#keys.grants, ...this.#args);
          if (this.#redisDown)
            this.#logger?.info({ event: 'rate_redis_back' }, 'the shared rate answers again');
          this.#redisDown = false;
        } catch (error) {
          // A script Redis refuses is a bug, not an outage: the requests fail with it.
          if ((error as Error)?.name === 'ReplyError') {
            this.close(error);
            return;
          }
          this.#redisError(error);
          await sleep(500);
          continue;
        }
        const [granted, value, rate, estimate] = answer.map(Number) as [number, number, number, number];
        this.#learnt(rate, estimate);
        if (granted === 1) {
          const waiter = takeNext(this.#waiters);
          if (!waiter) continue;
          if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
          this.#updatePressure();
          waiter.resolve(value);
        } else {
          // Other workers ask too: a little jitter keeps them from asking in lockstep.
          await sleep(Math.min(MAX_WAIT_MS, value) * (1 + Math.random() * 0.2) + 1);
        }
      }
    } finally {
      this.#pumping = false;
      this.#updatePressure();
    }
  }

  #learnt(rate: number, estimate: number): void {
    if (Number.isFinite(rate) && rate > 0) this.#rate = rate;
    if (Number.isFinite(estimate) && estimate > 0) this.#estimate = estimate;
    if (this.#rate >= this.#lastReportedRate * 1.25) {
      this.#lastReportedRate = this.#rate;
      this.#onChange?.({ type: 'increase', rate: this.#rate });
    }
  }

  #redisError(error: unknown): void {
    if (this.#redisDown) return;
    this.#redisDown = true;
    this.#logger?.warn(
      { event: 'rate_redis_error', err: (error as Error)?.message ?? String(error) },
      'the shared rate in Redis does not answer; requests wait until it does',
    );
  }

  #updatePressure(): void {
    const now = monotonicMs();
    const decay = Math.exp(-Math.max(0, now - this.#pressureAt) / PRESSURE_TAU_MS);
    this.#pressure = this.#pressure * decay + (this.#waiters.length > 0 ? 1 - decay : 0);
    this.#pressureAt = now;
  }
}

/** The shared rate kept at `rateKey` as Redis holds it now, for `status` (null when no worker has used it lately). */
export async function readSharedRate(
  redis: Redis,
  rateKey: string,
): Promise<{ rate: number; estimate: number | null; paused_ms: number } | null> {
  const [fields, time] = await Promise.all([
    redis.hmget(rateKey, 'rate', 'estimate', 'pause_until'),
    redis.time(),
  ]);
  const [rate, estimate, pause] = fields;
  if (rate == null) return null;
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  return {
    rate: Number(rate),
    estimate: estimate == null ? null : Number(estimate),
    paused_ms: Math.max(0, Number(pause ?? 0) - now),
  };
}
