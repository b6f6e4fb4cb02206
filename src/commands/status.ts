/**
 * `kitchen-batch status --redis URL` (docs/contract.md#worker-mode): the worker run's items by queue
 * state and by outcome, the shared rate, and the workers connected, by name.
 */
import type { Redis } from 'ioredis';
import { UsageError } from '../errors.js';
import type { ItemStatus } from '../types.js';
import { redactUrl as shownUrl } from '../util/redact-url.js';
import { openQueue, readRunMeta } from '../worker/queue.js';
import { readSharedRate } from '../worker/rate.js';
import { persistenceWarnings, redactUrl, redisUrl, withRedis } from '../worker/redis.js';
import { reportRows } from '../worker/report.js';
import type { CommandDeps } from './common.js';
import { parseFlags } from './parse.js';

/** The states `status` counts, in BullMQ's words. */
const STATES = ['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'] as const;

/** `kitchen-batch status --redis URL [--json]`: exit 0 whatever the run's state; 2 for usage, 3 for Redis. */
export async function statusCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('status', args);
  if (positionals.length > 0) throw new UsageError('usage: kitchen-batch status --redis URL [--json]');
  const url = redisUrl(values.redis, deps.env);
  return withRedis(url, async (connection) => {
    for (const warning of await persistenceWarnings(connection, url))
      deps.stderr.write(`warning: ${warning}\n`);
    const queue = openQueue(connection);
    try {
      return await report(connection, queue, url, values.json === true, deps);
    } finally {
      await queue.close();
    }
  });
}

async function report(
  connection: Redis,
  queue: ReturnType<typeof openQueue>,
  url: string,
  json: boolean,
  deps: CommandDeps,
): Promise<number> {
  const meta = await readRunMeta(connection);
  const counts = await queue.getJobCounts(...STATES);
  const seen = workerNames(await queue.getWorkers());
  const total = STATES.reduce((n, state) => n + (counts[state] ?? 0), 0);
  const outcomes = await itemOutcomes(connection);
  const rate = await readSharedRate(connection);
  if (json) {
    deps.stdout.write(
      `${JSON.stringify({ redis: redactUrl(url), out: meta?.out ?? null, items: total, counts, outcomes, rate, workers: seen })}\n`,
    );
    return 0;
  }
  if (!meta) {
    deps.stdout.write(
      `${redactUrl(url)}: no run enqueued here yet (kitchen-batch enqueue <manifest> --redis URL)\n`,
    );
    return 0;
  }
  deps.stdout.write(`run: ${shownUrl(meta.manifest)} → ${meta.out} (enqueued ${meta.created_at})\n`);
  const parts = STATES.filter((s) => (counts[s] ?? 0) > 0).map((s) => `${counts[s]} ${s}`);
  deps.stdout.write(`items: ${total}: ${parts.join(', ') || 'none'}\n`);
  deps.stdout.write(
    `outcomes: ${outcomes.succeeded} succeeded, ${outcomes.failed} failed, ${outcomes.rejected} rejected, ` +
      `${outcomes.incomplete} incomplete\n`,
  );
  deps.stdout.write(
    rate
      ? `rate: ${rate.rate.toFixed(2)} requests/s shared by the workers` +
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
async function itemOutcomes(connection: Redis): Promise<Record<ItemStatus, number>> {
  const outcomes: Record<ItemStatus, number> = { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 };
  for await (const item of reportRows(connection)) outcomes[item.status]++;
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
