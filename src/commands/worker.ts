/**
 * `kitchen-batch worker --redis URL [--concurrency N] [--until-drained]` (docs/contract.md#worker-mode):
 * works on the items `enqueue` queued, beside any number of other workers.
 */
import { serviceConfig, sourceFlagOptions } from '../config.js';
import { EXIT, UsageError } from '../errors.js';
import { CONCURRENCY, MAX_SIDE } from '../limits.js';
import { LOG_LEVELS } from '../pipeline/options.js';
import { resolveSourceAccess } from '../pipeline/source-access.js';
import { redactUrlsInText } from '../util/redact-url.js';
import {
  fractionFlag,
  intFlag,
  oneOf,
  rateFlag,
  secondsAtLeast,
  secondsFlag,
  wholeNumber,
} from '../util/validate.js';
import { queueName } from '../worker/queue.js';
import { redisUrl } from '../worker/redis.js';
import { runWorker, type WorkerEvent, type WorkerSummary } from '../worker/run.js';
import { flagLabel } from './command-table.js';
import type { CommandDeps } from './common.js';
import { workerEndpoint } from './metrics-endpoint.js';
import { parseFlags } from './parse.js';

const USAGE =
  'usage: kitchen-batch worker --redis URL [--queue NAME] [--concurrency N] [--until-drained] [--max-rate R] [--stall-timeout S] [--grace S] [--json]';

/**
 * Exit 0 when the worker did its job (with `--until-drained`: the queue is drained), whatever the
 * items' outcomes: they are the run's, in `report --redis` (exit 1 when not every item succeeded)
 * and `status`. Non-zero only for the worker's own faults: 130 when a signal stopped it (its items
 * handed back), 2 for usage, 3 as for `run` (key refused, service unreachable, Redis unreachable).
 */
export async function workerCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('worker', args);
  if (positionals.length > 0) throw new UsageError(USAGE);
  const url = redisUrl(values.redis, deps.env);
  const queue = queueName(values.queue, deps.env);
  // The same checks and messages as `run`'s flags, with the same bounds (src/limits.ts).
  const concurrency = wholeNumber('--concurrency', intFlag('concurrency', values.concurrency), CONCURRENCY);
  const maxRate = rateFlag('max-rate', values['max-rate']);
  const stall = secondsAtLeast('stall-timeout', values['stall-timeout'], 1);
  const grace = secondsAtLeast('grace', values.grace, 0);
  const jobTimeoutMs = secondsFlag('job-timeout', values['job-timeout']);
  const maxSide = wholeNumber('--max-side', intFlag('max-side', values['max-side']), MAX_SIDE);
  const threshold = fractionFlag('review-threshold', values['review-threshold']);
  const logLevel = oneOf('--log-level', values['log-level'], LOG_LEVELS, 'info');
  // Checked now (a bad KITCHEN_MAX_SOURCE_BYTES is exit 2 before Redis is reached), as run checks it.
  const sources = resolveSourceAccess(sourceFlagOptions(values, deps.env), flagLabel);
  const config = serviceConfig(values, deps.env);
  for (const warning of config.warnings) deps.stderr.write(`warning: ${warning}\n`);
  if (!config.baseUrl || !config.apiKey) {
    // Name exactly what is missing, each with its flag.
    const missing = [
      ...(config.baseUrl ? [] : ['the service URL (set KITCHEN_API_BASE_URL or pass --base-url)']),
      ...(config.apiKey ? [] : ['the API key (set KITCHEN_API_KEY or pass --api-key-file)']),
    ];
    throw new UsageError(`the worker needs ${missing.join(' and ')}`);
  }
  const say = (line: string) => {
    if (!values.json) deps.stderr.write(`${redactUrlsInText(line)}\n`);
  };
  const served = await workerEndpoint(values, deps);
  const monitor = served?.monitor;
  try {
    const summary = await runWorker({
      redisUrl: url,
      queue,
      service: {
        baseUrl: config.baseUrl,
        apiKey: config.apiKey,
        ...(maxRate !== undefined ? { governor: { maxRate } } : {}),
      },
      ...(concurrency !== undefined ? { concurrency } : {}),
      sources: monitor ? { ...sources, onStoreOp: monitor.onStoreOp } : sources,
      untilDrained: values['until-drained'] ?? false,
      ...(stall !== undefined ? { stallTimeoutMs: stall } : {}),
      ...(grace !== undefined ? { graceMs: grace } : {}),
      ...(jobTimeoutMs !== undefined ? { jobTimeoutMs } : {}),
      preflight: {
        keepMetadata: values['keep-metadata'] ?? false,
        ...(maxSide !== undefined ? { maxSide } : {}),
      },
      review: { enabled: !values['no-review'], ...(threshold !== undefined ? { threshold } : {}) },
      logLevel,
      ...(values.name ? { name: values.name } : {}),
      signals: {
        ...(deps.signal ? { stop: deps.signal } : {}),
        ...(deps.hardSignal ? { abort: deps.hardSignal } : {}),
      },
      onEvent: (event) => {
        monitor?.onWorkerEvent(event);
        const line = describe(event);
        if (line !== null) say(line);
      },
      ...(monitor ? { monitor } : {}),
    });
    deps.stdout.write(summaryLine(summary, values.json ?? false));
    return summary.interrupted ? EXIT.interrupted : EXIT.ok;
  } finally {
    monitor?.stopped();
    await monitor?.close();
    await served?.endpoint.close();
  }
}

/** The event's line on stderr, or null for one that is only counted (a submission). */
function describe(event: WorkerEvent): string | null {
  switch (event.type) {
    case 'submitted':
      return null;
    case 'start':
      return `worker ${event.name}: working for ${event.outDir} (log: ${event.log})`;
    case 'warning':
      return `warning: ${event.message}`;
    case 'item':
      return `${event.status.padEnd(11)} ${event.id}${event.error ? `: ${event.error.code} ${event.error.message}` : ''}`;
  }
}

function summaryLine(summary: WorkerSummary, json: boolean): string {
  const c = summary.counts;
  if (json)
    return `${JSON.stringify({ worker: summary.name, out_dir: summary.outDir, counts: c, handed_back: summary.handedBack, drained: summary.drained, interrupted: summary.interrupted })}\n`;
  return (
    `worker ${summary.name}: ${c.succeeded} succeeded, ${c.failed} failed, ${c.rejected} rejected, ${c.incomplete} incomplete` +
    `${summary.handedBack ? `, ${summary.handedBack} handed back` : ''}${summary.drained ? '; the queue is drained' : ''}${summary.interrupted ? `; stopped (${summary.interrupted})` : ''}\n`
  );
}
