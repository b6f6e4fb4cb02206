/**
 * Where the run's metrics go: a textfile for node_exporter, a Prometheus pushgateway, and pings to a
 * dead man's switch (healthchecks.io convention). None of them may fail a run: every failure is a
 * warning through `warn`, and no secret goes out (the metrics carry no key; URLs in warnings are
 * redacted).
 */
import { randomBytes } from 'node:crypto';
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { redactUrl } from '../util/redact-url.js';
import type { RunMetrics } from './registry.js';

/** The grouping key's job, and how often the file and the gateway are refreshed while a run goes. */
export const PUSH_JOB = 'kitchen-batch';
export const EXPORT_INTERVAL_MS = 60_000;
/** A ping's time limit and tries: a slow monitor must not hold a finished run. */
const PING_TIMEOUT_MS = 5_000;
const PING_ATTEMPTS = 2;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** What `run` was asked to export. */
export interface MetricsTargets {
  file?: string;
  pushgateway?: string;
  /** Extra grouping-key labels for the pushgateway (`--metrics-label name=value`). */
  labels?: Record<string, string>;
  pingUrl?: string;
}

/**
 * `--metrics-label name=value` values as labels; throws naming the bad one (a usage error for the
 * caller). `job` is ours, and names starting with `__` are Prometheus's.
 */
export function parseMetricLabels(values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const text of values) {
    const eq = text.indexOf('=');
    const name = eq < 0 ? text : text.slice(0, eq);
    if (
      eq < 0 ||
      !LABEL_NAME.test(name) ||
      name.startsWith('__') ||
      name === 'job' ||
      eq === text.length - 1
    ) {
      throw new Error(
        `--metrics-label "${text}": expected name=value with a label name of letters, digits and _ (not job, not starting with __) and a value`,
      );
    }
    labels[name] = text.slice(eq + 1);
  }
  return labels;
}

/** Writes the whole set for node_exporter's textfile collector: a temp file beside it, then a rename. */
export async function writeMetricsFile(file: string, text: string): Promise<void> {
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(temp, text);
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw new Error(`cannot write the metrics file ${file}: ${(error as Error).message}`);
  }
}

/** The pushgateway URL of our grouping key: `/metrics/job/kitchen-batch/<name>/<value>…`. */
export function groupingUrl(base: string, labels: Record<string, string> = {}): string {
  let url = `${base.replace(/\/+$/, '')}/metrics/job/${encodeURIComponent(PUSH_JOB)}`;
  for (const [name, value] of Object.entries(labels)) {
    // The pushgateway's base64 form (`name@base64/…`) carries any value, "/" and empty included.
    url += `/${name}@base64/${Buffer.from(value).toString('base64url')}`;
  }
  return url;
}

/**
 * Pushes metrics with POST. The pushgateway README: PUT replaces every metric of the grouping key,
 * POST replaces only metrics with the names pushed. Prometheus's documented batch-job pattern (the
 * client libraries' `pushAdd` examples): the last-success gauge is added only on success and pushed
 * with POST, so a failed run does not overwrite the previous success. So every push is a POST, and
 * `kitchen_batch_last_success_timestamp_seconds` is pushed (by a separate POST) only after exit 0.
 */
export async function pushMetrics(url: string, text: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain; version=0.0.4' },
      body: text,
      signal: AbortSignal.timeout(PING_TIMEOUT_MS * 2),
    });
  } catch (error) {
    throw new Error(`cannot push metrics to ${redactUrl(url)}: ${(error as Error).message}`);
  }
  const body = await response.text();
  if (!response.ok) {
    throw new Error(`pushgateway ${redactUrl(url)} answered ${response.status}: ${body.slice(0, 200)}`);
  }
}

/**
 * GETs `<url>/<suffix>` (`start`, or the exit code), two tries of 5 s each. Resolves with a
 * warning's text when both fail, else null: a ping never fails the run.
 */
export async function ping(url: string, suffix: string): Promise<string | null> {
  const target = `${url.replace(/\/+$/, '')}/${suffix}`;
  let last = '';
  for (let attempt = 1; attempt <= PING_ATTEMPTS; attempt++) {
    try {
      const response = await fetch(target, { signal: AbortSignal.timeout(PING_TIMEOUT_MS) });
      await response.arrayBuffer();
      if (response.ok) return null;
      last = `answered ${response.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
  }
  return `ping ${redactUrl(target)} failed: ${last}`;
}

/**
 * The exports of one run: `start()` pings and starts the 60 s refresh, `end(code)` stops it, writes
 * and pushes the final set (with the success timestamp on exit 0) and pings the exit code. Pings
 * alone need no metrics: `metrics` may then be null.
 */
export class MetricsExporter {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly metrics: RunMetrics | null,
    private readonly targets: MetricsTargets,
    private readonly warn: (message: string) => void,
  ) {
    if (!metrics && (targets.file || targets.pushgateway)) {
      throw new Error('a metrics file or a pushgateway needs the metrics');
    }
  }

  /** True when any export was asked for. */
  get active(): boolean {
    const t = this.targets;
    return Boolean(t.file || t.pushgateway || t.pingUrl);
  }

  async start(): Promise<void> {
    if (this.targets.pingUrl) this.report(await ping(this.targets.pingUrl, 'start'));
    if (this.targets.file || this.targets.pushgateway) {
      this.timer = setInterval(() => void this.flush(null), EXPORT_INTERVAL_MS);
      this.timer.unref();
    }
  }

  async end(exitCode: number): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush(exitCode);
    if (this.targets.pingUrl) this.report(await ping(this.targets.pingUrl, String(exitCode)));
  }

  /** Writes and pushes the whole set; on a final exit 0 the success timestamp too. */
  private async flush(exitCode: number | null): Promise<void> {
    const { file, pushgateway, labels } = this.targets;
    if (!this.metrics || !(file || pushgateway)) return;
    const text = await this.metrics.text();
    const success = exitCode === 0 ? await this.metrics.successText() : '';
    if (file) {
      try {
        await writeMetricsFile(file, text + success);
      } catch (error) {
        this.warn((error as Error).message);
      }
    }
    if (pushgateway) {
      const url = groupingUrl(pushgateway, labels);
      try {
        await pushMetrics(url, text);
        if (success) await pushMetrics(url, success);
      } catch (error) {
        this.warn((error as Error).message);
      }
    }
  }

  private report(warning: string | null): void {
    if (warning) this.warn(warning);
  }
}
