import type { ServiceGate } from '../api/gate.js';
import { buildReport } from '../report/build.js';
import { writeReports } from '../report/write.js';
import type { ItemStore } from '../state/items.js';
import { newItemState } from '../state/state.js';
import type { Item, Report } from '../types.js';
import { isoWithOffset, monotonicMs } from '../util/time.js';
import type { ProgressCounts, RunEvent } from './events.js';
import type { FlowCounts } from './flow.js';

/** What {@link RunReporter} reads. */
export interface ReporterDeps {
  manifest: string;
  manifestDir: string;
  outDir: string;
  baseUrl: string;
  /** The run's items in manifest order (after sharding). */
  items: readonly Item[];
  store: ItemStore;
  gate: ServiceGate;
  flow: { readonly counts: Readonly<FlowCounts> };
  emit: (event: RunEvent) => void;
  /** Write report.html with the final report. */
  html: boolean;
  reportIntervalMs: number;
  progressIntervalMs: number;
}

/**
 * The run's reports and progress: report.json/csv refreshed while the run goes (so a crash leaves a
 * recent one), `progress` events for the display, and the final reports.
 */
export class RunReporter {
  readonly startedAt = isoWithOffset();
  readonly #startedMono = monotonicMs();
  readonly #deps: ReporterDeps;
  #timers: NodeJS.Timeout[] = [];

  constructor(deps: ReporterDeps) {
    this.#deps = deps;
  }

  /** Starts the periodic report refresh and progress events. */
  start(): void {
    const { reportIntervalMs, progressIntervalMs } = this.#deps;
    this.#timers = [
      setInterval(() => void this.write(false).catch(() => {}), reportIntervalMs),
      setInterval(() => this.progress(), progressIntervalMs),
    ];
  }

  stop(): void {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers = [];
  }

  /** Emits a `progress` event now. */
  progress(): void {
    this.#deps.emit({ type: 'progress', counts: this.counts() });
  }

  /** Counts for progress displays. */
  counts(): ProgressCounts {
    const { items, store, gate, flow } = this.#deps;
    const c = { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 };
    // Cheap enough per second for 10^5 items; avoids a second bookkeeping that could drift.
    for (const item of items) {
      const phase = store.get(item.id)?.phase;
      if (phase === 'downloaded') c.succeeded++;
      else if (phase === 'failed') c.failed++;
      else if (phase === 'rejected') c.rejected++;
    }
    c.incomplete = items.length - c.succeeded - c.failed - c.rejected;
    const s = gate.stats;
    return {
      total: items.length,
      ...flow.counts,
      ...c,
      requests: s.requests,
      rateLimited: s.rateLimited,
      retries: s.retries,
      rate: gate.rate,
      elapsedMs: monotonicMs() - this.#startedMono,
    };
  }

  /** Writes report.json and report.csv (and report.html when `final` and asked for). */
  async write(final: boolean): Promise<Report> {
    const { items, store, gate } = this.#deps;
    const states = items.map(
      (item) =>
        store.get(item.id) ??
        newItemState({
          t: 'item',
          id: item.id,
          fp: '',
          image: item.image,
          module: item.module,
          style: item.style ?? null,
          src: null,
        }),
    );
    const stats = gate.stats;
    const report = buildReport(
      {
        manifest: this.#deps.manifest,
        base_url: this.#deps.baseUrl,
        started_at: this.startedAt,
        finished_at: isoWithOffset(),
        stats: {
          duration_ms: Math.round(monotonicMs() - this.#startedMono),
          requests: stats.requests,
          retries: stats.retries,
          rate_limited: stats.rateLimited,
          processing_time_p50_ms: null,
          processing_time_p95_ms: null,
        },
      },
      states,
    );
    await writeReports(this.#deps.outDir, report, {
      html: final && this.#deps.html,
      manifestDir: this.#deps.manifestDir,
    });
    return report;
  }
}
