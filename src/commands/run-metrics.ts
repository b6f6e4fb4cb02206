/**
 * `run`'s monitoring exports from its flags and environment: the metrics fed by the run's events,
 * the textfile, the pushgateway and the pings (src/metrics/). Built before the run starts, ended
 * with the exit code the CLI will return, whatever ended the run. The metrics, and prom-client with
 * them, are made only when something reads them: a run that exports nothing never loads it.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { UsageError } from '../errors.js';
import { MetricsExporter, type MetricsTargets, parseMetricLabels } from '../metrics/export.js';
import type { RunMetrics } from '../metrics/registry.js';
import type { CommandDeps } from './common.js';

/** The flags this reads (`METRICS_FLAGS` in command-table.ts). */
export interface MetricsFlagValues {
  'metrics-file'?: string;
  pushgateway?: string;
  'metrics-label'?: string[];
  'ping-url'?: string;
}

/** What `run` is asked to export, checked (usage errors); a flag wins over its environment variable. */
export function exportTargets(values: MetricsFlagValues, env: NodeJS.ProcessEnv): MetricsTargets {
  let labels: Record<string, string>;
  try {
    labels = parseMetricLabels(values['metrics-label'] ?? []);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const file = values['metrics-file'] ?? (env.KITCHEN_METRICS_FILE?.trim() || undefined);
  const pushgateway = values.pushgateway ?? (env.KITCHEN_PUSHGATEWAY?.trim() || undefined);
  const pingUrl = values['ping-url'] ?? (env.KITCHEN_PING_URL?.trim() || undefined);
  for (const [flag, url] of [
    ['--pushgateway', pushgateway],
    ['--ping-url', pingUrl],
  ] as const) {
    if (url !== undefined && !/^https?:\/\/[^/]/.test(url)) {
      throw new UsageError(`${flag}: expected an http(s) URL, got "${url.replace(/[?#].*/, '')}"`);
    }
  }
  return {
    ...(file ? { file } : {}),
    ...(pushgateway ? { pushgateway, labels } : {}),
    ...(pingUrl ? { pingUrl } : {}),
  };
}

/** Whether the targets read the metrics (a ping only says that the run started and how it ended). */
export function readsMetrics(targets: MetricsTargets): boolean {
  return Boolean(targets.file || targets.pushgateway);
}

/** A process's metrics, prom-client loaded now: for a run that exports or serves them, or a worker that serves them. */
export async function createRunMetrics(): Promise<RunMetrics> {
  const { RunMetrics } = await import('../metrics/registry.js');
  return new RunMetrics(packageVersion());
}

/**
 * The exporter of one run's `targets`; `metrics` is null when nothing reads them. Its warnings go to
 * stderr at once and to run.log once the run's folder is open (`attachLog`).
 */
export function runExporter(
  metrics: RunMetrics | null,
  targets: MetricsTargets,
  stderr: CommandDeps['stderr'],
): { exporter: MetricsExporter; attachLog: (logger: Logger) => void } {
  // The start ping's warning comes before the run's folder is open: kept until then.
  const log = new DeferredLog();
  const exporter = new MetricsExporter(metrics, targets, (message) => {
    stderr.write(`warning: ${message}\n`);
    log.warn(message);
  });
  return { exporter, attachLog: (logger) => log.attach(logger) };
}

/** Warnings for run.log, kept until the run's logger is there. */
class DeferredLog {
  #logger: Logger | null = null;
  readonly #pending: string[] = [];

  warn(message: string): void {
    if (this.#logger) this.#logger.warn({ event: 'monitoring_warning' }, message);
    else this.#pending.push(message);
  }

  attach(logger: Logger): void {
    this.#logger = logger;
    for (const message of this.#pending.splice(0)) this.warn(message);
  }
}

/** The version `kitchen_batch_build_info` carries. */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
