import os from 'node:os';
import path from 'node:path';
import { toOutputStore } from '../../storage/local-output.js';
import { localSources } from '../../storage/local-source.js';
import type { OutputStore, SourceStore } from '../../storage/types.js';
import type { ItemError, ItemStatus, Report, ReportItem } from '../../types.js';
import { wholeNumber } from '../../util/validate.js';
import { shownItem } from '../build.js';
import { ensureThumbnails, planThumbs, type ThumbJob, ThumbNames } from '../thumbs.js';
import { formatCount, formatDuration, formatTimestamp, percentile } from './format.js';
import { ERROR_HINTS } from './hints.js';
import { type HeaderModel, renderPage } from './page.js';

/** Options of {@link writeHtmlReport}. */
export interface HtmlReportOptions {
  /** The run's outputs (or its folder); `report.html` and `thumbs/` are written there. */
  outDir: OutputStore | string;
  /** Where the items' source images are read for their thumbnails. @default the local files */
  sources?: SourceStore;
  /** The report as in report.json. */
  report: Report;
  /** Reference of the item's source image (an absolute path), or null when unknown or missing (the card shows a placeholder). */
  sourcePath: (item: ReportItem) => string | null;
  /**
   * Long side of the thumbnails in pixels.
   * @default 320
   */
  thumbSize?: number;
  /**
   * Thumbnails made at once.
   * @default os.availableParallelism()
   */
  concurrency?: number;
  /** The "how to fix" hints by error code. @default ERROR_HINTS (a `run`'s words) */
  hints?: Readonly<Record<string, string>>;
}

/** What {@link writeHtmlReport} wrote. */
export interface HtmlReportResult {
  /** Where report.html is, as a user opens it (its absolute path for a local folder). */
  file: string;
  /** Thumbnails the page shows (made now or reused from an earlier call). */
  thumbnails: number;
}

/** Cards per page: enough to scan, few enough that 10,000 items never build 10,000 DOM nodes at once. */
const PAGE_SIZE = 60;

/** One item as the page script reads it (a compact view of {@link ReportItem}). */
interface PageItem {
  id: string;
  image: string;
  module: string;
  style: string | null;
  status: ItemStatus;
  ms: number | null;
  submissions: number;
  /** Submissions sent again while an earlier one's outcome was unknown; omitted when 0. */
  dup?: number;
  job: string | null;
  error: ItemError | null;
  /** What preflight did to the upload (report.json's `preflight`); omitted when nothing. */
  pre?: string[];
  /** Relative link to the full-size result, or null. */
  href: string | null;
  /** Relative URL of the source thumbnail, or null. */
  src: string | null;
  /** Relative URL of the result thumbnail, or null. */
  out: string | null;
  /** The result's review (report.json's `review`); omitted when it was not reviewed. */
  rv?: { score: number; flags: string[] };
}

/**
 * Writes `<outDir>/report.html`, a single self-contained page (inline CSS and JS, no network) with
 * the run's header, totals and one before/after card per item, plus its thumbnails in
 * `<outDir>/thumbs/`. Thumbnails newer than their source are reused; a missing or corrupt image
 * gets a placeholder, never an error. The page is written atomically.
 */
export async function writeHtmlReport(options: HtmlReportOptions): Promise<HtmlReportResult> {
  const thumbSize = wholeNumber('thumbSize', options.thumbSize, { min: 16, max: 4096 }, 320);
  const output = toOutputStore(options.outDir);
  // A bucket's PUTs wait on the network: four per core keep the cores busy meanwhile.
  const perCore = output.remote ? 4 : 1;
  const concurrency = wholeNumber(
    'concurrency',
    options.concurrency,
    { min: 1 },
    os.availableParallelism() * perCore,
  );
  const sources = options.sources ?? localSources;

  const names = new ThumbNames();
  const planned = options.report.items.map((item) => ({
    item,
    ...planThumbs(item, { output, names, sourcePath: options.sourcePath }),
  }));
  const jobs = planned.flatMap((p) => [p.srcJob, p.outJob].filter((j): j is ThumbJob => j !== null));
  const outcomes = await ensureThumbnails(jobs, { size: thumbSize, concurrency, sources, output });
  const thumbUrl = (job: ThumbJob | null): string | null => {
    const made = job ? outcomes.get(job.dest) : undefined;
    return made && made.state !== 'failed' ? `thumbs/${encodeURIComponent(path.basename(made.file))}` : null;
  };

  const items: PageItem[] = planned.map(({ item: whole, result, srcJob, outJob }) => {
    // The page shows the item with a URL's secrets redacted; its thumbnails were read from the whole one.
    const item = shownItem(whole);
    return {
      id: item.id,
      image: item.image,
      module: item.module,
      style: item.style,
      status: item.status,
      ms: item.processing_time_ms,
      submissions: item.submissions,
      ...(item.ambiguous_resends > 0 ? { dup: item.ambiguous_resends } : {}),
      job: item.job_id,
      error: item.error,
      ...(item.preflight.length > 0 ? { pre: item.preflight } : {}),
      ...(item.review ? { rv: item.review } : {}),
      href: result?.href ?? null,
      src: thumbUrl(srcJob),
      out: thumbUrl(outJob),
    };
  });
  const shown = new Set<string>();
  for (const i of items) for (const url of [i.src, i.out]) if (url) shown.add(url);

  const html = renderPage(buildHeader(options.report), {
    pageSize: PAGE_SIZE,
    hints: options.hints ?? ERROR_HINTS,
    items,
  });
  await output.put('report.html', html, { contentType: 'text/html; charset=utf-8' });
  return { file: output.describe('report.html'), thumbnails: shown.size };
}

/** `12.5/s`, or a dash. */
function perSecond(value: number | undefined): string {
  return typeof value === 'number' ? `${value.toFixed(value < 10 ? 2 : 1)}/s` : '—';
}

/** A figure with `digits` decimals, or a dash when the run has none. */
function fixed(value: number | null | undefined, digits: number): string {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

/** A share (0 to 1) as a percentage with `digits` decimals, or a dash when the run has none. */
function percent(value: number | null | undefined, digits: number): string {
  return typeof value === 'number' ? `${(100 * value).toFixed(digits)} %` : '—';
}

/** The header's figures: totals from report.json, timing from `run.stats` or, without it, from the items. */
export function buildHeader(report: Report): HeaderModel {
  const { run } = report;
  const t = run.totals;
  const stats = run.stats;
  const times = report.items
    .map((i) => i.processing_time_ms)
    .filter((ms): ms is number => typeof ms === 'number' && Number.isFinite(ms));
  const p50 = stats?.processing_time_p50_ms ?? percentile(times, 50);
  const p95 = stats?.processing_time_p95_ms ?? percentile(times, 95);
  const wall = Date.parse(run.finished_at) - Date.parse(run.started_at);
  const duration = stats?.duration_ms ?? (Number.isFinite(wall) && wall >= 0 ? wall : null);
  const count = (n: number | undefined): string => (typeof n === 'number' ? formatCount(n) : '—');
  const rate = t.items > 0 ? `${((100 * t.succeeded) / t.items).toFixed(1).replace(/\.0$/, '')} %` : '—';
  const shown = report.items.length;
  return {
    partial: shown < t.items ? { shown, total: t.items } : null,
    manifest: run.manifest,
    // Only base_url is shown: the report never carries the key, and nothing else about the service is needed.
    baseUrl: run.base_url,
    startedAt: { iso: run.started_at, text: formatTimestamp(run.started_at) },
    finishedAt: { iso: run.finished_at, text: formatTimestamp(run.finished_at) },
    duration: formatDuration(duration),
    tiles: [
      { key: 'items', label: 'Items', value: count(t.items) },
      { key: 'succeeded', label: 'Succeeded', value: count(t.succeeded), tone: 'succeeded' },
      { key: 'failed', label: 'Failed', value: count(t.failed), tone: 'failed' },
      { key: 'rejected', label: 'Rejected', value: count(t.rejected), tone: 'rejected' },
      { key: 'incomplete', label: 'Incomplete', value: count(t.incomplete), tone: 'incomplete' },
      { key: 'possible_duplicates', label: 'Possible duplicates', value: count(t.possible_duplicates) },
      { key: 'needs_review', label: 'Needs review', value: count(t.needs_review ?? 0) },
      { key: 'success_rate', label: 'Success rate', value: rate },
      { key: 'p50', label: 'Time p50', value: formatDuration(p50) },
      { key: 'p95', label: 'Time p95', value: formatDuration(p95) },
      { key: 'retries', label: 'Retries', value: count(stats?.retries) },
      { key: 'rate_limited', label: 'Rate limited (429)', value: count(stats?.rate_limited) },
      // What the key allowed: the rate the run used and learnt, and what each job cost.
      ...(stats?.api_requests === undefined
        ? []
        : [
            { key: 'rate_used', label: 'API rate used', value: perSecond(stats.rate_used) },
            { key: 'rate_learnt', label: 'Rate learnt', value: perSecond(stats.rate_learnt) },
            {
              key: 'requests_per_job',
              label: 'API requests per job',
              value: fixed(stats.requests_per_job, 2),
            },
            { key: 'rate_limited_share', label: '429 share', value: percent(stats.rate_limited_share, 1) },
            { key: 'polls_per_job', label: 'Polls per job', value: fixed(stats.polls_per_job, 2) },
            {
              key: 'first_poll_hit_share',
              label: 'Done at first poll',
              value: percent(stats.first_poll_hit_share, 0),
            },
          ]),
    ],
  };
}
