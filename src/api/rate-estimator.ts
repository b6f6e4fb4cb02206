/**
 * The key's rate as learnt from 429s, with no clock, timer or I/O of its own: times come in with
 * the events (requests accepted, congestion events), the learnt estimate and the rate to use come
 * out. The one process's `RateGovernor` (governor.ts) paces its bucket by it; the worker mode's
 * shared rate keeps a Lua copy of it in Redis (`src/worker/rate-lua.ts`), pinned to this one by
 * shared test vectors (test/worker/rate-vectors.test.ts). Why it learns as it does: see
 * `RateGovernor` and docs/contract.md#rate-limits.
 *
 * @module
 */

/** The estimator's settings, resolved (the defaults are `GovernorOptions`'s). */
export interface EstimatorSettings {
  /** Starting request rate, requests per second (the first estimate's floor is a share of it). */
  initialRate: number;
  /** Floor of the rate and of the estimate. */
  minRate: number;
  /** Ceiling of the rate and of the estimate. */
  maxRate: number;
  /** The held rate as a share of the estimate. */
  holdShare: number;
  /** Probing: share of the estimate per second of full use. */
  probeGain: number;
  /** Seconds of full use without a 429 after which the probing speeds up. */
  quietSeconds: number;
  /** How fast the probing speeds up after the quiet spell: share of the estimate per second². */
  quietGain: number;
  /** The burst a key is assumed to allow, in seconds of its rate (first estimate only). */
  assumedBurstSeconds: number;
  /**
   * Whether a 429 that cuts a measured estimate by a tenth switches to the shared-key mode
   * (additive increase, multiplicative decrease). The governor's estimator does; the Lua copy in
   * Redis has no such mode (every worker reads the one estimate it keeps).
   */
  detectSharedKey: boolean;
}

/** Accepted-request times kept for the window estimate. */
export const HISTORY = 4096;
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
 * On a shared key: the rate grows by this share of the starting rate per second of full use, and
 * after the quiet spell by {@link SHARED_QUIET_STEP} of it × the spell's excess², the same for every
 * process with the same settings; a 429 cuts it to {@link SHARED_DECREASE} of what it used.
 */
const SHARED_STEP = 0.005;
const SHARED_QUIET_STEP = 0.003;
const SHARED_DECREASE = 0.8;
/** The decrease on a 429 too soon after the last to measure anything. */
const SHORT_DECREASE = 0.8;
/** Lower an estimate by at most this factor on a 429 that came while our rate was not in use. */
const IDLE_DECREASE = 0.85;

/** `value` within the settings' floor and ceiling. */
export function clampRate(settings: EstimatorSettings, value: number): number {
  return Math.min(settings.maxRate, Math.max(settings.minRate, value));
}

/**
 * The rate from the windows of accepted requests that end at `now`: each window accepted the key's
 * burst plus its rate × the window when the bucket was full at its start and we kept it draining,
 * so with the burst assumed (`burstSeconds` of rate) the best window gives the rate. `latestFirst`
 * are the accepted requests' times since the last congestion event, the latest first. Null when
 * there are none.
 */
export function windowEstimate(
  latestFirst: Iterable<number>,
  now: number,
  burstSeconds: number,
): number | null {
  let best: number | null = null;
  let k = 0;
  for (const at of latestFirst) {
    // The k-th latest accepted request: k + 1 requests from it to now, and about half a token
    // the bucket held when it turned the next one away (anywhere from 0 to 1).
    const rate = (k + 1.5) / ((now - at) / 1000 + burstSeconds);
    if (best === null || rate > best) best = rate;
    k++;
  }
  return best;
}

/** What a congestion event measured, as {@link RateEstimator.congestion} hands it to {@link nextEstimate}. */
export interface CongestionSample {
  /** Milliseconds since the previous congestion event (anything before the first). */
  elapsedMs: number;
  /** Requests accepted since the previous event. */
  accepted: number;
  /** Milliseconds of that interval during which our requests waited for the rate. */
  busyMs: number;
  /** {@link windowEstimate} over the requests accepted since the previous event. */
  windowed: number | null;
  /** The rate the process used when the 429 came (the shared-key mode's decrease starts from it). */
  rateInUse: number;
}

/** What the estimator knows of the key. */
export interface EstimatorState {
  /** The key's sustainable rate for us, requests per second; null before the first 429. */
  estimate: number | null;
  /** True once the estimate was measured between two 429s (no assumption about the burst left). */
  confirmed: boolean;
  /** True once a 429 cut a measured estimate by a tenth: others use the key (or its limit fell). */
  shared: boolean;
}

/** The state after a congestion event (pure: the learning rule of `RateGovernor`). */
export function nextEstimate(
  settings: EstimatorSettings,
  state: EstimatorState,
  sample: CongestionSample,
): EstimatorState {
  const { elapsedMs, accepted, busyMs, windowed } = sample;
  let { estimate, confirmed, shared } = state;
  // Only a measured estimate can be cut by others: the first one rests on an assumed burst.
  const before = confirmed ? estimate : null;
  if (estimate === null) {
    // A process that joins a key others already use is turned away before it has a history: it
    // starts from a quarter of the starting rate, not from the little it got through.
    estimate = Math.max(windowed ?? 0, settings.initialRate * FIRST_FLOOR);
  } else if (accepted < MIN_SAMPLE_REQUESTS || elapsedMs < MIN_SAMPLE_MS) {
    // Too few requests between two 429s to measure a rate (the probe after a pause was turned
    // away again: someone else took the refill): back off without learning.
    estimate *= SHORT_DECREASE;
  } else {
    // The bucket was empty at the last 429 and is again: what it accepted in between is what it
    // refilled, unless it was full (and overflowing) for a while: then a window that began with
    // it full says more.
    let measured = accepted / (elapsedMs / 1000);
    if (windowed !== null && windowed > measured * CAPPED) measured = windowed;
    if (busyMs < elapsedMs / 2) {
      // While our queue was mostly empty, what we sent measured our demand, not the key: someone
      // else used the key, or its limit fell. Go down, but not to our demand.
      estimate = Math.min(estimate, Math.max(measured, estimate * IDLE_DECREASE));
    } else if (shared) {
      // A share of a key others use too: additive increase, multiplicative decrease. Taking the
      // measured share as the estimate (as alone) keeps whatever split the processes started
      // with: every process gets a 429 in each wave, so the samples keep their ratios, and a
      // probe in proportion to the estimate widens them. Cut by a fifth and grown by the same
      // requests per second in every process, the shares close in on each other at each wave.
      estimate = Math.min(measured, sample.rateInUse) * SHARED_DECREASE;
    } else {
      estimate = measured;
      confirmed = true;
    }
  }
  estimate = clampRate(settings, estimate);
  // A measured share cut by a tenth or more: others use the key (or its limit fell).
  if (settings.detectSharedKey && before !== null && estimate < before * SHARED_CUT) shared = true;
  return { estimate, confirmed, shared };
}

/**
 * The rate `busySeconds` of full use after the last 429: held just under the estimate, probing above
 * it by `probeGain` of it per second, and faster after a quiet spell (τ over `quietSeconds`, the
 * excess growing with its square): capacity that others sharing the key gave up, or a first
 * estimate that was too low, is found within seconds of the spell, while a key that is at its
 * limit answers a 429 about once a minute. On a shared key the steps are requests per second, the
 * same in every process (see {@link nextEstimate}).
 */
export function probeRate(
  settings: EstimatorSettings,
  state: EstimatorState & { estimate: number },
  busySeconds: number,
): number {
  const { estimate } = state;
  const tau = busySeconds;
  // A slow key gets a longer quiet spell (30 requests at least), so its 429s stay rare per request.
  const quiet = Math.max(0, tau - Math.max(settings.quietSeconds, QUIET_REQUESTS / estimate));
  if (state.shared) {
    const initial = settings.initialRate;
    const step = SHARED_STEP * initial * tau + SHARED_QUIET_STEP * initial * quiet * quiet;
    return clampRate(settings, estimate * settings.holdShare + step);
  }
  const share = settings.holdShare + settings.probeGain * tau + settings.quietGain * quiet * quiet;
  return clampRate(settings, estimate * share);
}

/**
 * The estimator with the history it learns from: feed it the times of accepted requests and of
 * congestion events (a 429 outside the previous one's pause) with the busy time between them; read
 * the estimate and the rate to use. Deterministic: the same events give the same figures.
 */
export class RateEstimator {
  readonly settings: EstimatorSettings;
  #state: EstimatorState = { estimate: null, confirmed: false, shared: false };
  /** Time of the last congestion event. */
  #lastEvent = Number.NEGATIVE_INFINITY;
  /** Requests accepted since the last event. */
  #epochAccepted = 0;
  /** Times of the latest accepted requests (a ring). */
  readonly #history: Float64Array;
  #historyCount = 0;

  /** `historySize`: accepted-request times kept for the window estimate. */
  constructor(settings: EstimatorSettings, historySize = HISTORY) {
    this.settings = settings;
    this.#history = new Float64Array(historySize);
  }

  /** The key's sustainable rate for us, requests per second; null before the first 429. */
  get estimate(): number | null {
    return this.#state.estimate;
  }

  /** True once the estimate was measured between two 429s. */
  get confirmed(): boolean {
    return this.#state.confirmed;
  }

  /** True once the shared-key mode is on (see {@link nextEstimate}). */
  get shared(): boolean {
    return this.#state.shared;
  }

  /** Time of the last congestion event (-Infinity before the first). */
  get lastEventAt(): number {
    return this.#lastEvent;
  }

  /** Requests accepted in all. */
  get acceptedTotal(): number {
    return this.#historyCount;
  }

  /** A request was accepted (answered without a 429) at `at`. */
  accepted(at: number): void {
    this.#history[this.#historyCount % this.#history.length] = at;
    this.#historyCount++;
    this.#epochAccepted++;
  }

  /**
   * A congestion event at `now`, after `busyMs` of the interval since the last one with requests
   * waiting for the rate, while the process used `rateInUse`: learns, and returns the rate to hold
   * (just under the new estimate).
   */
  congestion(now: number, busyMs: number, rateInUse: number): number {
    this.#state = nextEstimate(this.settings, this.#state, {
      elapsedMs: now - this.#lastEvent,
      accepted: this.#epochAccepted,
      busyMs,
      windowed: windowEstimate(this.#latestFirst(), now, this.settings.assumedBurstSeconds),
      rateInUse,
    });
    this.#lastEvent = now;
    this.#epochAccepted = 0;
    return this.heldRate();
  }

  /** The rate held just under the estimate (the rate right after a congestion event). */
  heldRate(): number {
    const { estimate } = this.#state;
    if (estimate === null) throw new Error('no estimate before the first congestion event');
    return clampRate(this.settings, estimate * this.settings.holdShare);
  }

  /** The rate after `busySeconds` of full use since the last event (see {@link probeRate}). */
  probeRate(busySeconds: number): number {
    const { estimate } = this.#state;
    if (estimate === null) throw new Error('no estimate before the first congestion event');
    return probeRate(this.settings, { ...this.#state, estimate }, busySeconds);
  }

  /** The accepted-request times since the last event that the history still holds, latest first. */
  *#latestFirst(): Generator<number> {
    const count = Math.min(this.#historyCount, this.#history.length, this.#epochAccepted);
    for (let k = 0; k < count; k++) {
      yield this.#history[(this.#historyCount - 1 - k) % this.#history.length]!;
    }
  }
}
