/**
 * `report --redis URL --out DIR` (docs/contract.md#worker-mode): the usual reports (report.json,
 * report.csv, report.html) of a worker run, rebuilt from Redis: the items in the order they were
 * first enqueued, each from the state the workers wrote (`store.ts`), or as not submitted yet.
 */
import type { Redis } from 'ioredis';
import type { RunInfo } from '../report/build.js';
import { reportItem, unplannedItem } from '../report/build.js';
import type { ReportSource } from '../report/write.js';
import type { ReportItem } from '../types.js';
import { isoWithOffset } from '../util/time.js';
import {
  DEFAULT_KEYS,
  DEFAULT_QUEUE,
  openQueue,
  type QueuedItem,
  type QueueKeys,
  type RunMeta,
} from './queue.js';
import { type StoredState, stateOfJob } from './store.js';

/** An enqueued item no worker has planned yet: the worker to start names the queue unless it is the default. */
function unreachedError(keys: QueueKeys) {
  const queue = keys.name === DEFAULT_QUEUE ? '' : ` --queue ${keys.name}`;
  return {
    code: 'not_submitted',
    message: `no worker has reached it yet; start a worker (kitchen-batch worker --redis URL${queue})`,
  };
}

/** Items read from Redis at once. */
const PAGE = 1000;

/** The report of the run `meta` describes (in the queue `keys`), read page by page (memory holds a page, whatever the run's size). */
export async function redisReportSource(redis: Redis, meta: RunMeta, keys: QueueKeys): Promise<ReportSource> {
  const info: RunInfo = {
    manifest: meta.manifest,
    base_url: (await redis.get(keys.service)) ?? '',
    started_at: meta.created_at,
    finished_at: isoWithOffset(),
  };
  return { info, rows: () => reportRows(redis, keys) };
}

/** Every item enqueued in the queue: its report row, in the order of its first enqueue, read a page at a time. */
export async function* reportRows(redis: Redis, keys: QueueKeys = DEFAULT_KEYS): AsyncGenerator<ReportItem> {
  const queue = openQueue(redis, keys);
  const unreached = unreachedError(keys);
  try {
    for (let start = 0; ; start += PAGE) {
      // A string stop: ioredis 6.0.0's types dropped `number` there (redis/ioredis#2162, fixed after 6.0.0).
      const ids = await redis.zrange(keys.order, start, String(start + PAGE - 1));
      if (ids.length === 0) return;
      const [states, jobIds] = await Promise.all([
        redis.hmget(keys.states, ...ids),
        redis.hmget(keys.items, ...ids),
      ]);
      const pipeline = redis.pipeline();
      for (const jobId of jobIds) pipeline.hget(queue.toKey(jobId ?? ''), 'data');
      const data = ((await pipeline.exec()) ?? []).map(([, value]) =>
        typeof value === 'string' ? (JSON.parse(value) as QueuedItem) : null,
      );
      for (const [i, id] of ids.entries()) {
        const queued = data[i];
        const text = states[i];
        const state = text ? (JSON.parse(text) as StoredState) : null;
        // A state written for an older job belongs to the item before its row or image changed.
        if (state && (!queued || stateOfJob(state, jobIds[i]!, queued.fp))) yield reportItem(state);
        else if (queued) yield unplannedItem(rowOf(id, queued), unreached);
      }
    }
  } finally {
    await queue.close();
  }
}

/** What the report shows of an item no worker has reached: the row as queued. */
function rowOf(id: string, queued: QueuedItem) {
  return { id, image: queued.image, module: queued.module, style: queued.style };
}
