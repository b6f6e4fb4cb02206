/**
 * The worker mode's queues (docs/contract.md#worker-mode): any number of runs on one Redis, each in
 * its own named queue (`--queue NAME`, default `kitchen-batch`). A queue is one BullMQ queue, one job
 * per item, its id made from the item's fingerprint and id so that adding an item twice is a no-op,
 * and the run's output folder beside it so that every worker of that queue writes to the same place.
 * Every key of a queue carries the hash tag `{NAME}`, so that on Redis Cluster they share one slot and
 * the Lua scripts that touch several of them (BullMQ's, `store.ts`'s fenced write) stay legal.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { UsageError } from '../errors.js';
import type { Item } from '../types.js';
import { redactUrl } from './redis.js';

/** The queue of a user who names none: one run per Redis needs no flag. */
export const DEFAULT_QUEUE = 'kitchen-batch';
/** What a queue may be called: it goes into key names and hash tags, so no `{`, `}`, `:` or spaces. */
const QUEUE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** BullMQ's name of the queue inside a queue's prefix (`kb:{NAME}:jobs:<job id>`). */
export const BULL_QUEUE = 'jobs';
/** The keys of the layout before `--queue` (one run per database), which this version does not read. */
export const LEGACY_RUN_KEY = 'kitchen-batch:run';

/** Every Redis key of one queue, all under the hash tag `{NAME}` (one Cluster slot). */
export interface QueueKeys {
  /** The queue's name as the user gave it. */
  name: string;
  /** BullMQ's prefix for this queue's keys (BullMQ's documented Cluster pattern: a hash tag in it). */
  prefix: string;
  /** The run's description (a JSON string, {@link RunMeta}). */
  run: string;
  /** Item id → its current job id (a hash): a changed row or image replaces a job still waiting. */
  items: string;
  /** Item id → its place in the run (a sorted set): the report's order, first enqueue first. */
  order: string;
  /** The counter behind {@link order}. */
  orderSeq: string;
  /** The service the workers use (its base URL, for the report; never the key). */
  service: string;
  /** Item id → its state as JSON (`store.ts`). */
  states: string;
  /** The name of the shared-rate hash the queue's workers draw from (`rate.ts`), for `status`. */
  rate: string;
  /** The BullMQ lock key of a job. */
  lock(jobId: string): string;
}

/** The keys of the queue `name` (checked by {@link queueName} when it comes from the user). */
export function queueKeys(name: string): QueueKeys {
  const base = `kb:{${name}}`;
  return {
    name,
    prefix: base,
    run: `${base}:run`,
    items: `${base}:item-jobs`,
    order: `${base}:order`,
    orderSeq: `${base}:order:seq`,
    service: `${base}:service`,
    states: `${base}:states`,
    rate: `${base}:rate-key`,
    lock: (jobId) => `${base}:${BULL_QUEUE}:${jobId}:lock`,
  };
}

/** The default queue's keys. */
export const DEFAULT_KEYS = queueKeys(DEFAULT_QUEUE);

/** The pattern that finds every queue's run key (SCAN MATCH); `{`, `}` are not glob characters. */
export const RUN_KEY_PATTERN = 'kb:{*}:run';

/** The queue's name back from a run key the SCAN found (null for a key not of this layout). */
export function queueOfRunKey(key: string): string | null {
  const match = /^kb:\{([A-Za-z0-9._-]{1,64})\}:run$/.exec(key);
  return match ? match[1]! : null;
}

/** The queue from `--queue`, else `KITCHEN_QUEUE`, else {@link DEFAULT_QUEUE}; a usage error naming the flag when bad. */
export function queueName(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const fromEnv = env.KITCHEN_QUEUE?.trim() || undefined;
  const name = flag ?? fromEnv ?? DEFAULT_QUEUE;
  if (!QUEUE_PATTERN.test(name)) {
    const where = flag !== undefined ? '--queue' : '--queue (from KITCHEN_QUEUE)';
    throw new UsageError(
      `${where}: expected 1 to 64 letters, digits, ".", "_" or "-", got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** Tries BullMQ makes of an item left incomplete by a transient fault (poll, download, 5xx). */
export const ITEM_ATTEMPTS = 5;
/** First backoff between those tries (doubling). */
export const ITEM_BACKOFF_MS = 15_000;

/** What a queued job carries: the manifest row as planned. */
export interface QueuedItem {
  id: string;
  /** The image as the report shows it (relative to the manifest folder, or as given). */
  image: string;
  /** Absolute path of the image: every worker must see it at this path (a shared volume). */
  imagePath: string;
  module: string;
  style: string | null;
  prompt: string | null;
  configuration: Record<string, unknown> | null;
  /** The item's fingerprint (docs/contract.md#resume). */
  fp: string;
  /** 1-based manifest line. */
  line: number;
  /**
   * Set by `enqueue` when it puts back an item that ended `submit_unknown`: the worker sends it again
   * (as a rerun of `run` does), once.
   */
  resend?: boolean;
  /**
   * Set by `enqueue --retry-failed` when it puts back an item whose job failed at the service: the
   * worker submits it again (as `run --retry-failed` does), once.
   */
  retryFailed?: boolean;
}

/** The run every worker of one queue works for. */
export interface RunMeta {
  /** Absolute output folder: a volume every worker mounts at this path. */
  out: string;
  /** Absolute manifest path as enqueued (for the reports). */
  manifest: string;
  /** ISO time of the first `enqueue`. */
  created_at: string;
}

/** The job id of an item: its fingerprint and its id (two rows with one photo and style are two items). */
export function jobIdOf(item: Pick<Item, 'id'>, fp: string): string {
  return `${fp}.${item.id}`;
}

/** The queue's BullMQ queue on an open connection (BullMQ duplicates it where it needs blocking commands). */
export function openQueue(connection: Redis, keys: QueueKeys = DEFAULT_KEYS): Queue<QueuedItem> {
  return new Queue<QueuedItem>(BULL_QUEUE, { connection, prefix: keys.prefix });
}

/** The run the queue holds, if any. */
export async function readRunMeta(
  connection: Redis,
  keys: QueueKeys = DEFAULT_KEYS,
): Promise<RunMeta | null> {
  const text = await connection.get(keys.run);
  return text ? (JSON.parse(text) as RunMeta) : null;
}

/**
 * Records the run's output folder the first time; later `enqueue`s into the same queue must name the
 * same folder (one run per queue), else a usage error says which folder the queue belongs to. Other
 * queues on the same Redis are other runs and are not looked at.
 */
export async function claimRun(
  connection: Redis,
  url: string,
  keys: QueueKeys,
  meta: RunMeta,
): Promise<RunMeta> {
  await connection.set(keys.run, JSON.stringify(meta), 'NX');
  const current = (await readRunMeta(connection, keys))!;
  if (current.out !== meta.out) {
    throw new UsageError(
      `queue ${keys.name} at ${redactUrl(url)} already holds the run whose output folder is ${current.out}; ` +
        'enqueue with that --out, or give another run its own --queue NAME',
    );
  }
  return current;
}

/**
 * What `status` and the commands say when the queue is empty but the Redis holds a run in the
 * layout before `--queue` (`kitchen-batch:run`, `bull:kitchen-batch:*`): that run is not read.
 */
export async function legacyRunNote(connection: Redis, url: string): Promise<string | null> {
  const text = await connection.get(LEGACY_RUN_KEY);
  if (!text) return null;
  let out = '?';
  try {
    out = (JSON.parse(text) as RunMeta).out;
  } catch {}
  return (
    `${redactUrl(url)} also holds a run (output ${out}) in the key layout before --queue ` +
    '(kitchen-batch:run, bull:kitchen-batch:*), which this version does not read: finish it with the ' +
    'version that enqueued it (enqueueing its manifest here starts it afresh, every item submitted again)'
  );
}
