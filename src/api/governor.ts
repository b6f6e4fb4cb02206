import { monotonicMs, sleep } from '../util/time.js';
import { decreaseEvent, type GovernorEvent, type Priority, type RateLimiter, takeNext } from './limiter.js';
import { RateEstimator } from './rate-estimator.js';

// What every rate limit shares lives in limiter.ts; re-exported here, where its users import it from.
export { decreaseEvent, type GovernorEvent, type Priority, type RateLimiter, takeNext } from './limiter.js';

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
  /**
   * Gentle probing once the key's rate is known: the rate grows by this share of the estimate per
   * second of traffic at full rate. @default 0.002
   */
  probeGain?: number;
  /**
   * After this many seconds of full use without a 429 the probing speeds up (see
   * {@link RateGovernor}). @default 30
   */
  quietSeconds?: number;
  /** How fast the probing speeds up after a quiet spell: share of the estimate per second². @default 0.01 */
  quietGain?: number;
  /** The held rate as a share of the estimate. @default 0.98 */
  holdShare?: number;
  /**
   * The burst a key is assumed to allow before its second 429, in seconds of its rate (token buckets
   * are commonly sized at one second). Only the first estimate uses it. @default 1
   */
  assumedBurstSeconds?: number;
  /** Monotonic clock in ms, injectable for tests. @default performance.now */
  now?: () => number;
  /** Called when the rate or a pause changes (for logs and progress). */
  onChange?: (event: GovernorEvent) => void;
}

interface Waiter {
  priority: Priority;
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** Accepted requests before the first 429 after which requests no longer go one at a time. */
const SERIAL_START = 32;
/**
 * Before the first 429, the most one turn of the pacing timer releases, in seconds of the rate. The
 * timer fires late on a busy event loop (a few ms at 10^4 items): a bucket of one token then sent
 * one request per turn of the loop, whatever the rate (measured: the rate at its 1,000/s ceiling,
 * about 400 requests/s sent, and the job slots waiting for the rest). 10 ms of the rate is what the
 * pacing owes by then, not a burst: one token below 100 requests/s, ten at the ceiling.
 */
const CATCH_UP_S = 0.01;
/** How fast {@link RateGovernor.pressure} follows the queue: its time constant, ms. */
const PRESSURE_TAU_MS = 5000;

/**
 * The one rate gate every request to the service passes (submits and polls share it). A pacing
 * token bucket whose rate follows an estimate of what the key sustains, learnt from 429s as a
 * bottleneck is estimated rather than probed by loss (docs/contract.md#rate-limits):
 *
 * - A 429 means the service's bucket is empty at that moment. Between two 429s the requests it
 *   accepted are what it refilled in the meantime, so `accepted / interval` is the key's rate, or
 *   our share of it when other processes use the key too: the estimate. When the bucket was full and
 *   overflowing for part of the interval (we held below its rate), the best window that began with
 *   it full says more, and is taken instead.
 * - Before the second 429 there is no empty start: the first estimate takes the best window of
 *   accepted requests before the 429, with the key's burst assumed to be `assumedBurstSeconds` of
 *   its rate, and at least a quarter of the starting rate (a process that joins a key others already
 *   drain is turned away before it has a history).
 * - The rate is held just under the estimate (`holdShare`) and probed upward gently (`probeGain` of
 *   it per second of full use), faster after a quiet spell without a 429 (`quietSeconds`, longer for
 *   a slow key; then `quietGain` × the spell's excess²), so a key at its limit answers a 429 about
 *   once a minute (a 15 s spell made it two or three, each with a second's pause), while capacity
 *   that others gave up, or a first estimate too low, is found within seconds of the spell.
 * - Once a 429 cut a measured estimate by a tenth (others use the key, or its limit fell: a shared
 *   key), the share is found by additive increase and multiplicative decrease instead: each 429
 *   takes a fifth off what the share used, and the rate grows by the same requests per second in
 *   every process with the same settings (0.5 % of the starting rate per second, and 0.3 % of
 *   it × the spell's excess² after the quiet spell), so the shares
 *   close in on each other at each wave of 429s (test/api/governor-shared.test.ts).
 * - Until the first 429 the rate grows quickly while it is in use (slow start: it doubles each
 *   second of full use), requests go one at a time (for the first 32 accepted) and evenly spaced
 *   (a timer that fired late releases what it owes, up to 10 ms of the rate), so the first 429
 *   comes alone.
 * - Every 429 pauses the whole client until its `Retry-After` (or the caller's fallback); one
 *   request probes when the pause ends and the rest follow at the new rate, so a burst of 429s is
 *   never answered with a burst. 429s of one burst are one event. A 429 too soon after the last to
 *   measure anything lowers the estimate by a fifth; one that comes while our queue was mostly empty
 *   (our demand, not the key, set what we sent) by 15 % at most.
 *
 * Submissions are served before polls ({@link takeNext}). The learning is the pure
 * {@link RateEstimator}'s; this class is the bucket that paces by it, and the busy time it feeds it.
 */
export class RateGovernor implements RateLimiter {
  #rate: number;
  #tokens: number;
  #last: number;
  #pausedUntil = 0;
  #lastReportedRate: number;
  #timer: NodeJS.Timeout | undefined;
  /** What the key sustains, learnt from the accepted requests and the congestion events. */
  readonly #estimator: RateEstimator;
  /** Time with requests queued since the last event, ms (and since when they are queued now). */
  #busyMs = 0;
  #busySince: number | null = null;
  #pressure = 0;
  #pressureAt: number;
  readonly #waiters: Waiter[] = [];
  /** Requests granted and not yet answered. */
  #inFlight = 0;
  readonly #max: number;
  readonly #now: () => number;
  readonly #onChange: ((event: GovernorEvent) => void) | undefined;
  /** 429s seen. */
  rateLimited = 0;

  constructor(options: GovernorOptions = {}) {
    const minRate = options.minRate ?? 0.2;
    this.#max = options.maxRate ?? 1000;
    const initialRate = Math.min(this.#max, Math.max(minRate, options.initialRate ?? 8));
    this.#estimator = new RateEstimator({
      initialRate,
      minRate,
      maxRate: this.#max,
      holdShare: options.holdShare ?? 0.98,
      probeGain: options.probeGain ?? 0.002,
      quietSeconds: options.quietSeconds ?? 30,
      quietGain: options.quietGain ?? 0.01,
      assumedBurstSeconds: options.assumedBurstSeconds ?? 1,
      detectSharedKey: true,
    });
    this.#rate = initialRate;
    this.#now = options.now ?? monotonicMs;
    this.#onChange = options.onChange;
    this.#last = this.#now();
    this.#pressureAt = this.#last;
    this.#tokens = Math.min(this.#capacity(), 2);
    this.#lastReportedRate = this.#rate;
  }

  /** Current pacing rate in requests per second. */
  get rate(): number {
    return this.#rate;
  }

  /**
   * The rate the key sustains for this process, as learnt from 429s (requests per second), or null
   * before the first 429.
   */
  get estimate(): number | null {
    return this.#estimator.estimate;
  }

  /** True once the estimate was measured between two 429s (no assumption about the burst left). */
  get confirmed(): boolean {
    return this.#estimator.confirmed;
  }

  /**
   * How much the rate binds: the share of the last few seconds (time constant 5 s) during which
   * requests waited for a slot, 0 to 1. Near 1 every request spent is one another caller waited for.
   */
  get pressure(): number {
    this.#updatePressure(this.#now());
    return this.#pressure;
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
          this.#trackBusy(this.#now());
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
      this.#pump();
    });
  }

  /**
   * A 429 arrived: pause every request until `retryAfterMs` (or `fallbackMs`) has passed and learn
   * the key's rate from it. Several 429s from one burst count as one event.
   */
  onRateLimited(retryAfterMs: number | undefined, fallbackMs: number): void {
    this.rateLimited++;
    const now = this.#now();
    const pauseMs = retryAfterMs ?? fallbackMs;
    this.#pausedUntil = Math.max(this.#pausedUntil, now + pauseMs);
    // The pause is not idle credit: without this the refill at its end counts the whole pause and
    // releases a burst of `capacity` requests into a service that just said it has room for one.
    // One request probes when the pause ends; the rest follow at the new rate.
    this.#tokens = Math.min(this.#tokens, 1);
    this.#last = Math.max(this.#last, this.#pausedUntil);
    // Requests sent before the pause began may still come back 429: one event per pause.
    if (now - this.#estimator.lastEventAt > Math.max(1000, pauseMs)) {
      this.#learn(now);
      this.#lastReportedRate = this.#rate;
      this.#onChange?.(decreaseEvent(this.#rate, pauseMs, retryAfterMs, this.#estimator.estimate));
    }
    this.#schedule(this.#pausedUntil - now);
  }

  /** A request got through without a 429: count it, and probe upward while the rate is in use. */
  onSuccess(): void {
    this.#estimator.accepted(this.#now());
    // Only a rate we are actually using says anything about the service: while requests go out
    // below the rate (nobody waits, tokens to spare), leave it alone, or a quiet hour would grow it
    // into a burst the service never agreed to.
    if (this.#waiters.length === 0 && this.#tokens >= 1) return;
    if (this.#estimator.estimate === null) {
      // Slow start until the first 429: +1 req/s per request, the rate doubles per second of full use.
      this.#rate = Math.min(this.#max, this.#rate + 1);
    } else {
      this.#rate = this.#estimator.probeRate(this.#busyTotalMs(this.#now()) / 1000);
    }
    if (this.#rate >= this.#lastReportedRate * 1.25) {
      this.#lastReportedRate = this.#rate;
      this.#onChange?.({ type: 'increase', rate: this.#rate });
    }
  }

  /** A granted request got its answer (or failed): the next may go if it waited for that. */
  settled(): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    if (this.#waiters.length > 0 && this.#estimator.estimate === null) this.#pump();
  }

  /**
   * Before the first 429, while nothing is known of the key, one request at a time: when the bucket
   * runs dry, one request finds it so, not the two to four that the pacing alone had in flight (an
   * upload takes longer than the gap between two; request-budget bench: 1 to 3 429s at the start,
   * now 1). After SERIAL_START accepted requests without a 429 the key has room enough: requests
   * overlap again (a slow service is not held to one request per round trip for long).
   */
  #mayStart(): boolean {
    const estimator = this.#estimator;
    return estimator.estimate !== null || this.#inFlight === 0 || estimator.acceptedTotal >= SERIAL_START;
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

  /** Time with requests queued since the last event, ms, up to `now`. */
  #busyTotalMs(now: number): number {
    return this.#busyMs + (this.#busySince === null ? 0 : now - this.#busySince);
  }

  /** A congestion event at `now`: a new estimate, and the rate held just under it. */
  #learn(now: number): void {
    this.#trackBusy(now);
    this.#rate = this.#estimator.congestion(now, this.#busyTotalMs(now), this.#rate);
    this.#busyMs = 0;
    if (this.#busySince !== null) this.#busySince = now;
  }

  /** Keeps the busy time (requests queued) and the pressure current. */
  #trackBusy(now: number): void {
    this.#updatePressure(now);
    if (this.#waiters.length > 0) {
      this.#busySince ??= now;
    } else if (this.#busySince !== null) {
      this.#busyMs += now - this.#busySince;
      this.#busySince = null;
    }
  }

  #updatePressure(now: number): void {
    const decay = Math.exp(-Math.max(0, now - this.#pressureAt) / PRESSURE_TAU_MS);
    this.#pressure = this.#pressure * decay + (this.#busySince === null ? 0 : 1 - decay);
    this.#pressureAt = now;
  }

  #capacity(): number {
    // Before the first 429 nothing is known of the key's bucket: no burst (see #mayStart), only
    // what a late timer owes (CATCH_UP_S).
    if (this.#estimator.estimate === null) return Math.max(1, this.#rate * CATCH_UP_S);
    // Then about half a second of burst, at most 10: enough to keep a pipeline busy, small enough not to
    // overrun a service bucket we cannot see.
    return Math.max(1, Math.min(10, this.#rate / 2));
  }

  #refill(now: number): void {
    const elapsed = Math.max(0, now - this.#last) / 1000;
    this.#last = now;
    this.#tokens = Math.min(this.#capacity(), this.#tokens + elapsed * this.#rate);
  }

  #pump(): void {
    const now = this.#now();
    this.#trackBusy(now);
    if (this.#timer) return;
    if (now < this.#pausedUntil) {
      this.#schedule(this.#pausedUntil - now);
      return;
    }
    this.#refill(now);
    while (this.#waiters.length > 0 && this.#tokens >= 1 && this.#mayStart()) {
      this.#tokens -= 1;
      this.#inFlight++;
      const waiter = takeNext(this.#waiters)!;
      if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve();
    }
    this.#trackBusy(now);
    // Held back by a request in flight: its answer pumps again (settled), no timer needed.
    if (this.#waiters.length > 0 && this.#mayStart()) {
      this.#schedule(((1 - this.#tokens) / this.#rate) * 1000);
    }
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
