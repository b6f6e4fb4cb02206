import { monotonicMs, sleep } from '../util/time.js';

/** Which requests go first when the budget is tight: polls finish paid work before new jobs start. */
export type Priority = 'poll' | 'submit';

/** Options of {@link RateGovernor}. */
export interface GovernorOptions {
  /** Starting request rate, requests per second. @default 8 */
  initialRate?: number;
  /** Floor of the rate. @default 0.2 */
  minRate?: number;
  /**
   * Ceiling of the rate: a guard, not a target (the rate grows only while it is in use and no 429
   * comes). High enough that a fast service is never held back by it: a job costs two requests.
   * @default 1000
   */
  maxRate?: number;
  /** Additive increase: requests per second gained per second of 429-free traffic at full rate. @default 0.5 */
  increasePerSecond?: number;
  /** Multiplicative decrease on a 429. @default 0.7 */
  decreaseFactor?: number;
  /** Monotonic clock in ms, injectable for tests. @default performance.now */
  now?: () => number;
  /** Called when the rate or a pause changes (for logs and progress). */
  onChange?: (event: GovernorEvent) => void;
}

/** A change the governor made, for the run log. */
export type GovernorEvent =
  | { type: 'decrease'; rate: number; pauseMs: number; retryAfter: boolean }
  | { type: 'increase'; rate: number };

interface Waiter {
  priority: Priority;
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * The one rate gate every request to the service passes (submits and polls share it).
 * A token bucket whose rate follows AIMD: multiplicative decrease and a pause of the whole client on
 * a 429 (Retry-After when given), additive increase while no 429 comes, so a run settles just under
 * the service's limit instead of bouncing off it. Polls are served before submissions.
 */
export class RateGovernor {
  #rate: number;
  #tokens: number;
  #last: number;
  #pausedUntil = 0;
  #lastDecrease = Number.NEGATIVE_INFINITY;
  #lastReportedRate: number;
  #timer: NodeJS.Timeout | undefined;
  readonly #waiters: Waiter[] = [];
  readonly #min: number;
  readonly #max: number;
  readonly #increase: number;
  readonly #decrease: number;
  readonly #now: () => number;
  readonly #onChange: ((event: GovernorEvent) => void) | undefined;
  /** 429s seen. */
  rateLimited = 0;

  constructor(options: GovernorOptions = {}) {
    this.#rate = options.initialRate ?? 8;
    this.#min = options.minRate ?? 0.2;
    this.#max = options.maxRate ?? 1000;
    this.#increase = options.increasePerSecond ?? 0.5;
    this.#decrease = options.decreaseFactor ?? 0.7;
    this.#now = options.now ?? monotonicMs;
    this.#onChange = options.onChange;
    this.#last = this.#now();
    this.#tokens = Math.min(this.#capacity(), 2);
    this.#lastReportedRate = this.#rate;
  }

  /** Current rate in requests per second. */
  get rate(): number {
    return this.#rate;
  }

  /** Milliseconds left in a 429 pause (0 when none). */
  get pauseRemainingMs(): number {
    return Math.max(0, this.#pausedUntil - this.#now());
  }

  /** Waits out a 429 pause without taking a slot (result downloads: not rate limited, but polite). */
  async waitForPause(signal?: AbortSignal): Promise<void> {
    for (let left = this.pauseRemainingMs; left > 0; left = this.pauseRemainingMs) {
      await sleep(left, signal);
    }
  }

  /** Waits for a slot to send one request. Rejects with the signal's reason if it aborts. */
  acquire(priority: Priority, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { priority, resolve, reject, signal, onAbort: undefined };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
      this.#pump();
    });
  }

  /**
   * A 429 arrived: pause every request until `retryAfterMs` (or `fallbackMs`) has passed and lower
   * the rate. Several 429s from one burst count as one congestion event.
   */
  onRateLimited(retryAfterMs: number | undefined, fallbackMs: number): void {
    this.rateLimited++;
    const now = this.#now();
    const pauseMs = retryAfterMs ?? fallbackMs;
    this.#pausedUntil = Math.max(this.#pausedUntil, now + pauseMs);
    // The pause is not idle credit: without this the refill at its end counts the whole pause and
    // releases a burst of `capacity` requests into a service that just said it has room for one.
    // One request probes when the pause ends; the rest follow at the (lowered) rate.
    this.#tokens = Math.min(this.#tokens, 1);
    this.#last = Math.max(this.#last, this.#pausedUntil);
    // Requests sent before the pause began may still come back 429: one decrease per pause.
    if (now - this.#lastDecrease > Math.max(1000, pauseMs)) {
      this.#lastDecrease = now;
      this.#rate = Math.max(this.#min, this.#rate * this.#decrease);
      this.#lastReportedRate = this.#rate;
      this.#onChange?.({
        type: 'decrease',
        rate: this.#rate,
        pauseMs,
        retryAfter: retryAfterMs !== undefined,
      });
    }
    this.#schedule(this.#pausedUntil - now);
  }

  /** A request got through without a 429: creep the rate up. */
  onSuccess(): void {
    // Only a rate we are actually using says anything about the service: while requests go out
    // below the rate (nobody waits, tokens to spare), leave it alone, or a quiet hour would grow it
    // into a burst the service never agreed to.
    if (this.#waiters.length === 0 && this.#tokens >= 1) return;
    // Slow start until the first 429 (the rate doubles per second of full use), then additive
    // increase: +increase req/s per second of traffic at the current rate.
    const step =
      this.#lastDecrease === Number.NEGATIVE_INFINITY ? 1 : this.#increase / Math.max(this.#rate, 1);
    this.#rate = Math.min(this.#max, this.#rate + step);
    if (this.#rate >= this.#lastReportedRate * 1.25) {
      this.#lastReportedRate = this.#rate;
      this.#onChange?.({ type: 'increase', rate: this.#rate });
    }
  }

  /** Stops the internal timer and rejects the waiters (shutdown). */
  close(reason: unknown): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const waiter of this.#waiters.splice(0)) {
      if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.reject(reason);
    }
  }

  #capacity(): number {
    // About half a second of burst, at most 10: enough to keep a pipeline busy, small enough not to
    // overrun a service bucket we cannot see.
    return Math.max(1, Math.min(10, this.#rate / 2));
  }

  #refill(now: number): void {
    const elapsed = Math.max(0, now - this.#last) / 1000;
    this.#last = now;
    this.#tokens = Math.min(this.#capacity(), this.#tokens + elapsed * this.#rate);
  }

  #next(): Waiter | undefined {
    const i = this.#waiters.findIndex((w) => w.priority === 'poll');
    return this.#waiters.splice(Math.max(i, 0), 1)[0];
  }

  #pump(): void {
    if (this.#timer) return;
    const now = this.#now();
    if (now < this.#pausedUntil) {
      this.#schedule(this.#pausedUntil - now);
      return;
    }
    this.#refill(now);
    while (this.#waiters.length > 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      const waiter = this.#next()!;
      if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve();
    }
    if (this.#waiters.length > 0) this.#schedule(((1 - this.#tokens) / this.#rate) * 1000);
  }

  #schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#pump();
      },
      Math.min(2_147_483_647, Math.max(1, Math.ceil(ms))),
    );
  }
}
