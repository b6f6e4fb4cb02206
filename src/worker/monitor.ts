/**
 * What a worker's metrics endpoint shows beyond `run`'s metrics (docs/contract.md#monitoring): the
 * queue's job counts and the age of its oldest waiting job, read from Redis when Prometheus scrapes
 * (cached briefly, so scrapes stay cheap), and whether Redis has been out of reach too long for the
 * worker to count as alive. A scrape never fails because Redis is down: the last values stay and an
 * error is counted.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Counter, Gauge } from 'prom-client';
import type { RunMetrics } from '../metrics/registry.js';
import type { RunEvent } from '../pipeline/events.js';
import type { StoreOp } from '../storage/counted.js';
import type { WorkerEvent } from './items.js';
import { openQueue, type QueueKeys } from './queue.js';

/** Redis out of reach this long and `/livez` says the worker is not alive. */
export const REDIS_DOWN_LIMIT_MS = 60_000;
/** Queue figures this fresh are served from memory. */
const CACHE_MS = 1500;
/** A queue read that takes longer leaves the last values in place. */
const READ_TIMEOUT_MS = 1000;
/** The job states the gauge reports, always all of them (0 when empty). */
const STATES = ['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized'] as const;

/** Options of {@link WorkerMonitor}. */
export interface WorkerMonitorOptions {
  /** @default {@link REDIS_DOWN_LIMIT_MS} */
  redisDownLimitMs?: number;
  now?: () => number;
}

/** The worker's side of its metrics endpoint; pass it as `runWorker`'s `monitor`. */
export class WorkerMonitor {
  readonly #metrics: RunMetrics;
  readonly #now: () => number;
  readonly #limitMs: number;
  readonly #errors: Counter;
  #queue: Queue | null = null;
  /** The queue's name (`--queue`), a label of the queue gauges: many runs share one Redis. */
  #name = '';
  #redis: Redis | null = null;
  #downSince: number | null = null;
  #stopped = false;
  #counts: Record<string, number> = Object.fromEntries(STATES.map((s) => [s, 0]));
  #oldestAgeS = 0;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<void> | null = null;
  /** The scrape's wait for {@link #reading}, shared by the metrics it collects (one error counted). */
  #waiting: Promise<void> | null = null;

  constructor(metrics: RunMetrics, options: WorkerMonitorOptions = {}) {
    this.#metrics = metrics;
    this.#now = options.now ?? Date.now;
    this.#limitMs = options.redisDownLimitMs ?? REDIS_DOWN_LIMIT_MS;
    const registers = [metrics.registry];
    const self = this;
    new Gauge({
      name: 'kitchen_batch_queue_jobs',
      help: 'Jobs in the queue by BullMQ state (waiting, active, delayed, completed, failed, prioritized), read from Redis at scrape time.',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        await self.#refresh();
        if (!self.#queue) return;
        for (const state of STATES) this.set({ queue: self.#name, state }, self.#counts[state] ?? 0);
      },
    });
    new Gauge({
      name: 'kitchen_batch_queue_oldest_waiting_age_seconds',
      help: 'Age of the oldest job waiting in the queue, in seconds (0 when none waits).',
      labelNames: ['queue'],
      registers,
      async collect() {
        await self.#refresh();
        if (self.#queue) this.set({ queue: self.#name }, self.#oldestAgeS);
      },
    });
    this.#errors = new Counter({
      name: 'kitchen_batch_queue_read_errors_total',
      help: 'Scrapes whose queue figures could not be read from Redis (the last values were kept).',
      registers,
      // A registry collects its metrics at once: this one waits for the same read the gauges wait for.
      async collect() {
        await self.#refresh();
      },
    });
  }

  /** The service's answers and rate changes, as `run`'s events carry them. */
  readonly onRunEvent = (event: RunEvent): void => this.#metrics.handle(event);

  /** A store operation (sources read, outputs written), into `run`'s store counters. */
  readonly onStoreOp = (op: StoreOp): void => this.#metrics.store(op);

  /** An item this worker ended, into the same item counters as `run`'s. */
  readonly onWorkerEvent = (event: WorkerEvent): void => {
    if (event.type === 'warning') this.#metrics.handle(event);
    if (event.type === 'submitted') this.#metrics.handle({ type: 'item', id: event.id, status: 'submitted' });
    if (event.type !== 'item' || event.status === 'handed_back' || event.status === 'retry') return;
    this.#metrics.handle({
      type: 'item',
      id: event.id,
      status: event.status,
      ...(event.error ? { error: event.error } : {}),
    });
  };

  /** The worker's Redis, once connected: the queue to read and the connection to watch. */
  attach(redis: Redis, keys: QueueKeys): void {
    this.#redis = redis;
    this.#name = keys.name;
    this.#queue = openQueue(redis, keys);
    const down = () => {
      this.#downSince ??= this.#now();
    };
    redis.on('close', down);
    redis.on('end', down);
    redis.on('ready', () => {
      this.#downSince = null;
    });
  }

  /** The worker has stopped working (it is on its way out): `/livez` says so. */
  stopped(): void {
    this.#stopped = true;
  }

  /** Why the worker is not alive, for `/livez`, or null. */
  health(): string | null {
    if (this.#stopped) return 'the worker has stopped';
    if (this.#redis && this.#redis.status !== 'ready') this.#downSince ??= this.#now();
    if (this.#downSince === null) return null;
    const downMs = this.#now() - this.#downSince;
    return downMs > this.#limitMs
      ? `Redis unreachable for ${Math.round(downMs / 1000)} s (limit ${Math.round(this.#limitMs / 1000)} s)`
      : null;
  }

  /** Closes the queue handle (not the connection, which is the worker's). */
  async close(): Promise<void> {
    await this.#queue?.close().catch(() => {});
  }

  /** Reads the queue's figures unless fresh ones are cached; one read and one wait at a time. */
  #refresh(): Promise<void> {
    const queue = this.#queue;
    if (!queue || this.#now() - this.#readAt < CACHE_MS) return Promise.resolve();
    this.#waiting ??= this.#wait(queue).finally(() => {
      this.#waiting = null;
    });
    return this.#waiting;
  }

  async #wait(queue: Queue): Promise<void> {
    this.#reading ??= this.#read(queue).finally(() => {
      this.#reading = null;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), READ_TIMEOUT_MS);
    });
    // A Redis that does not answer (down, reconnecting) holds the read: the scrape goes on without it.
    if ((await Promise.race([this.#reading, late])) === 'late') this.#errors.inc();
    clearTimeout(timer);
  }

  async #read(queue: Queue): Promise<void> {
    try {
      const counts = await queue.getJobCounts(...STATES);
      // The wait list is pushed on the left and taken from the right: ascending, the first is the oldest.
      const [oldest] = await queue.getJobs(['wait'], 0, 0, true);
      this.#counts = { ...this.#counts, ...counts };
      this.#oldestAgeS = oldest ? Math.max(0, (this.#now() - oldest.timestamp) / 1000) : 0;
      this.#readAt = this.#now();
    } catch {
      this.#errors.inc();
    }
  }
}
