/**
 * `kitchen-batch status --redis URL [--queue NAME]` (docs/contract.md#worker-mode): without a queue,
 * the queues the Redis holds with their counts (and, when there is just one, its view); with one, that
 * run's items by queue state and by outcome, the shared rate, and the workers connected, by name.
 */
import type { Redis } from 'ioredis';
import { UsageError } from '../errors.js';
import type { ItemStatus } from '../types.js';
import { redactUrl as shownUrl } from '../util/redact-url.js';
import {
  legacyRunNote,
  openQueue,
  type QueueKeys,
  queueKeys,
  queueName,
  queueOfRunKey,
  RUN_KEY_PATTERN,
  readRunMeta,
} from '../worker/queue.js';
import { readSharedRate } from '../worker/rate.js';
import { persistenceWarnings, redactUrl, redisUrl, withRedis } from '../worker/redis.js';
import { reportRows } from '../worker/report.js';
import type { CommandDeps } from './common.js';
import { parseFlags } from './parse.js';

/** The states `status` counts, in BullMQ's words. */
const STATES = ['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'] as const;
/** Queues listed at most (the SCAN stops there and says more are left). */
const MAX_QUEUES = 100;
/** Keys a SCAN step looks at. */
const SCAN_COUNT = 1000;

/** `kitchen-batch status --redis URL [--queue NAME] [--json]`: exit 0 whatever the runs' state; 2 for usage, 3 for Redis. */
export async function statusCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('status', args);
  if (positionals.length > 0)
    throw new UsageError('usage: kitchen-batch status --redis URL [--queue NAME] [--json]');
  const url = redisUrl(values.redis, deps.env);
  const named = values.queue !== undefined || Boolean(deps.env.KITCHEN_QUEUE?.trim());
  const keys = named ? queueKeys(queueName(values.queue, deps.env)) : null;
  const json = values.json === true;
  return withRedis(url, async (connection) => {
    for (const warning of await persistenceWarnings(connection, url))
      deps.stderr.write(`warning: ${warning}\n`);
    if (keys) return queueView(connection, keys, url, deps, json ? {} : null);
    const { queues, more } = await listQueues(connection);
    const legacy = await legacyRunNote(connection, url);
    if (json) {
      // One run on this Redis: its view's fields too, as before there were queues.
      if (queues.length === 1)
        return queueView(connection, queueKeys(queues[0]!.queue), url, deps, { queues, more, legacy });
      deps.stdout.write(`${JSON.stringify({ redis: redactUrl(url), queues, more, legacy })}\n`);
      return 0;
    }
    if (legacy) deps.stderr.write(`warning: ${legacy}\n`);
    if (queues.length === 0) {
      deps.stdout.write(
        `${redactUrl(url)}: no run enqueued here yet (kitchen-batch enqueue <manifest> --redis URL [--queue NAME])\n`,
      );
      return 0;
    }
    deps.stdout.write(`queues at ${redactUrl(url)}: ${queues.length}${more ? ' (more not listed)' : ''}\n`);
    for (const q of queues) {
      const parts = STATES.filter((state) => (q.counts[state] ?? 0) > 0).map(
        (state) => `${q.counts[state]} ${state}`,
      );
      deps.stdout.write(
        `  ${q.queue}: ${q.items} items (${parts.join(', ') || 'none'}) → ${q.out ?? '?'}, ` +
          `${q.workers} worker${q.workers === 1 ? '' : 's'}\n`,
      );
    }
    // One run on this Redis: its view follows, as before there were queues.
    if (queues.length === 1) return queueView(connection, queueKeys(queues[0]!.queue), url, deps, null);
    return 0;
  });
}

/** One queue in the list `status` prints without `--queue`. */
export interface QueueSummary {
  queue: string;
  out: string | null;
  manifest: string | null;
  items: number;
  counts: Record<string, number>;
  workers: number;
}

/**
 * The queues this Redis holds (a SCAN for their run keys, never KEYS), by name, with their counts:
 * at most {@link MAX_QUEUES} (`more` says the SCAN stopped before the end).
 */
export async function listQueues(connection: Redis): Promise<{ queues: QueueSummary[]; more: boolean }> {
  const names = new Set<string>();
  let cursor = '0';
  do {
    const [next, found] = await connection.scan(cursor, 'MATCH', RUN_KEY_PATTERN, 'COUNT', SCAN_COUNT);
    cursor = next;
    for (const key of found) {
      const name = queueOfRunKey(key);
      if (name) names.add(name);
    }
  } while (cursor !== '0' && names.size < MAX_QUEUES);
  const more = cursor !== '0' || names.size > MAX_QUEUES;
  const queues: QueueSummary[] = [];
  for (const name of [...names].sort().slice(0, MAX_QUEUES)) {
    const keys = queueKeys(name);
    const queue = openQueue(connection, keys);
    try {
      const meta = await readRunMeta(connection, keys);
      const counts = await queue.getJobCounts(...STATES);
      const workers = workerNames(await queue.getWorkers()).length;
      const items = STATES.reduce((n, state) => n + (counts[state] ?? 0), 0);
      queues.push({
        queue: name,
        out: meta?.out ?? null,
        manifest: meta?.manifest ?? null,
        items,
        counts,
        workers,
      });
    } finally {
      await queue.close();
    }
  }
  return { queues, more };
}

/**
 * The view of one queue: its run, items by state and outcome, the shared rate, the workers; as text,
 * or (`json` not null) as one JSON object with `json`'s fields beside.
 */
async function queueView(
  connection: Redis,
  keys: QueueKeys,
  url: string,
  deps: CommandDeps,
  json: Record<string, unknown> | null,
): Promise<number> {
  const queue = openQueue(connection, keys);
  try {
    return await report(connection, queue, keys, url, json, deps);
  } finally {
    await queue.close();
  }
}

async function report(
  connection: Redis,
  queue: ReturnType<typeof openQueue>,
  keys: QueueKeys,
  url: string,
  json: Record<string, unknown> | null,
  deps: CommandDeps,
): Promise<number> {
  const meta = await readRunMeta(connection, keys);
  const counts = await queue.getJobCounts(...STATES);
  const seen = workerNames(await queue.getWorkers());
  const total = STATES.reduce((n, state) => n + (counts[state] ?? 0), 0);
  const outcomes = await itemOutcomes(connection, keys);
  const rateKey = await connection.get(keys.rate);
  const rate = rateKey ? await readSharedRate(connection, rateKey) : null;
  if (json) {
    deps.stdout.write(
      `${JSON.stringify({ redis: redactUrl(url), queue: keys.name, out: meta?.out ?? null, items: total, counts, outcomes, rate, workers: seen, ...json })}\n`,
    );
    return 0;
  }
  if (!meta) {
    const legacy = await legacyRunNote(connection, url);
    if (legacy) deps.stderr.write(`warning: ${legacy}\n`);
    deps.stdout.write(
      `${redactUrl(url)}: no run enqueued in queue ${keys.name} yet (kitchen-batch enqueue <manifest> --redis URL --queue ${keys.name})\n`,
    );
    return 0;
  }
  deps.stdout.write(
    `queue ${keys.name}: ${shownUrl(meta.manifest)} → ${meta.out} (enqueued ${meta.created_at})\n`,
  );
  const parts = STATES.filter((s) => (counts[s] ?? 0) > 0).map((s) => `${counts[s]} ${s}`);
  deps.stdout.write(`items: ${total}: ${parts.join(', ') || 'none'}\n`);
  deps.stdout.write(
    `outcomes: ${outcomes.succeeded} succeeded, ${outcomes.failed} failed, ${outcomes.rejected} rejected, ` +
      `${outcomes.incomplete} incomplete\n`,
  );
  deps.stdout.write(
    rate
      ? `rate: ${rate.rate.toFixed(2)} requests/s shared by the workers of the key, in every queue` +
          (rate.estimate !== null
            ? ` (the key's rate as learnt: ${rate.estimate.toFixed(2)}/s)`
            : ' (no 429 yet)') +
          (rate.paused_ms > 0 ? `; paused by a 429 for ${(rate.paused_ms / 1000).toFixed(1)} s more` : '') +
          '\n'
      : 'rate: no worker has sent requests lately\n',
  );
  deps.stdout.write(
    `workers: ${seen.length === 0 ? 'none connected' : `${seen.length} (${seen.join(', ')})`}\n`,
  );
  return 0;
}

/**
 * The items by outcome, as `report --redis` would list them (an item no worker has ended yet is
 * incomplete): read page by page, so a catalogue of 10^6 items costs time, not memory.
 */
async function itemOutcomes(connection: Redis, keys: QueueKeys): Promise<Record<ItemStatus, number>> {
  const outcomes: Record<ItemStatus, number> = { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 };
  for await (const item of reportRows(connection, keys)) outcomes[item.status]++;
  return outcomes;
}

/**
 * The workers' names (`--name`): BullMQ names a worker's connection `<prefix>:<queue in base64>:w:<name>`
 * (CLIENT SETNAME) and reports the queue's name in place of it; a connection without a name (another
 * BullMQ client) shows as its address.
 */
export function workerNames(workers: ReadonlyArray<Record<string, string>>): string[] {
  return workers
    .map((w) => {
      const raw = w.rawname ?? '';
      const at = raw.indexOf(':w:');
      return at >= 0 ? raw.slice(at + 3) : (w.addr ?? w.id ?? '');
    })
    .filter((name) => name !== '')
    .sort();
}
