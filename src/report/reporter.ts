import type { ServiceGate } from '../api/gate.js';
import type { FlowCounts, ProgressCounts, RunEvent } from '../pipeline/events.js';
import type { ItemStore } from '../state/items.js';
import type { JournalRecord } from '../state/records.js';
import type { OutputStore } from '../storage/types.js';
import type { ItemError, ReportItem } from '../types.js';
import { isoWithOffset, monotonicMs } from '../util/time.js';
import { isUnfinishedDefault, type RunInfo, reportRows } from './build.js';
import { type WrittenReport, writeReports } from './write.js';

/** The rows, with the run's `--max-duration` as the reason of those left unfinished without one. */
async function* withWindow(
  rows: AsyncIterable<ReportItem>,
  expired: ItemError | null,
): AsyncGenerator<ReportItem> {
  for await (const row of rows) {
    yield expired && row.status === 'incomplete' && isUnfinishedDefault(row.error)
      ? { ...row, error: expired }
      : row;
  }
}

/** What {@link RunReporter} reads. */
export interface ReporterDeps {
  manifest: string;
  manifestDir: string;
  /** The run's outputs: the reports are written there, the plan file read from there. */
  output: OutputStore;
  baseUrl: string;
  /** The run's item count (after sharding). */
  total: number;
  /** The run's `plan` record: its items, in order, for the report's rows. */
  plan: Extract<JournalRecord, { t: 'plan' }>;
  /** The run's items: counts for progress, and each item's state for the report's rows. */
  store: ItemStore;
  gate: ServiceGate;
  /** Poll counts of this run (PollScheduler.stats). */
  polls: { readonly jobs: number; readonly polls: number; readonly firstHits: number };
  flow: {
    readonly counts: Readonly<FlowCounts>;
    readonly submitted: number;
    /** Set when `--max-duration` ended the run: the error of every item it left unfinished. */
    readonly expired: ItemError | null;
  };
  emit: (event: RunEvent) => void;
  /** Write report.html with the final report. */
  html: boolean;
  reportIntervalMs: number;
  progressIntervalMs: number;
}

/**
 * The run's reports and progress: report.json/csv refreshed while the run goes (so a crash leaves a
 * recent one; a refresh never takes more than a tenth of the time, however big the catalogue),
 * `progress` events for the display, and the final reports.
 */
export class RunReporter {
  readonly startedAt = isoWithOffset();
  readonly #startedMono = monotonicMs();
  readonly #deps: ReporterDeps;
  #progress: NodeJS.Timeout | undefined;
  #refresh: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: ReporterDeps) {
    this.#deps = deps;
  }

  /** Starts the periodic report refresh and progress events. */
  start(): void {
    this.#progress = setInterval(() => this.progress(), this.#deps.progressIntervalMs);
    this.#scheduleRefresh(this.#deps.reportIntervalMs);
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#progress);
    clearTimeout(this.#refresh);
  }

  /** Emits a `progress` event now. */
  progress(): void {
    this.#deps.emit({ type: 'progress', counts: this.counts() });
  }

  /** Counts for progress displays (kept by the store as items change: no walk over the items). */
  counts(): ProgressCounts {
    const { total, store, gate, flow } = this.#deps;
    const succeeded = store.count('downloaded');
    const failed = store.count('failed');
    const rejected = store.count('rejected');
    const s = gate.stats;
    return {
      total,
      ...flow.counts,
      succeeded,
      failed,
      rejected,
      incomplete: total - succeeded - failed - rejected,
      requests: s.requests,
      rateLimited: s.rateLimited,
      retries: s.retries,
      rate: gate.rate,
      elapsedMs: monotonicMs() - this.#startedMono,
    };
  }

  /** Writes report.json and report.csv (and report.html when `final` and asked for). */
  async write(final: boolean): Promise<WrittenReport> {
    const { output, plan, store, gate, flow, polls } = this.#deps;
    const stats = gate.stats;
    const durationMs = Math.round(monotonicMs() - this.#startedMono);
    const round = (value: number, places: number) => Number(value.toFixed(places));
    const info: RunInfo = {
      manifest: this.#deps.manifest,
      base_url: this.#deps.baseUrl,
      started_at: this.startedAt,
      finished_at: isoWithOffset(),
      stats: {
        duration_ms: durationMs,
        requests: stats.requests,
        retries: stats.retries,
        rate_limited: stats.rateLimited,
        processing_time_p50_ms: null,
        processing_time_p95_ms: null,
        api_requests: stats.api,
        requests_per_job: flow.submitted > 0 ? round(stats.api / flow.submitted, 2) : null,
        rate_limited_share: stats.api > 0 ? round(stats.rateLimited / stats.api, 4) : null,
        rate_used: round(stats.api / Math.max(durationMs / 1000, 0.001), 2),
        rate_learnt: round(gate.learntRate, 2),
        polls_per_job: polls.jobs > 0 ? round(polls.polls / polls.jobs, 2) : null,
        first_poll_hit_share: polls.jobs > 0 ? round(polls.firstHits / polls.jobs, 4) : null,
      },
    };
    return writeReports(
      output,
      { info, rows: () => withWindow(reportRows(output, plan, store), flow.expired) },
      { html: final && this.#deps.html, manifestDir: this.#deps.manifestDir },
    );
  }

  #scheduleRefresh(ms: number): void {
    if (this.#stopped) return;
    this.#refresh = setTimeout(async () => {
      const started = monotonicMs();
      await this.write(false).catch(() => {});
      this.#scheduleRefresh(Math.max(this.#deps.reportIntervalMs, 10 * (monotonicMs() - started)));
    }, ms);
    this.#refresh.unref();
  }
}
