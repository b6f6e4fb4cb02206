/**
 * The worker (docs/contract.md#worker-mode): pulls items that `enqueue` queued in Redis and runs
 * them through the same stages as `run` (preflight, submit, poll, download), with the item's state
 * in Redis instead of a journal (`store.ts`) and one rate shared by every worker (`rate.ts`). Any
 * number of workers on any number of machines; results go whole into the shared output folder.
 */
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { type Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { KitchenClient } from '../api/client.js';
import { ServiceGate } from '../api/gate.js';
import type { GovernorOptions } from '../api/governor.js';
import { InterruptedError, type KitchenError } from '../errors.js';
import { CONCURRENCY, JOB_TIMEOUT_MS, UNREACHABLE_MS } from '../limits.js';
import { checkStyle } from '../manifest/index.js';
import type { StageContext } from '../pipeline/context.js';
import { downloadItem } from '../pipeline/download.js';
import { fetchStyleKeys } from '../pipeline/fetch-styles.js';
import { type Outcome, runError } from '../pipeline/outcomes.js';
import { decide, plannedIdentity } from '../pipeline/plan.js';
import { pollJob } from '../pipeline/poll.js';
import { MIN_POLL_INTERVAL_MS, PollScheduler } from '../pipeline/poll-schedule.js';
import { RunStop } from '../pipeline/stop.js';
import { submitItem, UploadReader } from '../pipeline/submit.js';
import { createPreflighter } from '../preflight/index.js';
import { Reviewer } from '../review/index.js';
import { preparedDir, workerLogFile } from '../state/run-files.js';
import { removeLeftoverParts } from '../state/run-folder.js';
import { LocalOutputStore } from '../storage/local-output.js';
import type { OutputStore } from '../storage/types.js';
import type { Item, ItemError, ItemStatus } from '../types.js';
import { createRunLogger } from '../util/logger.js';
import { sleep } from '../util/time.js';
import { wholeNumber } from '../util/validate.js';
import { openQueue, QUEUE_NAME, type QueuedItem, readRunMeta, SERVICE_KEY } from './queue.js';
import { SharedRate } from './rate.js';
import { openRedis, redactUrl } from './redis.js';
import { JobStore, LockLostError, loadState } from './store.js';

/** Options of {@link runWorker}. */
export interface WorkerOptions {
  redisUrl: string;
  service: { baseUrl: string; apiKey: string; governor?: GovernorOptions; unreachableMs?: number };
  /** Items this worker holds at once (each one job slot at the service). @default 8 */
  concurrency?: number;
  /** Exit once nothing is left in the queue (waiting, delayed or held by any worker). @default false */
  untilDrained?: boolean;
  /**
   * How long an item stays with a worker that stopped answering (killed, frozen, cut off) before
   * another worker takes it over: the BullMQ lock duration. @default 30_000
   */
  stallTimeoutMs?: number;
  /** After a stop (SIGTERM), how long requests in flight get to finish before they are aborted. @default 10_000 */
  graceMs?: number;
  /** A job not ended this long after this worker started polling it is handed to BullMQ's retry. @default 1_800_000 */
  jobTimeoutMs?: number;
  /** Upload preparation, as for `run`. */
  preflight?: { keepMetadata?: boolean; maxSide?: number };
  /**
   * The review of each result against its source, as for `run` (docs/contract.md#review), done
   * while the worker holds the item. Duplicates are found among this worker's results only.
   * @default { enabled: true, threshold: 0.5 }
   */
  review?: { enabled?: boolean; threshold?: number };
  /** pino level of the worker's log. @default 'info' */
  logLevel?: string;
  /** The worker's name in `status` and its log file's name. @default `<hostname>-<pid>` */
  name?: string;
  signals?: { stop?: AbortSignal; abort?: AbortSignal };
  /** Called for each item this worker finishes or hands back, and with warnings. */
  onEvent?: (event: WorkerEvent) => void;
}

/** What a worker tells its caller as it goes. */
export type WorkerEvent =
  | { type: 'start'; name: string; outDir: string; log: string }
  | { type: 'item'; id: string; status: ItemStatus | 'handed_back' | 'retry'; error?: ItemError }
  | { type: 'warning'; message: string };

/** What {@link runWorker} returns. */
export interface WorkerSummary {
  name: string;
  outDir: string | null;
  /** Items this worker finished, by status (an item retried later counts when it ends). */
  counts: Record<ItemStatus, number>;
  /** Items handed back to the queue (stop, or a fault that stopped the worker), each counted once. */
  handedBack: number;
  /** The run's state when this worker left: the queue was drained (nothing waiting, delayed or active). */
  drained: boolean;
  /** Why the worker stopped before the queue was drained (SIGTERM/SIGINT), if it did. */
  interrupted: string | null;
}

/** What a queued job returns to BullMQ when its item ended (kept in Redis, small). */
export interface ItemResult {
  status: ItemStatus;
  job_id: string | null;
}

/**
 * Runs a worker until it is stopped (or, with `untilDrained`, until the queue is empty). Resolves
 * with what it did (`interrupted` says a stop signal ended it, after its items were handed back);
 * throws the error that stopped it (refused key, unreachable service: exit 3; a disk fault: exit 2)
 * after handing its items back.
 */
export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const name = (options.name ?? `${hostname()}-${process.pid}`).replace(/[^A-Za-z0-9._-]/g, '_');
  const concurrency = wholeNumber('concurrency', options.concurrency, CONCURRENCY, CONCURRENCY.default);
  // Commands wait for a Redis that restarts instead of failing: a state write that cannot be made
  // holds its POST back until it can.
  const redis = await openRedis(options.redisUrl, { blocking: true });
  const summary: WorkerSummary = {
    name,
    outDir: null,
    counts: { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 },
    handedBack: 0,
    drained: false,
    interrupted: null,
  };
  const stop = new RunStop(options.graceMs ?? 10_000);
  let fatal: KitchenError | undefined;
  let interrupted: string | undefined;
  stop.follow(options.signals ?? {}, (reason) => {
    interrupted ??= reason;
    stop.begin();
  });
  try {
    const meta = await waitForRun(redis, options, stop.soft);
    if (!meta) return { ...summary, drained: true };
    const outDir = meta.out;
    summary.outDir = outDir;
    // For the report's header (the URL only: the key never goes to Redis).
    await redis.set(SERVICE_KEY, options.service.baseUrl);
    const output = new LocalOutputStore(outDir);
    const resultsDir = output.describe('results');
    await mkdir(resultsDir, { recursive: true });
    const logFile = workerLogFile(outDir, name);
    const logger = createRunLogger({
      file: logFile,
      level: options.logLevel ?? 'info',
      secrets: [options.service.apiKey],
    });
    const emit = (event: WorkerEvent) => options.onEvent?.(event);
    emit({ type: 'start', name, outDir, log: logFile });
    const stallTimeoutMs = options.stallTimeoutMs ?? 30_000;
    await removeLeftoverParts(output, logger, Math.max(10 * 60_000, 4 * stallTimeoutMs));
    logger.info(
      { event: 'worker_start', name, redis: redactUrl(options.redisUrl), concurrency, out: outDir },
      'worker started',
    );

    const rate = new SharedRate(redis, {
      ...options.service.governor,
      logger,
      onChange: (event) =>
        logger.info(
          { ...event, event: `rate_${event.type}` },
          `shared request rate now ${event.rate.toFixed(2)}/s`,
        ),
    });
    const client = new KitchenClient({ baseUrl: options.service.baseUrl, apiKey: options.service.apiKey });
    const gate = new ServiceGate(rate, logger, {
      unreachableMs: options.service.unreachableMs ?? UNREACHABLE_MS,
    });
    const preflighter = createPreflighter({ cacheDir: preparedDir(outDir), ...options.preflight });
    const shared: Omit<StageContext, 'store'> = {
      client,
      gate,
      polls: new PollScheduler(MIN_POLL_INTERVAL_MS, undefined, { pressure: () => rate.pressure }),
      logger,
      stop: stop.soft,
      abort: stop.hard,
      resultsDir,
      output,
      uploads: new UploadReader(),
    };
    const fail = (error: KitchenError) => {
      if (!fatal) {
        fatal = error;
        logger.error({ event: 'fatal', code: error.code }, error.message);
      }
      stop.begin();
    };
    let blocking: Redis | undefined;
    try {
      const styles = await fetchStyleKeys({ ...shared, store: { record: async () => {} } }, (message) => {
        logger.warn({ event: 'warning' }, message);
        emit({ type: 'warning', message });
      });
      const processItem = new ItemProcessor({
        redis,
        review:
          options.review?.enabled === false
            ? null
            : { logger, outDir: output, threshold: options.review?.threshold },
        shared,
        styles,
        preflighter,
        outDir,
        logger,
        emit,
        fail,
        summary,
        jobTimeoutMs: options.jobTimeoutMs ?? JOB_TIMEOUT_MS,
      });
      blocking = await openRedis(options.redisUrl, { blocking: true });
      const worker = new Worker<QueuedItem, ItemResult>(
        QUEUE_NAME,
        (job, token) => processItem.run(job, token!),
        {
          connection: blocking,
          concurrency,
          name,
          lockDuration: stallTimeoutMs,
          stalledInterval: Math.min(30_000, stallTimeoutMs),
          // A worker killed mid-item leaves it "stalled": another takes it over, a few times at most.
          maxStalledCount: 3,
          autorun: false,
        },
      );
      worker.on('error', (error) =>
        logger.warn({ event: 'queue_error', err: error.message }, 'BullMQ error'),
      );
      const running = worker.run();
      stop.soft.addEventListener('abort', () => void worker.close(), { once: true });
      if (options.untilDrained) {
        summary.drained = await untilDrained(redis, processItem, stop.soft);
        // Nothing is held by any worker: a partial download still there is a killed worker's.
        if (summary.drained) await removeLeftoverParts(output, logger);
        stop.begin();
      }
      await running;
      await worker.close();
      await processItem.close();
    } finally {
      rate.close(new InterruptedError('shutdown'));
      client.close();
      await preflighter.close();
      blocking?.disconnect();
      logger.info({ event: 'worker_end', ...summary }, 'worker stopped');
      logger.flush?.();
    }
    if (fatal) throw fatal;
    if (interrupted && !summary.drained) summary.interrupted = interrupted;
    return summary;
  } finally {
    redis.disconnect();
  }
}

/** The run this Redis holds; without one, waits for an `enqueue` (or returns null with `untilDrained`). */
async function waitForRun(redis: Redis, options: WorkerOptions, stop: AbortSignal) {
  for (let warned = false; ; warned = true) {
    const meta = await readRunMeta(redis);
    if (meta || options.untilDrained || stop.aborted) return meta;
    if (!warned)
      options.onEvent?.({
        type: 'warning',
        message: `nothing enqueued at ${redactUrl(options.redisUrl)} yet; waiting`,
      });
    await sleep(2000, stop).catch(() => {});
  }
}

/**
 * Resolves when the queue is empty (true): nothing waiting, delayed or active at any worker; checks
 * each second while this worker is idle. A worker that died holding items keeps them "active" until
 * they stall and come back, so the others wait for them. False when stopped first.
 */
async function untilDrained(redis: Redis, items: ItemProcessor, stop: AbortSignal): Promise<boolean> {
  const queue = openQueue(redis);
  try {
    while (!stop.aborted) {
      await sleep(1000, stop).catch(() => {});
      if (stop.aborted || items.active > 0) continue;
      const counts = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active');
      if (Object.values(counts).every((n) => n === 0)) return true;
    }
    return false;
  } finally {
    await queue.close();
  }
}

interface ProcessorDeps {
  redis: Redis;
  /** What the review needs; null with `--no-review`. */
  review: { logger: Logger; outDir: OutputStore; threshold: number | undefined } | null;
  shared: Omit<StageContext, 'store'>;
  styles: ReadonlySet<string> | null;
  preflighter: ReturnType<typeof createPreflighter>;
  outDir: string;
  logger: Logger;
  emit: (event: WorkerEvent) => void;
  fail: (error: KitchenError) => void;
  summary: WorkerSummary;
  jobTimeoutMs: number;
}

/** One queued item through the stages, and what its end means for its BullMQ job. */
class ItemProcessor {
  readonly #deps: ProcessorDeps;
  readonly #handedBack = new Set<string>();
  /** The items in hand, by id: what the reviewer reads and writes through. */
  readonly #stores = new Map<string, JobStore>();
  readonly #reviewer: Reviewer | null;
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

  async run(job: Job<QueuedItem, ItemResult>, token: string): Promise<ItemResult> {
    this.active++;
    try {
      return await this.#run(job, token);
    } finally {
      this.active--;
    }
  }

  async #run(job: Job<QueuedItem, ItemResult>, token: string): Promise<ItemResult> {
    const { redis, shared, logger } = this.#deps;
    const data = job.data;
    if (shared.stop.aborted) return this.#handBack(job, token);
    const item = checkStyle(itemOf(data), this.#deps.styles);
    const store = new JobStore(redis, job.id!, token, await loadState(redis, data.id));
    const ctx: StageContext = { ...shared, store };
    let outcome: Outcome;
    this.#stores.set(data.id, store);
    try {
      const known = store.state;
      const decision = await decide(item, {
        preflighter: this.#deps.preflighter,
        state: known,
        outDir: shared.output,
        retryFailed: data.retryFailed === true,
        verify: false,
        signal: shared.stop,
      });
      const state = await store.plan(plannedIdentity(item, decision));
      switch (decision.action) {
        case 'reject': {
          const { error } = decision;
          const same = known?.phase === 'rejected' && known.error?.code === error.code;
          if (!same) await store.record({ t: 'rejected', id: item.id, fp: state.fp, error });
          return this.#ended(item.id, 'rejected', null, error);
        }
        case 'skip':
          // A result an earlier worker (or one run with --no-review) left unreviewed.
          if (state.phase === 'downloaded') await this.#reviewer?.reviewNow(item.id);
          return this.#ended(
            item.id,
            state.phase === 'downloaded' ? 'succeeded' : 'failed',
            state.jobId,
            state.error,
          );
        case 'download':
          outcome = await downloadItem(ctx, state);
          break;
        case 'poll':
          // Another worker may have polled this job a moment ago (it handed the item back): the
          // 2 s floor (docs/contract.md#poll-floor) counts from now.
          shared.polls.polled(item.id);
          outcome = await pollJob(ctx, state, { jobTimeoutMs: this.#deps.jobTimeoutMs });
          break;
        case 'submit':
          if (state.phase === 'unknown' && !data.resend) {
            // A worker stopped between the `submitting` mark and the 202: the job may exist. Not
            // resent (docs/contract.md#rules); `enqueue` again sends it, as a rerun of `run` would.
            outcome = {
              kind: 'incomplete',
              error: {
                code: 'submit_unknown',
                message:
                  'a worker stopped after sending the job, before its id came back; not resent, to avoid a duplicate charge. `enqueue` again sends it',
              },
            };
            break;
          }
          // Sent again once: a later try of this job (a transient fault) goes on from its state.
          if (data.resend || data.retryFailed)
            await job.updateData({ ...data, resend: false, retryFailed: false });
          outcome = await submitItem(ctx, item, state, decision.upload, { retryAmbiguous: false });
          if (outcome.kind === 'accepted') {
            logger.info({ event: 'accepted', item: item.id, job_id: outcome.jobId }, 'job accepted');
            outcome = await pollJob(ctx, state, { jobTimeoutMs: this.#deps.jobTimeoutMs });
          }
          break;
      }
      if (outcome.kind === 'ended' && outcome.status === 'succeeded')
        outcome = await downloadItem(ctx, state);
      if (outcome.kind === 'downloaded') await this.#reviewer?.reviewNow(item.id);
    } catch (error) {
      if (error instanceof LockLostError) throw error;
      if (shared.stop.aborted) return this.#handBack(job, token);
      outcome = { kind: 'fatal', error: runError(error, this.#deps.outDir) };
    } finally {
      this.#stores.delete(data.id);
    }
    return this.#settle(job, token, store, outcome);
  }

  /** What the stage's outcome means for the item's BullMQ job. */
  async #settle(
    job: Job<QueuedItem, ItemResult>,
    token: string,
    store: JobStore,
    outcome: Outcome,
  ): Promise<ItemResult> {
    const { id } = job.data;
    const state = store.state!;
    switch (outcome.kind) {
      case 'downloaded':
        return this.#ended(id, 'succeeded', outcome.jobId, null);
      case 'ended':
        return this.#ended(id, 'failed', outcome.jobId, outcome.error);
      case 'refused':
        return this.#ended(id, 'failed', null, outcome.error);
      case 'accepted':
      case 'stopped':
        return this.#handBack(job, token);
      case 'fatal':
        if (outcome.error instanceof LockLostError) throw outcome.error;
        this.#deps.fail(outcome.error);
        return this.#handBack(job, token);
      case 'incomplete': {
        const { error } = outcome;
        await store.record({ t: 'incomplete', id, fp: state.fp, error });
        this.#deps.logger.info({ event: 'incomplete', item: id, code: error.code }, error.message);
        if (outcome.fatal) {
          this.#deps.fail(outcome.fatal);
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
