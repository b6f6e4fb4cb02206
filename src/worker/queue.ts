/**
 * The worker mode's queue (docs/contract.md#worker-mode): one BullMQ queue per Redis database, one
 * job per item, its id made from the item's fingerprint and id so that adding an item twice is a
 * no-op, and the run's output folder beside it so that every worker writes to the same place.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { UsageError } from '../errors.js';
import type { Item } from '../types.js';
import { redactUrl } from './redis.js';

/** The queue's name; one run per Redis database (another catalogue: another database, `/1`). */
export const QUEUE_NAME = 'kitchen-batch';
/** Where the run's description is kept (a JSON string). */
const RUN_KEY = 'kitchen-batch:run';
/** Item id → its current job id (a hash): a changed row or image replaces a job still waiting. */
export const ITEMS_KEY = 'kitchen-batch:items';

/** Item id → its place in the run (a sorted set): the report's order, first enqueue first. */
export const ORDER_KEY = 'kitchen-batch:order';
/** The service the workers use (its base URL, for the report; never the key). */
export const SERVICE_KEY = 'kitchen-batch:service';

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

/** The run every worker of this Redis database works for. */
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

/** The run's queue on an open connection (BullMQ duplicates it where it needs blocking commands). */
export function openQueue(connection: Redis): Queue<QueuedItem> {
  return new Queue<QueuedItem>(QUEUE_NAME, { connection });
}

/** The run this database holds, if any. */
export async function readRunMeta(connection: Redis): Promise<RunMeta | null> {
  const text = await connection.get(RUN_KEY);
  return text ? (JSON.parse(text) as RunMeta) : null;
}

/**
 * Records the run's output folder the first time; later `enqueue`s must name the same folder (one
 * run per database), else a usage error says which folder the database belongs to.
 */
export async function claimRun(connection: Redis, url: string, meta: RunMeta): Promise<RunMeta> {
  await connection.set(RUN_KEY, JSON.stringify(meta), 'NX');
  const current = (await readRunMeta(connection))!;
  if (current.out !== meta.out) {
    throw new UsageError(
      `${redactUrl(url)} already holds the run whose output folder is ${current.out}; ` +
        'enqueue with that --out, or use another Redis database for another run (e.g. redis://host:6379/1)',
    );
  }
  return current;
}
