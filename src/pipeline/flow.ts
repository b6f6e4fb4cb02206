/**
 * The local driver of the item's steps (`src/stages/sequence.ts`): three queues (prepare → jobs →
 * downloads) fed lazily with back-pressure, the soft and hard stop, the `--max-submissions` and
 * `--max-duration` guards, the counters of the progress display, and what a settled item means for
 * the run (its event, a run stop). The steps themselves know nothing of queues: they say which lane
 * their next part needs, and the flow queues it there.
 */
import PQueue from 'p-queue';
import type { KitchenError } from '../errors.js';
import type { Preflighter } from '../preflight/index.js';
import type { StageContext } from '../stages/context.js';
import { runError } from '../stages/outcomes.js';
import { type ItemDriver, type ItemSteps, itemSteps, type Lane, type Settled } from '../stages/sequence.js';
import type { RunStop } from '../stages/stop.js';
import type { ItemStore } from '../state/items.js';
import type { Item, ItemError } from '../types.js';
import type { FlowCounts, RunEvent } from './events.js';

/** What the flow needs of the run's options. */
export interface FlowOptions {
  outDir: string;
  concurrency: number;
  maxSubmissions: number | null;
  jobTimeoutMs: number;
  /** No new submissions after this long (null: no window); see `LimitOptions.maxDurationMs`. */
  maxDurationMs: number | null;
  /** In-flight jobs' time after `maxDurationMs`. */
  maxDurationGraceMs: number;
  retryFailed: boolean;
  retryAmbiguous: boolean;
  verify: boolean;
}

/** What the flow is given besides its options. */
export interface FlowDeps {
  ctx: StageContext<ItemStore>;
  stop: RunStop;
  preflighter: Preflighter;
  emit: (event: RunEvent) => void;
  /** Queues the review of an item's result (off the critical path); absent with `--no-review`. */
  review?: (id: string) => void;
}

type Place = keyof FlowCounts;
/** Where an item's steps run: deciding, a job slot, a download. */
type FlowLane = 'prepare' | Lane;
type ItemStatusEvent = Extract<RunEvent, { type: 'item' }>['status'];

/** `6h`, `45m`, `1h30m`, `90s`: a duration as a person writes it. */
function describeDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${sec || s === 0 ? `${sec}s` : ''}`;
}

/** Runs items through the stages; one instance per run. */
export class Flow {
  readonly #ctx: StageContext<ItemStore>;
  readonly #stop: RunStop;
  readonly #options: FlowOptions;
  readonly #emit: (event: RunEvent) => void;
  readonly #driver: ItemDriver;
  // Deciding is mostly waiting (stat, reads, the preflight's own pool for sharp): enough in flight
  // that the job slots never wait for the next item.
  readonly #prep = new PQueue({ concurrency: 16 });
  readonly #jobs: PQueue;
  readonly #downloads: PQueue;
  readonly #counts: FlowCounts = { pending: 0, running: 0, downloading: 0, skipped: 0 };
  #fatal: KitchenError | undefined;
  #interrupted: string | undefined;
  #submitted = 0;
  /** Set when `maxDurationMs` passed: why what is left is incomplete. */
  #expired: ItemError | null = null;
  #windowTimers: NodeJS.Timeout[] = [];

  constructor(deps: FlowDeps, options: FlowOptions) {
    this.#ctx = deps.ctx;
    this.#stop = deps.stop;
    this.#options = options;
    this.#emit = deps.emit;
    this.#jobs = new PQueue({ concurrency: options.concurrency });
    this.#downloads = new PQueue({ concurrency: Math.min(32, Math.max(4, options.concurrency)) });
    const review = deps.review;
    this.#driver = {
      ctx: deps.ctx,
      preflighter: deps.preflighter,
      jobTimeoutMs: options.jobTimeoutMs,
      retryAmbiguous: options.retryAmbiguous,
      polledElsewhere: false,
      decideOptions: () => ({ retryFailed: options.retryFailed, verify: options.verify }),
      admit: async () => this.#admit(),
      accepted: (id, jobId) => this.#item(id, 'submitted', { jobId }),
      review: async (id) => review?.(id),
    };
  }

  /** The first error that stopped the run, if any. */
  get fatal(): KitchenError | undefined {
    return this.#fatal;
  }

  /** Why the run was interrupted (SIGINT/SIGTERM), if it was. */
  get interrupted(): string | undefined {
    return this.#interrupted;
  }

  /** Set once `--max-duration` passed (or submissions halted): the error of every item the run did not finish. */
  get expired(): ItemError | null {
    return this.#expired;
  }

  /** Submissions this run started (each item once, however often it was retried). */
  get submitted(): number {
    return this.#submitted;
  }

  get counts(): Readonly<FlowCounts> {
    return this.#counts;
  }

  /**
   * Runs every item to where this run can take it, reading them as the queues make room (so memory
   * holds a window of items, not the catalogue); resolves when all three queues are idle.
   * @param total how many items `items` will give (for the progress counts)
   */
  async run(items: AsyncIterable<Item>, total: number): Promise<void> {
    this.#counts.pending = total;
    this.#armWindow();
    try {
      const window = Math.max(4, this.#options.concurrency * 2);
      for await (const item of items) {
        if (this.#stop.soft.aborted || this.#expired) break;
        // Back-pressure: no queue holds more than a small window, so memory stays flat.
        await this.#prep.onSizeLessThan(this.#prep.concurrency * 2);
        await this.#jobs.onSizeLessThan(window);
        await this.#downloads.onSizeLessThan(window);
        if (this.#stop.soft.aborted || this.#expired) break;
        this.#enqueue(this.#prep, async () => {
          if (this.#stop.soft.aborted) return;
          await this.#advance(itemSteps(item, this.#driver), item.id, 'prepare');
        });
      }
      // Queues feed each other: wait until all three are idle at once.
      const queues = [this.#prep, this.#jobs, this.#downloads];
      while (queues.some((q) => q.size + q.pending > 0)) await Promise.all(queues.map((q) => q.onIdle()));
    } catch (error) {
      this.fail(error);
    } finally {
      for (const timer of this.#windowTimers) clearTimeout(timer);
    }
  }

  /**
   * `--max-duration`: at the deadline no new submission starts (the items not reached are left as
   * they are); jobs in flight get the grace period to end and be downloaded, then the run stops as
   * at a signal, but with exit 1: what is left is `incomplete/max_duration`, and a rerun continues.
   */
  #armWindow(): void {
    const { maxDurationMs, maxDurationGraceMs } = this.#options;
    if (maxDurationMs === null) return;
    const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
    const window = describeDuration(maxDurationMs);
    const deadline = setTimeout(() => {
      this.#expired = {
        code: 'max_duration',
        message: `not finished: the run reached --max-duration ${window}; a rerun continues`,
      };
      const message = `reached --max-duration ${window}: no new submissions; jobs in flight have ${seconds(maxDurationGraceMs)} to finish`;
      this.#ctx.logger.warn({ event: 'max_duration', grace_ms: maxDurationGraceMs }, message);
      this.#emit({ type: 'warning', message });
      for (const queue of [this.#prep, this.#jobs]) queue.clear();
      const grace = setTimeout(() => {
        this.#ctx.logger.warn({ event: 'max_duration_grace_over' }, 'grace period over: stopping');
        this.#beginStop();
      }, maxDurationGraceMs);
      grace.unref();
      this.#windowTimers.push(grace);
    }, maxDurationMs);
    deadline.unref();
    this.#windowTimers.push(deadline);
  }

  /**
   * No new submissions from now on, jobs in flight left to end (an output store that cannot be
   * written: whatever a new job paid for could not be stored). What is left is incomplete with
   * `error`'s code, as after `--max-duration`, and the run ends with exit 1; a rerun continues.
   */
  #halt(error: ItemError): void {
    if (this.#expired) return;
    this.#expired = { code: error.code, message: `not submitted: ${error.message}` };
    const message = `no new submissions: ${error.message}`;
    this.#ctx.logger.warn({ event: 'submissions_halted', code: error.code }, message);
    this.#emit({ type: 'warning', message });
    for (const queue of [this.#prep, this.#jobs]) queue.clear();
  }

  /** Stops the run for good: the first fatal error wins; in-flight work gets the grace period. */
  fail(error: unknown): void {
    if (!this.#fatal) {
      this.#fatal = runError(error, this.#options.outDir);
      this.#ctx.logger.error({ event: 'fatal', code: this.#fatal.code }, this.#fatal.message);
    }
    this.#beginStop();
  }

  /** A stop asked for by the caller (SIGINT/SIGTERM): no new submissions; state is saved. */
  interrupt(reason: string): void {
    this.#interrupted ??= reason;
    this.#ctx.logger.warn(
      { event: 'interrupted', reason },
      'stopping: no new submissions; in-flight requests may finish',
    );
    this.#beginStop();
  }

  #beginStop(): void {
    if (!this.#stop.begin()) return;
    for (const queue of [this.#prep, this.#jobs, this.#downloads]) queue.clear();
  }

  #enqueue(queue: PQueue, task: () => Promise<void>): void {
    let started = false;
    const run = () => {
      started = true;
      return task();
    };
    // A task that never started was dropped by `clear()` (a stop, the --max-duration deadline),
    // which rejects its promise with an AbortError: nothing failed, the item stays as it was.
    void queue.add(run).catch((error: unknown) => {
      if (started) this.fail(error);
    });
  }

  /** Moves one item between counters (null: entering or leaving the flow). */
  #move(from: Place | null, to: Place | null): void {
    if (from) this.#counts[from]--;
    if (to) this.#counts[to]++;
  }

  /** Runs the item's steps in `lane` until they need another lane (queued there) or end. */
  async #advance(steps: ItemSteps, id: string, lane: FlowLane): Promise<void> {
    let handedOn = false;
    try {
      if (lane === 'job') {
        // A job slot is taken when the job starts, not when the item is decided.
        const stopping = this.#stop.soft.aborted;
        this.#move('pending', stopping ? null : 'running');
        if (stopping) return;
      }
      let next: IteratorResult<Lane, Settled>;
      try {
        next = await steps.next();
      } catch (error) {
        // A decision cut short by the stop leaves the item as it was.
        if (lane === 'prepare' && this.#stop.soft.aborted) return;
        throw error;
      } finally {
        if (lane === 'job') this.#move('running', null);
      }
      if (!next.done) {
        handedOn = true;
        const to = next.value;
        if (to === 'download') this.#move(lane === 'prepare' ? 'pending' : null, 'downloading');
        this.#enqueue(to === 'job' ? this.#jobs : this.#downloads, () => this.#advance(steps, id, to));
        return;
      }
      if (lane === 'prepare') this.#move('pending', next.value.status === 'skipped' ? 'skipped' : null);
      await this.#settle(id, next.value);
    } finally {
      if (lane === 'download') this.#move('downloading', null);
      if (!handedOn) this.#release(id);
    }
  }

  /** The flow is done with the item for this run. */
  #release(id: string): void {
    const state = this.#ctx.store.get(id);
    if (state) this.#ctx.store.release(state);
  }

  /** The cost guard and the time window, before a submission; each item counted once. */
  #admit(): ItemError | null {
    if (this.#expired) return this.#expired;
    const max = this.#options.maxSubmissions;
    if (max !== null && this.#submitted >= max) {
      const message = `not submitted: this run reached --max-submissions ${max}; a rerun continues`;
      return { code: 'max_submissions', message };
    }
    this.#submitted++;
    return null;
  }

  /** Where a settled item ends for this run: item events, a run stop. */
  async #settle(id: string, settled: Settled): Promise<void> {
    switch (settled.status) {
      case 'succeeded':
        this.#item(id, 'succeeded', { jobId: settled.jobId });
        return;
      case 'failed':
        this.#item(id, 'failed', {
          ...(settled.jobId !== null ? { jobId: settled.jobId } : {}),
          ...(settled.error ? { error: settled.error } : {}),
        });
        return;
      case 'rejected':
        this.#item(id, 'rejected', { error: settled.error });
        return;
      case 'skipped':
        this.#item(id, 'skipped');
        return;
      case 'incomplete':
        this.#item(id, 'incomplete', { error: settled.error });
        if (settled.fatal) this.fail(settled.fatal);
        if (settled.halt) this.#halt(settled.error);
        return;
      case 'fatal':
        this.fail(settled.error);
        return;
      case 'stopped': {
        // Stopped by the window (not a signal): say so in the item's state, for the report.
        const state = this.#ctx.store.get(id);
        if (state && this.#expired && !this.#interrupted && !this.#fatal) {
          await this.#ctx.store.record({ t: 'incomplete', id, fp: state.fp, error: this.#expired });
        }
        return;
      }
    }
  }

  #item(id: string, status: ItemStatusEvent, extra: { jobId?: string; error?: ItemError } = {}): void {
    this.#emit({ type: 'item', id, status, ...extra });
  }
}
