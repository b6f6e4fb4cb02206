import { monotonicMs, sleep } from '../util/time.js';

/** What a request is to the budget: a submission starts a job, a poll (or the styles list) serves one. */
export type Priority = 'poll' | 'submit';

/**
 * Takes the waiter that goes next when the budget is tight: a submission first, else the oldest.
 *
 * A submission waits for the budget only while it holds a free job slot, and each request it waits
 * behind delays the start of a job that takes seconds to process: a run bound by its request budget
 * ends at its last submission plus one job's processing time, so submissions go first. A poll can
 * wait without loss as long as the slots are not full; once they are, no submission waits and the
 * polls have the whole budget (each poll that finds its job ended frees the slot for the next
 * submission), so neither starves: the slots never wait on a poll the budget could have afforded
 * (docs/contract.md#rate-limits). Measured on the request-budget bench's scenario (60 jobs, 5 req/s),
 * a few runs each: 1.18–1.23× the ideal, against 1.21–1.36× with polls first.
 */
export function takeNext<W extends { priority: Priority }>(waiters: W[]): W | undefined {
  const i = waiters.findIndex((w) => w.priority === 'submit');
  return waiters.splice(Math.max(i, 0), 1)[0];
}

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

/** A change the governor made, for the run log. */
export type GovernorEvent =
  | {
      type: 'decrease';
      rate: number;
      pauseMs: number;
      retryAfter: boolean;
      /** The key's sustainable rate as learnt at this 429, requests per second (null: not yet known). */
      estimate: number | null;
    }
  | { type: 'increase'; rate: number };

/** The event of a 429 that lowered the rate (`retryAfterMs` undefined: the pause is our fallback). */
export function decreaseEvent(
  rate: number,
  pauseMs: number,
  retryAfterMs: number | undefined,
  estimate: number | null,
): GovernorEvent {
  return { type: 'decrease', rate, pauseMs, retryAfter: retryAfterMs !== undefined, estimate };
}

/**
 * What the {@link ServiceGate} needs of a rate limit: the one process's {@link RateGovernor}, or the
 * worker mode's rate shared by every worker through Redis (`src/worker/rate.ts`).
 */
export interface RateLimiter {
  /** The request rate allowed now, per second. */
  readonly rate: number;
  /** What the key sustains as learnt from 429s, per second; null before the first 429. */
  readonly estimate: number | null;
  /** How much the rate binds now, 0 to 1 (see {@link RateGovernor.pressure}). */
  readonly pressure: number;
  /** Milliseconds left in a 429 pause (0 when none). */
  readonly pauseRemainingMs: number;
  /** Waits out a 429 pause without taking a slot. */
  waitForPause(signal?: AbortSignal): Promise<void>;
  /** Waits for a slot to send one request; resolves with a ticket that {@link onRateLimited} takes back. */
  acquire(priority: Priority, signal?: AbortSignal): Promise<unknown>;
  /** The request of `ticket` was answered 429: pause every request, learn. */
  onRateLimited(retryAfterMs: number | undefined, fallbackMs: number, ticket?: unknown): void;
  /** A request got through without a 429. */
  onSuccess(): void;
  /** The request of a slot got its answer, or failed, whatever it was: it is no longer in flight. */
  settled?(): void;
  /** Stops timers and rejects the waiters (shutdown). */
  close(reason: unknown): void;
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
/** Accepted-request times kept for the window estimate. */
const HISTORY = 4096;
/** How fast {@link RateGovernor.pressure} follows the queue: its time constant, ms. */
const PRESSURE_TAU_MS = 5000;
/** The quiet spell is at least this many requests at the estimate long. */
const QUIET_REQUESTS = 30;
/** The first estimate is at least this share of the starting rate. */
const FIRST_FLOOR = 0.25;
/** A window estimate this much over the interval's says the bucket overflowed in between. */
const CAPPED = 1.1;
/** An interval between two 429s measures a rate only with this many accepted requests and this long. */
const MIN_SAMPLE_REQUESTS = 4;
const MIN_SAMPLE_MS = 2000;
/** A 429 that cuts a measured estimate below this share of what it was says the key is shared. */
const SHARED_CUT = 0.9;
/**
 * On a shared key (see {@link RateGovernor}): the rate grows by this share of the starting rate
 * per second of full use, and after the quiet spell by {@link SHARED_QUIET_STEP} of it × the
 * spell's excess², the same for every process with the same settings; a 429 cuts it to
 * {@link SHARED_DECREASE} of what it used.
 */
const SHARED_STEP = 0.005;
const SHARED_QUIET_STEP = 0.003;
const SHARED_DECREASE = 0.8;
/** The decrease on a 429 too soon after the last to measure anything. */
const SHORT_DECREASE = 0.8;
/** Lower an estimate by at most this factor on a 429 that came while our rate was not in use. */
const IDLE_DECREASE = 0.85;

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
 *   every process with the same settings ({@link SHARED_STEP} of the starting rate per second, and
 *   {@link SHARED_QUIET_STEP} of it × the spell's excess² after the quiet spell), so the shares
 *   close in on each other at each wave of 429s (test/api/governor-shared.test.ts).
 * - Until the first 429 the rate grows quickly while it is in use (slow start: it doubles each
 *   second of full use), requests go one at a time (for the first 32 accepted) and evenly spaced,
 *   so the first 429 comes alone.
 * - Every 429 pauses the whole client until its `Retry-After` (or the caller's fallback); one
 *   request probes when the pause ends and the rest follow at the new rate, so a burst of 429s is
 *   never answered with a burst. 429s of one burst are one event. A 429 too soon after the last to
 *   measure anything lowers the estimate by a fifth; one that comes while our queue was mostly empty
 *   (our demand, not the key, set what we sent) by 15 % at most.
 *
 * Submissions are served before polls ({@link takeNext}).
 */
export class RateGovernor implements RateLimiter {
  #rate: number;
  #tokens: number;
  #last: number;
  #pausedUntil = 0;
  /** Time of the last congestion event (a 429 outside the previous one's pause). */
  #lastEvent = Number.NEGATIVE_INFINITY;
  #lastReportedRate: number;
  #timer: NodeJS.Timeout | undefined;
  #estimate: number | null = null;
  #confirmed = false;
  /** Set once a 429 cut a measured (confirmed) estimate by a tenth or more (see #learn). */
  #shared = false;
  /** Requests accepted since the last event. */
  #epochAccepted = 0;
  /** Time with requests queued since the last event, ms (and since when they are queued now). */
  #busyMs = 0;
  #busySince: number | null = null;
  #pressure = 0;
  #pressureAt: number;
  /** Times of the latest accepted requests (a ring). */
  readonly #history = new Float64Array(HISTORY);
  #historyCount = 0;
  readonly #waiters: Waiter[] = [];
  /** Requests granted and not yet answered. */
  #inFlight = 0;
  readonly #min: number;
  readonly #max: number;
  readonly #probe: number;
  readonly #quietS: number;
  readonly #quietGain: number;
  readonly #hold: number;
  readonly #assumedBurstS: number;
  readonly #initial: number;
  readonly #now: () => number;
  readonly #onChange: ((event: GovernorEvent) => void) | undefined;
  /** 429s seen. */
  rateLimited = 0;

  constructor(options: GovernorOptions = {}) {
    this.#min = options.minRate ?? 0.2;
    this.#max = options.maxRate ?? 1000;
    this.#initial = Math.min(this.#max, Math.max(this.#min, options.initialRate ?? 8));
    this.#rate = this.#initial;
    this.#probe = options.probeGain ?? 0.002;
    this.#quietS = options.quietSeconds ?? 30;
    this.#quietGain = options.quietGain ?? 0.01;
    this.#hold = options.holdShare ?? 0.98;
    this.#assumedBurstS = options.assumedBurstSeconds ?? 1;
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
    return this.#estimate;
  }

  /** True once the estimate was measured between two 429s (no assumption about the burst left). */
  get confirmed(): boolean {
    return this.#confirmed;
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
    if (now - this.#lastEvent > Math.max(1000, pauseMs)) {
      this.#learn(now);
      this.#lastReportedRate = this.#rate;
      this.#onChange?.(decreaseEvent(this.#rate, pauseMs, retryAfterMs, this.#estimate));
    }
    this.#schedule(this.#pausedUntil - now);
  }

  /** A request got through without a 429: count it, and probe upward while the rate is in use. */
  onSuccess(): void {
    this.#epochAccepted++;
    this.#history[this.#historyCount % HISTORY] = this.#now();
    this.#historyCount++;
    // Only a rate we are actually using says anything about the service: while requests go out
    // below the rate (nobody waits, tokens to spare), leave it alone, or a quiet hour would grow it
    // into a burst the service never agreed to.
    if (this.#waiters.length === 0 && this.#tokens >= 1) return;
    if (this.#estimate === null) {
      // Slow start until the first 429: +1 req/s per request, the rate doubles per second of full use.
      this.#rate = Math.min(this.#max, this.#rate + 1);
    } else {
      this.#rate = this.#probeRate(this.#now());
    }
    if (this.#rate >= this.#lastReportedRate * 1.25) {
      this.#lastReportedRate = this.#rate;
      this.#onChange?.({ type: 'increase', rate: this.#rate });
    }
  }

  /** A granted request got its answer (or failed): the next may go if it waited for that. */
  settled(): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    if (this.#waiters.length > 0 && this.#estimate === null) this.#pump();
  }

  /**
   * Before the first 429, while nothing is known of the key, one request at a time: when the bucket
   * runs dry, one request finds it so, not the two to four that the pacing alone had in flight (an
   * upload takes longer than the gap between two; request-budget bench: 1 to 3 429s at the start,
   * now 1). After SERIAL_START accepted requests without a 429 the key has room enough: requests
   * overlap again (a slow service is not held to one request per round trip for long).
   */
  #mayStart(): boolean {
    return this.#estimate !== null || this.#inFlight === 0 || this.#historyCount >= SERIAL_START;
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

  /**
   * The rate `τ` seconds of full use after the last 429: held just under the estimate, probing above
   * it by `probeGain` of it per second, and faster after a quiet spell (τ over `quietSeconds`, the
   * excess growing with its square): capacity that others sharing the key gave up, or a first
   * estimate that was too low, is found within seconds of the spell, while a key that is at its
   * limit answers a 429 about once a minute.
   */
  #probeRate(now: number): number {
    const estimate = this.#estimate!;
    const tau = (this.#busyMs + (this.#busySince === null ? 0 : now - this.#busySince)) / 1000;
    // A slow key gets a longer quiet spell (30 requests at least), so its 429s stay rare per request.
    const quiet = Math.max(0, tau - Math.max(this.#quietS, QUIET_REQUESTS / estimate));
    if (this.#shared) {
      // Steps in requests per second, not shares of the estimate: see #learn.
      const step = SHARED_STEP * this.#initial * tau + SHARED_QUIET_STEP * this.#initial * quiet * quiet;
      return Math.min(this.#max, Math.max(this.#min, estimate * this.#hold + step));
    }
    const share = this.#hold + this.#probe * tau + this.#quietGain * quiet * quiet;
    return Math.min(this.#max, Math.max(this.#min, estimate * share));
  }

  /** A congestion event at `now`: a new estimate, and the rate held just under it. */
  #learn(now: number): void {
    this.#trackBusy(now);
    const busyMs = this.#busyMs + (this.#busySince === null ? 0 : now - this.#busySince);
    const elapsedMs = now - this.#lastEvent;
    const windowed = this.#windowEstimate(now);
    // Only a measured estimate can be cut by others: the first one rests on an assumed burst.
    const before = this.#confirmed ? this.#estimate : null;
    if (this.#estimate === null) {
      // A process that joins a key others already use is turned away before it has a history: it
      // starts from a quarter of the starting rate, not from the little it got through.
      this.#estimate = Math.max(windowed ?? 0, this.#initial * FIRST_FLOOR);
    } else if (this.#epochAccepted < MIN_SAMPLE_REQUESTS || elapsedMs < MIN_SAMPLE_MS) {
      // Too few requests between two 429s to measure a rate (the probe after a pause was turned
      // away again: someone else took the refill): back off without learning.
      this.#estimate *= SHORT_DECREASE;
    } else {
      // The bucket was empty at the last 429 and is again: what it accepted in between is what it
      // refilled, unless it was full (and overflowing) for a while: then a window that began with
      // it full says more.
      let sample = this.#epochAccepted / (elapsedMs / 1000);
      if (windowed !== null && windowed > sample * CAPPED) sample = windowed;
      if (busyMs < elapsedMs / 2) {
        // While our queue was mostly empty, what we sent measured our demand, not the key: someone
        // else used the key, or its limit fell. Go down, but not to our demand.
        this.#estimate = Math.min(this.#estimate, Math.max(sample, this.#estimate * IDLE_DECREASE));
      } else if (this.#shared) {
        // A share of a key others use too: additive increase, multiplicative decrease. Taking the
        // measured share as the estimate (as alone) keeps whatever split the processes started
        // with: every process gets a 429 in each wave, so the samples keep their ratios, and a
        // probe in proportion to the estimate widens them. Cut by a fifth and grown by the same
        // requests per second in every process, the shares close in on each other at each wave.
        this.#estimate = Math.min(sample, this.#rate) * SHARED_DECREASE;
      } else {
        this.#estimate = sample;
        this.#confirmed = true;
      }
    }
    this.#estimate = Math.min(this.#max, Math.max(this.#min, this.#estimate));
    // A measured share cut by a tenth or more: others use the key (or its limit fell).
    if (before !== null && this.#estimate < before * SHARED_CUT) this.#shared = true;
    this.#rate = Math.min(this.#max, Math.max(this.#min, this.#estimate * this.#hold));
    this.#lastEvent = now;
    this.#epochAccepted = 0;
    this.#busyMs = 0;
    if (this.#busySince !== null) this.#busySince = now;
  }

  /**
   * The rate from the windows of accepted requests that end now (since the last 429): each window
   * accepted the key's burst plus its rate × the window when the bucket was full at its start and we
   * kept it draining, so with the burst assumed (`assumedBurstSeconds` of rate) the best window gives
   * the rate. Before the second 429 the only figure; after it, a check on an interval that began
   * with a full bucket. Null when nothing was accepted.
   */
  #windowEstimate(now: number): number | null {
    const count = Math.min(this.#historyCount, HISTORY, this.#epochAccepted);
    let best: number | null = null;
    for (let k = 0; k < count; k++) {
      // The k-th latest accepted request: k + 1 requests from it to now, and about half a token
      // the bucket held when it turned the next one away (anywhere from 0 to 1).
      const at = this.#history[(this.#historyCount - 1 - k) % HISTORY]!;
      const rate = (k + 1.5) / ((now - at) / 1000 + this.#assumedBurstS);
      if (best === null || rate > best) best = rate;
    }
    return best;
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
    // Before the first 429 nothing is known of the key's bucket: no burst (see #mayStart).
    if (this.#estimate === null) return 1;
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
