/**
 * `run`'s monitoring exports from its flags and environment: the metrics fed by the run's events,
 * the textfile, the pushgateway and the pings (src/metrics/). Built before the run starts, ended
 * with the exit code the CLI will return, whatever ended the run.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { UsageError } from '../errors.js';
import { MetricsExporter, parseMetricLabels } from '../metrics/export.js';
import { RunMetrics } from '../metrics/registry.js';
import type { CommandDeps } from './common.js';

/** The flags this reads (`METRICS_FLAGS` in command-table.ts). */
export interface MetricsFlagValues {
  'metrics-file'?: string;
  pushgateway?: string;
  'metrics-label'?: string[];
  'ping-url'?: string;
}

/** The metrics and their exporter for one run; a flag wins over its environment variable. */
export function runExports(
  values: MetricsFlagValues,
  env: NodeJS.ProcessEnv,
  stderr: CommandDeps['stderr'],
): { metrics: RunMetrics; exporter: MetricsExporter; attachLog: (logger: Logger) => void } {
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
  const metrics = new RunMetrics(packageVersion());
  // Warnings go to stderr at once and to run.log once the run's folder is open (the start ping's
  // warning comes before it: kept until then).
  const log = new DeferredLog();
  const exporter = new MetricsExporter(
    metrics,
    {
      ...(file ? { file } : {}),
      ...(pushgateway ? { pushgateway, labels } : {}),
      ...(pingUrl ? { pingUrl } : {}),
    },
    (message) => {
      stderr.write(`warning: ${message}\n`);
      log.warn(message);
    },
  );
  return { metrics, exporter, attachLog: (logger) => log.attach(logger) };
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
