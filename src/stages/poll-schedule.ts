import { monotonicMs, sleep } from '../util/time.js';

/** The floor between two polls of one job (docs/contract.md#poll-floor). */
export const MIN_POLL_INTERVAL_MS = 2000;

/** How many recent processing times the first-poll estimate looks at. */
const SAMPLES = 200;
/** Samples needed before the estimate replaces the spec's recommended interval. */
const MIN_SAMPLES = 3;
/** Before any job has ended, no first poll waits longer than this for the scout (below). */
const SCOUT_CAP_MS = 30_000;
/** Rate pressure (0..1, see RateGovernor.pressure) above which a poll is worth more than slot time. */
const TIGHT_BUDGET = 0.5;
/**
 * What a first poll that misses its job's end costs, in floors: the floor of slot time until the
 * next poll, and a request, counted as half a floor. Without the request's worth, times spread
 * evenly over about the floor cost the same wherever the poll goes, and the noise of the samples
 * would place it anywhere, half the jobs then missed (measured: 2.1 → 2.4 requests a job).
 */
const MISS_COST = 1.5;

/** Options of {@link PollScheduler}. */
export interface PollSchedulerOptions {
  /** How much the request budget binds now, 0 to 1 (the rate governor's pressure). @default none */
  pressure?: () => number;
  /**
   * True once nothing is left to submit (every item left is in flight): the run ends with its last
   * job, and a first poll that misses its job's end puts the end of the run off by the 2 s floor.
   * @default never
   */
  draining?: () => boolean;
}

/**
 * When to poll each job. Holds the 2 s floor of docs/contract.md#poll-floor (never twice within `minIntervalMs` for one job,
 * errors and re-polls included) and places the first poll of a job from the times jobs took so far
 * in the run, so a job costs few polls without its end being noticed late.
 *
 * A job's time is measured from its creation to its end on the server's clock (`updated_at −
 * created_at`, queueing included) when the service gives both, else `processing_time_ms`, else our
 * own upper bound (submit → the poll that saw it end).
 */
export class PollScheduler {
  readonly #min: number;
  /** Monotonic time of each job's last poll (answered or failed). */
  readonly #lastPoll = new Map<string, number>();
  readonly #acceptedAt = new Map<string, { mono: number; serverCreated: number | null }>();
  readonly #samples: number[] = [];
  readonly #now: () => number;
  readonly #pressure: () => number;
  readonly #draining: () => boolean;
  /** The largest age (since its 202, ms) at which a poll found a job still running, this run. */
  #runningAge = 0;
  /** Jobs polled once so far (a poll that sees them ended is a first-poll hit). */
  readonly #firstOnly = new Set<string>();
  /** Jobs polled in this run, polls sent (answered or failed), and jobs whose first poll saw the end. */
  readonly stats = { jobs: 0, polls: 0, firstHits: 0 };

  constructor(
    minIntervalMs: number = MIN_POLL_INTERVAL_MS,
    now: () => number = monotonicMs,
    options: PollSchedulerOptions = {},
  ) {
    this.#min = minIntervalMs;
    this.#now = now;
    this.#pressure = options.pressure ?? (() => 0);
    this.#draining = options.draining ?? (() => false);
  }

  /** The job was just created (its `created_at` as the service said it): its clock starts. */
  accepted(id: string, createdAt: string | null = null): void {
    const created = createdAt ? Date.parse(createdAt) : Number.NaN;
    this.#acceptedAt.set(id, { mono: this.#now(), serverCreated: Number.isNaN(created) ? null : created });
  }

  /** A poll of the job was just answered (or failed). */
  polled(id: string): void {
    this.stats.polls++;
    if (this.#lastPoll.has(id)) {
      this.#firstOnly.delete(id);
    } else {
      this.stats.jobs++;
      this.#firstOnly.add(id);
    }
    this.#lastPoll.set(id, this.#now());
  }

  /** A poll found the job still queued or processing: no job ends sooner than that, as far as we know. */
  running(id: string): void {
    this.#firstOnly.delete(id);
    const accepted = this.#acceptedAt.get(id);
    if (accepted) this.#runningAge = Math.max(this.#runningAge, this.#now() - accepted.mono);
  }

  /** The job ended; how long it took feeds the estimate. */
  ended(id: string, job: { updatedAt: string | null; processingTimeMs: number | null }): void {
    const accepted = this.#acceptedAt.get(id);
    if (this.#firstOnly.delete(id)) this.stats.firstHits++;
    this.#lastPoll.delete(id);
    this.#acceptedAt.delete(id);
    const updated = job.updatedAt ? Date.parse(job.updatedAt) : Number.NaN;
    let sample: number | null = null;
    if (accepted?.serverCreated != null && !Number.isNaN(updated) && updated >= accepted.serverCreated) {
      sample = updated - accepted.serverCreated;
    } else if (
      job.processingTimeMs !== null &&
      Number.isFinite(job.processingTimeMs) &&
      job.processingTimeMs >= 0
    ) {
      sample = job.processingTimeMs;
    } else if (accepted) {
      sample = this.#now() - accepted.mono;
    }
    if (sample === null) return;
    this.#samples.push(sample);
    if (this.#samples.length > SAMPLES) this.#samples.shift();
  }

  /**
   * Delay from the job's creation to its first poll, asked again while the job waits (what the run
   * learns meanwhile moves it). A job created in an earlier run is polled at once.
   *
   * Before any job has ended, the oldest jobs scout: a job is first polled at the floor, unless a
   * job as old was seen still running, in which case it waits until it is older than that by the
   * floor (at most 30 s): the first wave then costs about one poll a job, not one every 2 s. With one
   * or two jobs ended, their times and the scouts' still count.
   *
   * Then, when the times jobs take spread over less than the floor (p10..p90), aim at the time
   * that costs a job the least on average ({@link cheapestFirstPoll}: a miss costs the floor and a
   * request, {@link MISS_COST}), and at p98 or later when the request budget binds (a missed poll costs a request
   * another job waits for, a late one only slot time) or the run drains (a missed poll of one of
   * the last jobs puts the run's end off by the floor): nearly every job is seen done by its first
   * poll, and no schedule allowed by the floor would see them sooner on average; a wider spread
   * aims at the median, so quick jobs are not kept waiting.
   * Never over a minute; at once when jobs have been ending at once (a wait there holds
   * a job slot for nothing, and the one poll a job needs is spent either way).
   */
  firstDelay(id: string): number {
    if (!this.#acceptedAt.has(id)) return 0;
    const n = this.#samples.length;
    if (n < MIN_SAMPLES) {
      const scouted = n === 0 ? this.#runningAge + this.#min : Math.max(this.#runningAge, ...this.#samples);
      return Math.max(this.#min, Math.min(SCOUT_CAP_MS, scouted));
    }
    const sorted = [...this.#samples].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(n - 1, Math.floor(q * n))]!;
    let target = at(0.5);
    if (at(0.9) - at(0.1) <= this.#min) {
      target = cheapestFirstPoll(sorted, this.#min * MISS_COST);
      if (this.#pressure() >= TIGHT_BUDGET || this.#draining()) target = Math.max(target, at(0.98));
    }
    return Math.min(60_000, Math.max(0, target));
  }

  /** Delay between later polls: the floor. */
  nextDelay(_id: string): number {
    return this.#min;
  }

  /**
   * Sleeps until `delay` after the job's last poll (or its creation, before the first poll), and
   * never less than the floor after its last poll. A `delay` function is asked again after each
   * sleep, so a first poll moves with what the run learnt while it waited.
   */
  async waitTurn(id: string, delay: number | (() => number), signal?: AbortSignal): Promise<void> {
    for (;;) {
      const last = this.#lastPoll.get(id);
      const base = last ?? this.#acceptedAt.get(id)?.mono ?? this.#now();
      const wanted = typeof delay === 'number' ? delay : delay();
      const at = Math.max(last === undefined ? 0 : last + this.#min, base + wanted);
      const now = this.#now();
      if (now >= at) return;
      await sleep(at - now, signal);
    }
  }
}

/**
 * The first-poll delay, among the job times seen (`sorted`, ascending), that costs a job the least
 * on average when a miss costs `missCost` more: t + (share of times over t) × missCost. For times
 * spread over less than the floor this is the slowest seen, unless a few are far slower than the
 * rest (one job in a hundred 1.5 s slower costs less as a miss than as everyone's wait). A tie goes
 * to the later time, which costs fewer polls.
 */
export function cheapestFirstPoll(sorted: readonly number[], missCost: number): number {
  const n = sorted.length;
  let best = 0;
  let bestCost = Number.POSITIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    if (i + 1 < n && sorted[i + 1] === sorted[i]) continue; // the last of equal times counts them all
    // In units of 1/n, so equal costs compare equal.
    const cost = sorted[i]! * n + (n - 1 - i) * missCost;
    if (cost <= bestCost) {
      bestCost = cost;
      best = sorted[i]!;
    }
  }
  return best;
}
