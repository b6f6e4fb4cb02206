import type { ItemState } from '../state/state.js';
import type { Report, ReportItem, ReportTotals, RunStats } from '../types.js';

/** What the report says about a run beside its items. */
export interface RunInfo {
  manifest: string;
  base_url: string;
  started_at: string;
  finished_at: string;
  stats?: RunStats;
}

/** Default words for an item that has not finished, by where it stands. */
const UNFINISHED: Record<string, { code: string; message: string }> = {
  new: { code: 'not_submitted', message: 'not submitted yet; rerun the same command to continue' },
  accepted: {
    code: 'not_finished',
    message: 'the job was still running when the run ended; a rerun polls it',
  },
  succeeded: { code: 'download_failed', message: 'the job succeeded but its result is not downloaded yet' },
  unknown: {
    code: 'submit_unknown',
    message: 'the job was sent but its outcome is unknown; a rerun submits it again',
  },
};

/** One report row from an item's journal state (pure). */
export function reportItem(state: ItemState): ReportItem {
  const row = (status: ReportItem['status'], error: ReportItem['error']): ReportItem => ({
    id: state.id,
    image: state.image,
    module: state.module,
    style: state.style,
    status,
    job_id: state.jobId,
    output: status === 'succeeded' ? state.output : null,
    sha256: status === 'succeeded' ? state.sha256 : null,
    processing_time_ms: state.processingTimeMs,
    submissions: state.submissions,
    error,
  });
  switch (state.phase) {
    case 'downloaded':
      return row('succeeded', null);
    case 'failed':
      return row('failed', state.error);
    case 'rejected':
      return row('rejected', state.error);
    default:
      return row('incomplete', state.error ?? UNFINISHED[state.phase] ?? UNFINISHED.new!);
  }
}

/** Totals of docs/contract.md#report-json, `possible_duplicates` included (items with submissions > 1). */
export function totals(items: readonly ReportItem[]): ReportTotals {
  const t: ReportTotals = {
    items: items.length,
    succeeded: 0,
    failed: 0,
    rejected: 0,
    incomplete: 0,
    possible_duplicates: 0,
  };
  for (const item of items) {
    t[item.status]++;
    if (item.submissions > 1) t.possible_duplicates++;
  }
  return t;
}

/** Median and 95th percentile (nearest rank) of processing times; null when there are none. */
export function percentiles(items: readonly ReportItem[]): { p50: number | null; p95: number | null } {
  const times = items
    .map((i) => i.processing_time_ms)
    .filter((v): v is number => typeof v === 'number')
    .sort((a, b) => a - b);
  const rank = (q: number) =>
    times.length ? times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)]! : null;
  return { p50: rank(0.5), p95: rank(0.95) };
}

/** The whole report.json object from item states in manifest order (pure). */
export function buildReport(run: RunInfo, states: Iterable<ItemState>): Report {
  const items = [...states].map(reportItem);
  const { p50, p95 } = percentiles(items);
  const stats = run.stats
    ? { ...run.stats, processing_time_p50_ms: p50, processing_time_p95_ms: p95 }
    : undefined;
  return {
    run: {
      manifest: run.manifest,
      base_url: run.base_url,
      started_at: run.started_at,
      finished_at: run.finished_at,
      totals: totals(items),
      ...(stats ? { stats } : {}),
    },
    items,
  };
}
