import { monotonicMs, sleep } from '../util/time.js';

/** The floor between two polls of one job (docs/contract.md#poll-floor). */
export const MIN_POLL_INTERVAL_MS = 2000;

/** How many recent processing times the first-poll estimate looks at. */
const SAMPLES = 200;
/** Samples needed before the estimate replaces the spec's recommended interval. */
const MIN_SAMPLES = 3;

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

  constructor(minIntervalMs: number = MIN_POLL_INTERVAL_MS, now: () => number = monotonicMs) {
    this.#min = minIntervalMs;
    this.#now = now;
  }

  /** The job was just created (its `created_at` as the service said it): its clock starts. */
  accepted(id: string, createdAt: string | null = null): void {
    const created = createdAt ? Date.parse(createdAt) : Number.NaN;
    this.#acceptedAt.set(id, { mono: this.#now(), serverCreated: Number.isNaN(created) ? null : created });
  }

  /** A poll of the job was just answered (or failed). */
  polled(id: string): void {
    this.#lastPoll.set(id, this.#now());
  }

  /** The job ended; how long it took feeds the estimate. */
  ended(id: string, job: { updatedAt: string | null; processingTimeMs: number | null }): void {
    const accepted = this.#acceptedAt.get(id);
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
   * Delay from the job's creation to its first poll. Until a few jobs have ended, the spec's
   * recommended 2 s. Then, when the times jobs take spread over less than the floor (p10..p90), aim
   * at p90: nearly every job is seen done by its first poll, and no schedule allowed by the floor
   * would see them sooner on average; a wider spread aims at the median, so quick jobs are not kept
   * waiting. Never over a minute; at once when jobs have been ending at once (a wait there holds a
   * job slot for nothing, and the one poll a job needs is spent either way). The floor binds polls,
   * not the submission, so quick jobs are collected quickly. A job created in an earlier run is
   * polled at once.
   */
  firstDelay(id: string): number {
    if (!this.#acceptedAt.has(id)) return 0;
    if (this.#samples.length < MIN_SAMPLES) return this.#min;
    const sorted = [...this.#samples].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
    const target = at(0.9) - at(0.1) <= this.#min ? at(0.9) : at(0.5);
    return Math.min(60_000, Math.max(0, target));
  }

  /** Delay between later polls: the floor. */
  nextDelay(_id: string): number {
    return this.#min;
  }

  /**
   * Sleeps until `delay` after the job's last poll (or its creation, before the first poll), and
   * never less than the floor after its last poll.
   */
  async waitTurn(id: string, delay: number, signal?: AbortSignal): Promise<void> {
    const last = this.#lastPoll.get(id);
    const base = last ?? this.#acceptedAt.get(id)?.mono ?? this.#now();
    const at = Math.max(last === undefined ? 0 : last + this.#min, base + delay);
    // Loop: a sleep is never shorter than asked, but be exact about the floor anyway.
    while (this.#now() < at) await sleep(at - this.#now(), signal);
  }
}
