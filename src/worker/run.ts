/**
 * The worker (docs/contract.md#worker-mode): pulls items that `enqueue` queued in Redis and runs
 * them through the same steps as `run` (`src/stages/sequence.ts`, driven by `items.ts`), with the
 * item's state in Redis instead of a journal (`store.ts`) and one rate shared by every worker
 * (`rate.ts`). Any number of workers on any number of machines; results go whole into the shared
 * output folder.
 */
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { GovernorOptions } from '../api/governor.js';
import type { KitchenError } from '../errors.js';
import { CONCURRENCY, JOB_TIMEOUT_MS, UNREACHABLE_MS, WORKER_GRACE_MS, WORKER_STALL_MS } from '../limits.js';
import type { RunEvent } from '../pipeline/events.js';
import { describeSourceAccess, resolveSourceAccess } from '../pipeline/source-access.js';
import { createPreflighter } from '../preflight/index.js';
import { type ConnectOptions, connect } from '../stages/connect.js';
import type { StageContext } from '../stages/context.js';
import { fetchStyleKeys } from '../stages/fetch-styles.js';
import { RunStop } from '../stages/stop.js';
import { UploadReader } from '../stages/submit.js';
import { preparedDir, workerLogFile } from '../state/run-files.js';
import { removeLeftoverParts } from '../state/run-folder.js';
import { countedOutput } from '../storage/counted.js';
import { defaultCacheDir, openOutputStore } from '../storage/outputs.js';
import { isS3Ref } from '../storage/s3/ref.js';
import { createSources, type SourceAccess } from '../storage/sources.js';
import type { OutputStore } from '../storage/types.js';
import type { ItemStatus } from '../types.js';
import { createRunLogger } from '../util/logger.js';
import { sleep } from '../util/time.js';
import { wholeNumber } from '../util/validate.js';
import { ItemProcessor, type ItemResult, type WorkerEvent } from './items.js';
import {
  BULL_QUEUE,
  DEFAULT_QUEUE,
  legacyRunNote,
  openQueue,
  type QueuedItem,
  type QueueKeys,
  queueKeys,
  readRunMeta,
} from './queue.js';
import { type RateKeys, rateKeys, SharedRate } from './rate.js';
import { openRedis, redactUrl, secondConnection } from './redis.js';

export type { ItemResult, WorkerEvent } from './items.js';

/** Options of {@link runWorker}. */
export interface WorkerOptions {
  redisUrl: string;
  /** The queue to work on (`--queue`, checked by `queueName`). @default {@link DEFAULT_QUEUE} */
  queue?: string;
  service: { baseUrl: string; apiKey: string; governor?: GovernorOptions; unreachableMs?: number };
  /** Items this worker holds at once (each one job slot at the service). @default 8 */
  concurrency?: number;
  /** How remote sources are reached (as `run`'s `sources`). @default {@link defaultSourceAccess} */
  sources?: Partial<SourceAccess>;
  /** Exit once nothing is left in the queue (waiting, delayed or held by any worker). @default false */
  untilDrained?: boolean;
  /**
   * How long an item stays with a worker that stopped answering (killed, frozen, cut off) before
   * another worker takes it over: the BullMQ lock duration. @default {@link WORKER_STALL_MS}
   */
  stallTimeoutMs?: number;
  /** After a stop (SIGTERM), how long requests in flight get to finish before they are aborted. @default {@link WORKER_GRACE_MS} */
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
  /** The metrics endpoint's side (`monitor.ts`): the service's answers and the worker's Redis. */
  monitor?: { onRunEvent(event: RunEvent): void; attach(redis: Redis, keys: QueueKeys): void };
}

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

/**
 * Runs a worker until it is stopped (or, with `untilDrained`, until the queue is empty). Resolves
 * with what it did (`interrupted` says a stop signal ended it, after its items were handed back);
 * throws the error that stopped it (refused key, unreachable service: exit 3; a disk fault: exit 2)
 * after handing its items back.
 */
export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const name = (options.name ?? `${hostname()}-${process.pid}`).replace(/[^A-Za-z0-9._-]/g, '_');
  const concurrency = wholeNumber('concurrency', options.concurrency, CONCURRENCY, CONCURRENCY.default);
  const access = resolveSourceAccess(options.sources);
  // Commands wait for a Redis that restarts instead of failing: a state write that cannot be made
  // holds its POST back until it can.
  const redis = await openRedis(options.redisUrl, { blocking: true });
  const keys = queueKeys(options.queue ?? DEFAULT_QUEUE);
  options.monitor?.attach(redis, keys);
  const summary: WorkerSummary = {
    name,
    outDir: null,
    counts: { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 },
    handedBack: 0,
    drained: false,
    interrupted: null,
  };
  const stop = new RunStop(options.graceMs ?? WORKER_GRACE_MS);
  let interrupted: string | undefined;
  stop.follow(options.signals ?? {}, (reason) => {
    interrupted ??= reason;
    stop.begin();
  });
  try {
    const meta = await waitForRun(redis, keys, options, stop.soft);
    if (!meta) return { ...summary, drained: true };
    summary.outDir = meta.out;
    // For the report's header (the URL only: the key never goes to Redis), and for `status`, where
    // the key's shared rate is (its fingerprint's keys).
    const rate = rateKeys(options.service.apiKey);
    await redis.set(keys.service, options.service.baseUrl);
    await redis.set(keys.rate, rate.rate);
    const fatal = await work(
      { redis, keys, rate, outDir: meta.out, name, concurrency, access, stop, summary },
      options,
    );
    if (fatal) throw fatal;
    if (interrupted && !summary.drained) summary.interrupted = interrupted;
    return summary;
  } finally {
    redis.disconnect();
  }
}

/** What {@link work} is given by {@link runWorker}. */
interface WorkSetup {
  redis: Redis;
  keys: QueueKeys;
  rate: RateKeys;
  outDir: string;
  name: string;
  concurrency: number;
  access: SourceAccess;
  stop: RunStop;
  summary: WorkerSummary;
}

/**
 * The worker's life in the run's folder: its log, the service, the BullMQ worker, until it is
 * stopped or the queue is drained; resolves with the error that stopped it, if one did.
 */
async function work(setup: WorkSetup, options: WorkerOptions): Promise<KitchenError | undefined> {
  const { redis, keys, outDir, name, stop, summary } = setup;
  const emit = (event: WorkerEvent) => options.onEvent?.(event);
  const stallTimeoutMs = options.stallTimeoutMs ?? WORKER_STALL_MS;
  const { logger, output, resultsDir, preparedDir, close } = await openWorkerLog(
    setup,
    options,
    stallTimeoutMs,
    emit,
  );
  const service = connect({
    service: { ...options.service, unreachableMs: options.service.unreachableMs ?? UNREACHABLE_MS },
    logger,
    sharedRate: (governor) => new SharedRate(redis, { ...governor, keys: setup.rate, logger }),
    ...(options.monitor ? monitorHooks(options.monitor.onRunEvent) : {}),
  });
  // Each worker fetches the sources of the items it holds: nothing is shared but the output folder.
  const sources = createSources(setup.access);
  const preflighter = createPreflighter({ cacheDir: preparedDir, ...options.preflight, sources });
  const shared: Omit<StageContext, 'store'> = {
    client: service.client,
    gate: service.gate,
    polls: service.polls,
    logger,
    stop: stop.soft,
    abort: stop.hard,
    resultsDir,
    output,
    uploads: new UploadReader(),
  };
  let fatal: KitchenError | undefined;
  const fail = (error: KitchenError) => {
    if (!fatal) {
      fatal = error;
      logger.error({ event: 'fatal', code: error.code }, error.message);
    }
    stop.begin();
  };
  let blocking: Redis | undefined;
  // The worst the event loop was held up (the lock renewal runs on it): in the log's `worker_end`.
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  try {
    const styles = await fetchStyleKeys(shared, (message) => emit({ type: 'warning', message }));
    const review =
      options.review?.enabled === false
        ? null
        : { logger, outDir: output, threshold: options.review?.threshold };
    const jobTimeoutMs = options.jobTimeoutMs ?? JOB_TIMEOUT_MS;
    const items = new ItemProcessor({
      redis,
      keys,
      review,
      shared,
      styles,
      preflighter,
      outDir,
      logger,
      emit,
      fail,
      summary,
      jobTimeoutMs,
    });
    blocking = secondConnection(redis);
    const worker = new Worker<QueuedItem, ItemResult>(BULL_QUEUE, (job, token) => items.run(job, token!), {
      prefix: keys.prefix,
      connection: blocking,
      concurrency: setup.concurrency,
      name,
      // A killed worker's items come back within 1.4 × the stall timeout: its locks run out after at
      // most `lockDuration`, and the next stall check (every `stalledInterval`, 0.4 of it) moves them
      // to the queue. A live worker renews its locks every 0.15 to 0.3 of it (BullMQ's timer runs every
      // half `lockRenewTime` and renews the locks older than that), so a lock is lost only when the
      // event loop is held up for 0.7 of it (the bench's takeover section measures the worst delay).
      ...lockTimings(stallTimeoutMs),
      // A worker killed mid-item leaves it "stalled": another takes it over, a few times at most.
      maxStalledCount: 3,
      autorun: false,
    });
    // This worker's stall check found another's item (its lock ran out): it is back in the queue.
    worker.on('stalled', (jobId) =>
      logger.info({ event: 'stalled', job: jobId }, 'item back in the queue: its worker stopped answering'),
    );
    worker.on('error', (error) => logger.warn({ event: 'queue_error', err: error.message }, 'BullMQ error'));
    const running = worker.run();
    stop.soft.addEventListener('abort', () => void worker.close(), { once: true });
    if (options.untilDrained) {
      summary.drained = await untilDrained(redis, keys, items, stop.soft);
      // Nothing is held by any worker: a partial download still there is a killed worker's.
      if (summary.drained) await removeLeftoverParts(output, logger);
      stop.begin();
    }
    await running;
    await worker.close();
    await items.close();
  } finally {
    service.close();
    await preflighter.close();
    sources.close();
    blocking?.disconnect();
    loopDelay.disable();
    const loopDelayMaxMs = Math.round(loopDelay.max / 1e6);
    logger.info({ event: 'worker_end', ...summary, loop_delay_max_ms: loopDelayMaxMs }, 'worker stopped');
    logger.flush?.();
    close();
  }
  return fatal;
}

/** BullMQ's lock settings for a stall timeout (docs/contract.md#worker-mode: takeover within 1.4 × it). */
export function lockTimings(stallTimeoutMs: number): {
  lockDuration: number;
  lockRenewTime: number;
  stalledInterval: number;
} {
  return {
    lockDuration: stallTimeoutMs,
    lockRenewTime: Math.round(stallTimeoutMs * 0.3),
    stalledInterval: Math.round(stallTimeoutMs * 0.4),
  };
}

/** The service's answers and rate changes as `run`'s events (pipeline/setup.ts), for the metrics. */
function monitorHooks(emit: (event: RunEvent) => void): Pick<ConnectOptions, 'onRate' | 'onRequest'> {
  return {
    onRate: (event) => emit({ type: 'rate', rate: event.rate }),
    onRequest: (kind, status) =>
      emit({ type: 'request', endpoint: kind === 'submit-ambiguous' ? 'submit' : kind, status }),
  };
}

/**
 * The worker's log file in the run's folder (`workers/<name>.log`), opened once `results/` is there
 * and what a killed worker left half-written in it is gone.
 */
async function openWorkerLog(
  setup: WorkSetup,
  options: WorkerOptions,
  stallTimeoutMs: number,
  emit: (event: WorkerEvent) => void,
): Promise<{
  logger: Logger;
  output: OutputStore;
  resultsDir: string;
  preparedDir: string;
  close: () => void;
}> {
  const { outDir, name } = setup;
  // A bucket's worker keeps its log and scratch in a cache of its own; the bucket is all it shares.
  const opened = await openOutputStore(outDir, {
    cacheDir: isS3Ref(outDir) ? defaultCacheDir(outDir, setup.access.env, `worker-${name}`) : null,
    env: setup.access.env,
  });
  const { cacheDir } = opened;
  const output = countedOutput(opened.output, setup.access.onStoreOp);
  const resultsDir = output.describe('results');
  if (cacheDir === null) await mkdir(resultsDir, { recursive: true });
  const logFile = cacheDir === null ? workerLogFile(outDir, name) : path.join(cacheDir, 'worker.log');
  const logger = createRunLogger({
    file: logFile,
    level: options.logLevel ?? 'info',
    secrets: [options.service.apiKey],
  });
  emit({ type: 'start', name, outDir, log: logFile });
  await removeLeftoverParts(output, logger, Math.max(10 * 60_000, 4 * stallTimeoutMs));
  logger.info(
    {
      event: 'worker_start',
      name,
      redis: redactUrl(options.redisUrl),
      queue: setup.keys.name,
      concurrency: setup.concurrency,
      out: outDir,
      ...describeSourceAccess(setup.access),
    },
    'worker started',
  );
  const prepared = cacheDir === null ? preparedDir(outDir) : path.join(cacheDir, '.prepared');
  return { logger, output, resultsDir, preparedDir: prepared, close: opened.close };
}

/** The run the queue holds; without one, waits for an `enqueue` (or returns null with `untilDrained`). */
async function waitForRun(redis: Redis, keys: QueueKeys, options: WorkerOptions, stop: AbortSignal) {
  for (let warned = false; ; warned = true) {
    const meta = await readRunMeta(redis, keys);
    if (meta || stop.aborted) return meta;
    if (!warned) {
      const legacy = await legacyRunNote(redis, options.redisUrl);
      if (legacy) options.onEvent?.({ type: 'warning', message: legacy });
    }
    if (options.untilDrained) return meta;
    if (!warned)
      options.onEvent?.({
        type: 'warning',
        message: `nothing enqueued in queue ${keys.name} at ${redactUrl(options.redisUrl)} yet; waiting`,
      });
    await sleep(2000, stop).catch(() => {});
  }
}

/**
 * Resolves when the queue is empty (true): nothing waiting, delayed or active at any worker; checks
 * each second while this worker is idle. A worker that died holding items keeps them "active" until
 * they stall and come back, so the others wait for them. False when stopped first.
 */
async function untilDrained(
  redis: Redis,
  keys: QueueKeys,
  items: ItemProcessor,
  stop: AbortSignal,
): Promise<boolean> {
  const queue = openQueue(redis, keys);
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
