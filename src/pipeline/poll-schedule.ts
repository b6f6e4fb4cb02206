import { monotonicMs, sleep } from '../util/time.js';

/** How many recent processing times the first-poll estimate looks at. */
const SAMPLES = 200;
/** Samples needed before the estimate replaces the spec's recommended interval. */
const MIN_SAMPLES = 3;

/**
 * When to poll each job. Holds the contract's floor (never twice within `minIntervalMs` for one job,
 * errors and re-polls included) and places the first poll of a job at the median processing time
 * seen so far in the run, so a job costs few polls without its end being noticed late.
 */
export class PollScheduler {
  readonly #min: number;
  readonly #last = new Map<string, number>();
  readonly #samples: number[] = [];
  readonly #now: () => number;

  constructor(minIntervalMs: number, now: () => number = monotonicMs) {
    this.#min = minIntervalMs;
    this.#now = now;
  }

  /** The job was just created: that contact starts its clock. */
  accepted(id: string): void {
    this.#last.set(id, this.#now());
  }

  /** A poll of the job was just answered (or failed). */
  polled(id: string): void {
    this.#last.set(id, this.#now());
  }

  /** The job ended; its processing time (when the service said it) feeds the estimate. */
  ended(id: string, processingTimeMs: number | null): void {
    this.#last.delete(id);
    if (processingTimeMs === null || !Number.isFinite(processingTimeMs) || processingTimeMs < 0) return;
    this.#samples.push(processingTimeMs);
    if (this.#samples.length > SAMPLES) this.#samples.shift();
  }

  /**
   * Delay from the job's last contact to its first poll: the running median of processing times,
   * at least the floor, at most a minute (a long estimate must not hide a quick job for long).
   * A job with no contact in this run (resumed from the journal) is polled at once.
   */
  firstDelay(id: string): number {
    if (!this.#last.has(id)) return 0;
    if (this.#samples.length < MIN_SAMPLES) return this.#min;
    const sorted = [...this.#samples].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    return Math.min(60_000, Math.max(this.#min, median));
  }

  /** Delay between later polls: the floor. */
  nextDelay(_id: string): number {
    return this.#min;
  }

  /** Sleeps until `delay` after the job's last contact, and never less than the floor after it. */
  async waitTurn(id: string, delay: number, signal?: AbortSignal): Promise<void> {
    const last = this.#last.get(id);
    const floor = last === undefined ? 0 : last + this.#min;
    const wanted = last === undefined ? this.#now() + delay : last + delay;
    const at = Math.max(floor, wanted);
    // Loop: a sleep is never shorter than asked, but be exact about the floor anyway.
    while (this.#now() < at) await sleep(at - this.#now(), signal);
  }
}
