import { type PlanEntry, planEntries } from '../state/plan-file.js';
import type { JournalRecord } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import type { StateLookup } from '../state/table.js';
import type { OutputStore } from '../storage/types.js';
import type { ItemError, Report, ReportItem, ReportTotals, RunStats } from '../types.js';
import { grown } from '../util/packed.js';
import { redactUrl, redactUrlsInText } from '../util/redact-url.js';

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

/** Whether an item's error is only the default words for where it stands (nothing said why). */
export function isUnfinishedDefault(error: ItemError | null): boolean {
  return (
    error === null ||
    Object.values(UNFINISHED).some((u) => u.code === error.code && u.message === error.message)
  );
}

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
    preflight: state.preflight ?? [],
    review: status === 'succeeded' ? state.review : null,
    // A state stored in Redis by an earlier version has no such field.
    ambiguous_resends: state.ambiguousResends ?? 0,
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

/**
 * The row of a planned item the run never reached (no journal state yet); `error` says so in the
 * words of the mode (worker mode: no worker has reached it).
 */
export function unplannedItem(entry: PlanEntry, error: ItemError = UNFINISHED.new!): ReportItem {
  return {
    id: entry.id,
    image: entry.image,
    module: entry.module,
    style: entry.style,
    status: 'incomplete',
    job_id: null,
    output: null,
    sha256: null,
    processing_time_ms: null,
    submissions: 0,
    error,
    preflight: [],
    review: null,
    ambiguous_resends: 0,
  };
}

/**
 * An item as the reports show it (docs/contract.md#secrets-in-urls): its `image` and any URL its
 * error message quotes with the secret query parameters (a pre-signed URL's signature, `token`,
 * `key`...) as `***`. The journal and Redis keep the URL whole (a rerun needs it); report.json,
 * report.csv, report.html and the summaries print this. The same object back when there is no URL,
 * so the cost for a catalogue of local files is two `includes` per row.
 */
export function shownItem(item: ReportItem): ReportItem {
  const { error } = item;
  const quotes = error?.message.includes('://') ?? false;
  if (!item.image.includes('://') && !quotes) return item;
  return {
    ...item,
    image: redactUrl(item.image),
    ...(quotes && error ? { error: { ...error, message: redactUrlsInText(error.message) } } : {}),
  };
}

/** Totals of no items. */
export function emptyTotals(): ReportTotals {
  return {
    items: 0,
    succeeded: 0,
    failed: 0,
    rejected: 0,
    incomplete: 0,
    possible_duplicates: 0,
    needs_review: 0,
  };
}

/**
 * Totals of docs/contract.md#report-json (`possible_duplicates` included: items sent again while an
 * earlier send's outcome was unknown, `ambiguous_resends` > 0) and the processing-time percentiles, counted row by row: a report of 10^6 items keeps one
 * number per item, not the rows.
 */
export class Tally {
  readonly totals: ReportTotals = emptyTotals();
  /** Processing times, outside the JavaScript heap (8 bytes an item). */
  #times = new Float64Array(1024);
  #count = 0;

  add(item: ReportItem): void {
    this.totals.items++;
    this.totals[item.status]++;
    if (item.ambiguous_resends > 0) this.totals.possible_duplicates++;
    if (item.review && item.review.flags.length > 0) this.totals.needs_review++;
    if (typeof item.processing_time_ms === 'number') this.#time(item.processing_time_ms);
  }

  /** Adds the counts of another tally (the parts of a merged report). */
  merge(other: Tally): void {
    for (const key of Object.keys(this.totals) as (keyof ReportTotals)[])
      this.totals[key] += other.totals[key];
    for (const ms of other.#times.subarray(0, other.#count)) this.#time(ms);
  }

  #time(ms: number): void {
    if (this.#count === this.#times.length) this.#times = grown(this.#times, this.#count * 2);
    this.#times[this.#count++] = ms;
  }

  /** Median and 95th percentile (nearest rank) of processing times; null when there are none. */
  percentiles(): { p50: number | null; p95: number | null } {
    const times = this.#times.slice(0, this.#count).sort();
    const rank = (q: number) =>
      times.length ? times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)]! : null;
    return { p50: rank(0.5), p95: rank(0.95) };
  }

  /** report.json's `run` object: the run's facts with these totals (and percentiles in `stats`). */
  header(run: RunInfo): Report['run'] {
    const { p50, p95 } = this.percentiles();
    const stats = run.stats
      ? { ...run.stats, processing_time_p50_ms: p50, processing_time_p95_ms: p95 }
      : undefined;
    return {
      // A manifest at a pre-signed URL: its signature is not for the report (#secrets-in-urls).
      manifest: redactUrlsInText(run.manifest),
      base_url: run.base_url,
      started_at: run.started_at,
      finished_at: run.finished_at,
      totals: { ...this.totals },
      ...(stats ? { stats } : {}),
    };
  }
}

/**
 * A run's rows in plan order: the journal's state of each planned item, or the plan's own words for
 * an item the run never reached.
 */
export async function* reportRows(
  dir: OutputStore | string,
  plan: Extract<JournalRecord, { t: 'plan' }> | undefined,
  states: StateLookup,
): AsyncGenerator<ReportItem> {
  for await (const entry of planEntries(dir, plan, states)) {
    const state = states.get(entry.id);
    yield state ? reportItem(state) : unplannedItem(entry);
  }
}

/** Totals of items held in memory (see {@link Tally}). */
export function totals(items: readonly ReportItem[]): ReportTotals {
  const tally = new Tally();
  for (const item of items) tally.add(item);
  return tally.totals;
}
