/**
 * The local flow: three queues (prepare → jobs → downloads) fed lazily with back-pressure, the
 * soft and hard stop, the counters of the progress display, and the one place that routes each
 * stage's outcome to what comes next. The stages themselves (`plan`, `submit`, `poll`, `download`)
 * know nothing of queues, so another driver can run them as they are.
 */
import PQueue from 'p-queue';
import type { KitchenError } from '../errors.js';
import type { Preflighter } from '../preflight/index.js';
import type { ItemStore } from '../state/items.js';
import type { ItemState } from '../state/state.js';
import type { Item, ItemError } from '../types.js';
import type { StageContext } from './context.js';
import { downloadItem } from './download.js';
import type { RunEvent } from './events.js';
import type { Outcome } from './outcomes.js';
import { runError } from './outcomes.js';
import { type Decision, decide, type PreparedUpload, plannedIdentity } from './plan.js';
import { pollJob } from './poll.js';
import type { RunStop } from './stop.js';
import { submitItem } from './submit.js';

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

/** Where items stand in the flow, for the progress display. */
export interface FlowCounts {
  /** Waiting for preflight or a job slot. */
  pending: number;
  /** Submitted (or being submitted), not yet ended. */
  running: number;
  /** Ended at the service, result being fetched. */
  downloading: number;
  /** Finished by an earlier run. */
  skipped: number;
}

type Place = keyof FlowCounts;
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
  readonly #preflighter: Preflighter;
  readonly #options: FlowOptions;
  readonly #emit: (event: RunEvent) => void;
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

  constructor(
    ctx: StageContext<ItemStore>,
    stop: RunStop,
    preflighter: Preflighter,
    options: FlowOptions,
    emit: (event: RunEvent) => void,
  ) {
    this.#ctx = ctx;
    this.#stop = stop;
    this.#preflighter = preflighter;
    this.#options = options;
    this.#emit = emit;
    this.#jobs = new PQueue({ concurrency: options.concurrency });
    this.#downloads = new PQueue({ concurrency: Math.min(32, Math.max(4, options.concurrency)) });
  }

  /** The first error that stopped the run, if any. */
  get fatal(): KitchenError | undefined {
    return this.#fatal;
  }

  /** Why the run was interrupted (SIGINT/SIGTERM), if it was. */
  get interrupted(): string | undefined {
    return this.#interrupted;
  }

  /** Set once `--max-duration` passed: the error of every item the run did not finish. */
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
        this.#enqueue(this.#prep, () => this.#prepare(item));
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

  /** Decides what the item needs (preflight included) and sends it on. */
  async #prepare(item: Item): Promise<void> {
    if (this.#stop.soft.aborted) return;
    let decision: Decision;
    try {
      decision = await decide(item, {
        preflighter: this.#preflighter,
        state: this.#ctx.store.get(item.id),
        outDir: this.#ctx.output,
        retryFailed: this.#options.retryFailed,
        verify: this.#options.verify,
      });
    } catch (error) {
      if (this.#stop.soft.aborted) return;
      throw error;
    }
    const state = await this.#ctx.store.plan(plannedIdentity(item, decision));
    switch (decision.action) {
      case 'reject':
        this.#move('pending', null);
        try {
          await this.#reject(state, decision.error);
        } finally {
          this.#ctx.store.release(state);
        }
        return;
      case 'skip':
        this.#move('pending', 'skipped');
        this.#ctx.store.release(state);
        this.#item(item.id, 'skipped');
        return;
      case 'download':
        this.#move('pending', 'downloading');
        this.#enqueue(this.#downloads, () => this.#download(state));
        return;
      case 'poll':
        this.#enqueue(this.#jobs, () => this.#job(item, state, null));
        return;
      case 'submit':
        this.#enqueue(this.#jobs, () => this.#job(item, state, decision.upload));
        return;
    }
  }

  /** One job slot: submit (when needed) and poll to the end; the download goes on outside the slot. */
  async #job(item: Item, state: ItemState, upload: PreparedUpload | null): Promise<void> {
    const stopping = this.#stop.soft.aborted;
    this.#move('pending', stopping ? null : 'running');
    let downloading = false;
    try {
      if (stopping) return;
      let outcome: Outcome | undefined;
      try {
        if (upload) outcome = await this.#submit(item, state, upload);
        if (!outcome || outcome.kind === 'accepted') {
          outcome = await pollJob(this.#ctx, state, { jobTimeoutMs: this.#options.jobTimeoutMs });
        }
      } finally {
        this.#move('running', null);
      }
      if (outcome.kind === 'ended' && outcome.status === 'succeeded') {
        downloading = true;
        this.#move(null, 'downloading');
        this.#enqueue(this.#downloads, () => this.#download(state));
        return;
      }
      await this.#settle(state, outcome);
    } finally {
      if (!downloading) this.#ctx.store.release(state);
    }
  }

  /** The cost guard, then the submit stage; `submitted` announced once the job id is journaled. */
  async #submit(item: Item, state: ItemState, upload: PreparedUpload): Promise<Outcome> {
    if (this.#expired) return { kind: 'incomplete', error: this.#expired };
    const max = this.#options.maxSubmissions;
    if (max !== null && this.#submitted >= max) {
      const message = `not submitted: this run reached --max-submissions ${max}; a rerun continues`;
      return { kind: 'incomplete', error: { code: 'max_submissions', message } };
    }
    this.#submitted++;
    const outcome = await submitItem(this.#ctx, item, state, upload, {
      retryAmbiguous: this.#options.retryAmbiguous,
    });
    if (outcome.kind === 'accepted') this.#item(item.id, 'submitted', { jobId: outcome.jobId });
    return outcome;
  }

  async #download(state: ItemState): Promise<void> {
    try {
      await this.#settle(state, await downloadItem(this.#ctx, state));
    } finally {
      this.#move('downloading', null);
      this.#ctx.store.release(state);
    }
  }

  /** Where an outcome ends for this run: journaled conclusions, item events, a run stop. */
  async #settle(state: ItemState, outcome: Outcome): Promise<void> {
    const { id } = state;
    switch (outcome.kind) {
      case 'ended':
        if (outcome.status === 'failed') {
          this.#item(id, 'failed', {
            jobId: outcome.jobId,
            ...(outcome.error ? { error: outcome.error } : {}),
          });
        }
        return;
      case 'downloaded':
        this.#item(id, 'succeeded', { jobId: outcome.jobId });
        return;
      case 'refused':
        this.#item(id, 'failed', { error: outcome.error });
        return;
      case 'incomplete':
        await this.#ctx.store.record({ t: 'incomplete', id, fp: state.fp, error: outcome.error });
        this.#item(id, 'incomplete', { error: outcome.error });
        this.#ctx.logger.info(
          { event: 'incomplete', item: id, code: outcome.error.code },
          outcome.error.message,
        );
        if (outcome.fatal) this.fail(outcome.fatal);
        return;
      case 'fatal':
        this.fail(outcome.error);
        return;
      case 'stopped':
        // Stopped by the window (not a signal): say so in the item's state, for the report.
        if (this.#expired && !this.#interrupted && !this.#fatal) {
          await this.#ctx.store.record({ t: 'incomplete', id, fp: state.fp, error: this.#expired });
        }
        return;
      case 'accepted':
        return;
    }
  }

  /** Rejected before submission; journaled again only when the reason changed. */
  async #reject(state: ItemState, error: ItemError): Promise<void> {
    const same =
      state.phase === 'rejected' && state.error?.code === error.code && state.error.message === error.message;
    if (!same) await this.#ctx.store.record({ t: 'rejected', id: state.id, fp: state.fp, error });
    this.#item(state.id, 'rejected', { error });
  }

  #item(id: string, status: ItemStatusEvent, extra: { jobId?: string; error?: ItemError } = {}): void {
    this.#emit({ type: 'item', id, status, ...extra });
  }
}
