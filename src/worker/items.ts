/**
 * The worker's driver of the item's steps (`src/stages/sequence.ts`): one queued BullMQ job is one
 * item, run through all its steps while this worker holds the job's lock, with its state in Redis
 * (`store.ts`). What a settled item means for its BullMQ job (a result, a retry, handed back) is
 * decided here; the steps are the same as `run`'s.
 */
import { type Job, UnrecoverableError, WaitingError } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { KitchenError } from '../errors.js';
import { checkStyle } from '../manifest/index.js';
import type { Preflighter } from '../preflight/index.js';
import { Reviewer } from '../review/index.js';
import type { StageContext } from '../stages/context.js';
import { runError } from '../stages/outcomes.js';
import { type ItemDriver, runItemSteps, type Settled } from '../stages/sequence.js';
import type { OutputStore } from '../storage/types.js';
import type { Item, ItemError, ItemStatus } from '../types.js';
import type { QueuedItem, QueueKeys } from './queue.js';
import { JobStore, LockLostError, loadState } from './store.js';

/** What a worker tells its caller as it goes. */
export type WorkerEvent =
  | { type: 'start'; name: string; outDir: string; log: string }
  | { type: 'item'; id: string; status: ItemStatus | 'handed_back' | 'retry'; error?: ItemError }
  /** A job of the item was accepted (a paid 202): for the metrics, not printed. */
  | { type: 'submitted'; id: string; jobId: string }
  | { type: 'warning'; message: string };

/** What a queued job returns to BullMQ when its item ended (kept in Redis, small). */
export interface ItemResult {
  status: ItemStatus;
  job_id: string | null;
}

/** Items a worker finished and handed back, as its summary counts them. */
export interface ItemCounts {
  /** Items this worker finished, by status (an item retried later counts when it ends). */
  counts: Record<ItemStatus, number>;
  /** Items handed back to the queue (stop, or a fault that stopped the worker), each counted once. */
  handedBack: number;
}

/** What {@link ItemProcessor} works with. */
export interface ProcessorDeps {
  redis: Redis;
  /** The keys of the queue the worker works on (its items' states and locks). */
  keys: QueueKeys;
  /** What the review needs; null with `--no-review`. */
  review: { logger: Logger; outDir: OutputStore; threshold: number | undefined } | null;
  /** The stages' context but for the item's store, which is the held job's. */
  shared: Omit<StageContext, 'store'>;
  styles: ReadonlySet<string> | null;
  preflighter: Preflighter;
  outDir: string;
  logger: Logger;
  emit: (event: WorkerEvent) => void;
  /** Stops the worker: the first fatal error wins. */
  fail: (error: KitchenError) => void;
  summary: ItemCounts;
  jobTimeoutMs: number;
}

/** A worker stopped between the `submitting` mark and the 202: the job may exist. */
const SUBMIT_UNKNOWN: ItemError = {
  code: 'submit_unknown',
  message:
    'a worker stopped after sending the job, before its id came back; not resent, to avoid a duplicate charge. `enqueue` again sends it',
};

/** One queued item through the stages, and what its end means for its BullMQ job. */
export class ItemProcessor {
  readonly #deps: ProcessorDeps;
  readonly #handedBack = new Set<string>();
  /** The items in hand, by id: what the reviewer reads and writes through. */
  readonly #stores = new Map<string, JobStore>();
  readonly #reviewer: Reviewer | null;
  /** Items this worker holds now. */
  active = 0;

  constructor(deps: ProcessorDeps) {
    this.#deps = deps;
    const review = deps.review;
    this.#reviewer = review
      ? new Reviewer({
          outDir: review.outDir,
          states: { get: (id) => this.#stores.get(id)?.state },
          record: async (record) => {
            const store = this.#stores.get(record.id);
            if (!store) throw new Error(`item ${record.id} is no longer held by this worker`);
            await store.record(record);
          },
          logger: review.logger,
          ...(review.threshold !== undefined ? { threshold: review.threshold } : {}),
        })
      : null;
  }

  /** Stops the review's thread. */
  async close(): Promise<void> {
    await this.#reviewer?.close();
  }

  /** BullMQ's processor: the item's steps, and what they came to as the job's result. */
  async run(job: Job<QueuedItem, ItemResult>, token: string): Promise<ItemResult> {
    this.active++;
    try {
      return await this.#run(job, token);
    } finally {
      this.active--;
    }
  }

  async #run(job: Job<QueuedItem, ItemResult>, token: string): Promise<ItemResult> {
    const { redis, shared, keys } = this.#deps;
    const data = job.data;
    if (shared.stop.aborted) return this.#handBack(job, token);
    const item = checkStyle(itemOf(data), this.#deps.styles);
    const store = new JobStore(redis, job.id!, token, await loadState(redis, data.id, keys), keys);
    this.#stores.set(data.id, store);
    // An item another worker held and stopped answering for: when it came back (the takeover's time).
    if (job.stalledCounter > 0)
      this.#deps.logger.info(
        { event: 'taken_over', item: data.id, stalled: job.stalledCounter },
        'item taken over from a worker that stopped answering',
      );
    let settled: Settled;
    try {
      settled = await runItemSteps(item, this.#driver(job, store));
    } catch (error) {
      if (error instanceof LockLostError) throw error;
      if (shared.stop.aborted) return this.#handBack(job, token);
      settled = { status: 'fatal', error: runError(error, this.#deps.outDir) };
    } finally {
      this.#stores.delete(data.id);
    }
    return this.#settle(job, token, settled);
  }

  /** What the steps need of this worker for one held job. */
  #driver(job: Job<QueuedItem, ItemResult>, store: JobStore): ItemDriver {
    const { shared } = this.#deps;
    const data = job.data;
    return {
      ctx: { ...shared, store },
      preflighter: this.#deps.preflighter,
      jobTimeoutMs: this.#deps.jobTimeoutMs,
      retryAmbiguous: false,
      // Another worker may have polled this job a moment ago (it handed the item back).
      polledElsewhere: true,
      decideOptions: () => ({ retryFailed: data.retryFailed === true, verify: false, signal: shared.stop }),
      admit: async (_item, state) => {
        // Not resent (docs/contract.md#rules); `enqueue` again sends it, as a rerun of `run` would.
        if (state.phase === 'unknown' && !data.resend) return SUBMIT_UNKNOWN;
        // Sent again once: a later try of this job (a transient fault) goes on from its state.
        if (data.resend || data.retryFailed)
          await job.updateData({ ...data, resend: false, retryFailed: false });
        return null;
      },
      // submitItem has logged it; the metrics count it (paid submissions, jobs in flight).
      accepted: (id, jobId) => this.#deps.emit({ type: 'submitted', id, jobId }),
      // While the worker still holds the item, so the verdict is written under its lock.
      review: async (id) => this.#reviewer?.reviewNow(id),
    };
  }

  /** What the item's end means for its BullMQ job. */
  async #settle(job: Job<QueuedItem, ItemResult>, token: string, settled: Settled): Promise<ItemResult> {
    const { id } = job.data;
    switch (settled.status) {
      case 'succeeded':
        return this.#ended(id, 'succeeded', settled.jobId, null);
      case 'failed':
        return this.#ended(id, 'failed', settled.jobId, settled.error);
      case 'rejected':
        return this.#ended(id, 'rejected', null, settled.error);
      case 'skipped': {
        const { state } = settled;
        return this.#ended(
          id,
          state.phase === 'downloaded' ? 'succeeded' : 'failed',
          state.jobId,
          state.error,
        );
      }
      case 'stopped':
        return this.#handBack(job, token);
      case 'fatal':
        if (settled.error instanceof LockLostError) throw settled.error;
        this.#deps.fail(settled.error);
        return this.#handBack(job, token);
      case 'incomplete': {
        const { error } = settled;
        if (settled.fatal) {
          this.#deps.fail(settled.fatal);
          return this.#handBack(job, token);
        }
        const final = error.code === 'submit_unknown' || error.code === 'job_not_found';
        const last = final || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
        if (last) this.#deps.summary.counts.incomplete++;
        this.#deps.emit({ type: 'item', id, status: last ? 'incomplete' : 'retry', error });
        // BullMQ keeps the reason; a transient fault is retried later (backoff), the others wait for `enqueue`.
        const reason = `${error.code}: ${error.message}`;
        throw final ? new UnrecoverableError(reason) : new Error(reason);
      }
    }
  }

  #ended(id: string, status: ItemStatus, jobId: string | null, error: ItemError | null): ItemResult {
    this.#deps.summary.counts[status]++;
    this.#deps.emit({ type: 'item', id, status, ...(error ? { error } : {}) });
    return { status, job_id: jobId };
  }

  /** Gives the item back to the queue untouched (its state says where it stands): another worker goes on. */
  async #handBack(job: Job<QueuedItem, ItemResult>, token: string): Promise<never> {
    await job.moveToWait(token);
    // BullMQ may hand the same item to this worker again before it stops fetching: once is news.
    if (!this.#handedBack.has(job.data.id)) {
      this.#handedBack.add(job.data.id);
      this.#deps.summary.handedBack++;
      this.#deps.emit({ type: 'item', id: job.data.id, status: 'handed_back' });
    }
    throw new WaitingError();
  }
}

/** The manifest row a queued job carries, as the stages take it. */
function itemOf(data: QueuedItem): Item {
  return {
    id: data.id,
    image: data.image,
    imagePath: data.imagePath,
    module: data.module,
    ...(data.style !== null ? { style: data.style } : {}),
    ...(data.prompt !== null ? { prompt: data.prompt } : {}),
    ...(data.configuration !== null ? { configuration: data.configuration } : {}),
    source: { file: 'queue', line: data.line },
  };
}
