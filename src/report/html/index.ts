import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ItemError, ItemStatus, Report, ReportItem } from '../../types.js';
import { writeFileAtomic } from '../../util/fs.js';
import { safeId } from '../../util/ids.js';
import { wholeNumber } from '../../util/validate.js';
import { ensureThumbnails, type ThumbJob } from '../thumbs.js';
import { formatCount, formatDuration, formatTimestamp, percentile } from './format.js';
import { ERROR_HINTS } from './hints.js';
import { type HeaderModel, renderPage } from './page.js';

/** Options of {@link writeHtmlReport}. */
export interface HtmlReportOptions {
  /** The run's output folder; `report.html` and `thumbs/` are written here. */
  outDir: string;
  /** The report as in report.json. */
  report: Report;
  /** Absolute path of the item's source image, or null when unknown or missing (the card shows a placeholder). */
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
}

/** What {@link writeHtmlReport} wrote. */
export interface HtmlReportResult {
  /** Absolute path of report.html. */
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
  job: string | null;
  error: ItemError | null;
  /** Relative link to the full-size result, or null. */
  href: string | null;
  /** Relative URL of the source thumbnail, or null. */
  src: string | null;
  /** Relative URL of the result thumbnail, or null. */
  out: string | null;
}

/**
 * Writes `<outDir>/report.html`, a single self-contained page (inline CSS and JS, no network) with
 * the run's header, totals and one before/after card per item, plus its thumbnails in
 * `<outDir>/thumbs/`. Thumbnails newer than their source are reused; a missing or corrupt image
 * gets a placeholder, never an error. The page is written atomically.
 */
export async function writeHtmlReport(options: HtmlReportOptions): Promise<HtmlReportResult> {
  const thumbSize = wholeNumber('thumbSize', options.thumbSize, { min: 16, max: 4096 }, 320);
  const concurrency = wholeNumber('concurrency', options.concurrency, { min: 1 }, os.availableParallelism());
  const outDir = path.resolve(options.outDir);
  const thumbsDir = path.join(outDir, 'thumbs');
  await mkdir(thumbsDir, { recursive: true });

  const names = new ThumbNames();
  const planned = options.report.items.map((item) => {
    const source = safeSourcePath(options.sourcePath, item);
    const result = resultPath(outDir, item.output);
    return {
      item,
      result,
      srcJob: source ? { source, dest: path.join(thumbsDir, names.forSource(source)) } : null,
      outJob: result
        ? { source: result.file, dest: path.join(thumbsDir, names.forResult(result.file)) }
        : null,
    };
  });
  const jobs = planned.flatMap((p) => [p.srcJob, p.outJob].filter((j): j is ThumbJob => j !== null));
  const outcomes = await ensureThumbnails(jobs, { size: thumbSize, concurrency });
  const thumbUrl = (job: ThumbJob | null): string | null =>
    job && outcomes.get(job.dest) !== 'failed'
      ? `thumbs/${encodeURIComponent(path.basename(job.dest))}`
      : null;

  const items: PageItem[] = planned.map(({ item, result, srcJob, outJob }) => ({
    id: item.id,
    image: item.image,
    module: item.module,
    style: item.style,
    status: item.status,
    ms: item.processing_time_ms,
    submissions: item.submissions,
    job: item.job_id,
    error: item.error,
    href: result?.href ?? null,
    src: thumbUrl(srcJob),
    out: thumbUrl(outJob),
  }));
  const shown = new Set<string>();
  for (const i of items) for (const url of [i.src, i.out]) if (url) shown.add(url);

  const html = renderPage(buildHeader(options.report), { pageSize: PAGE_SIZE, hints: ERROR_HINTS, items });
  const file = path.join(outDir, 'report.html');
  await writeFileAtomic(file, html);
  return { file, thumbnails: shown.size };
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
  return {
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
      { key: 'success_rate', label: 'Success rate', value: rate },
      { key: 'p50', label: 'Time p50', value: formatDuration(p50) },
      { key: 'p95', label: 'Time p95', value: formatDuration(p95) },
      { key: 'retries', label: 'Retries', value: count(stats?.retries) },
      { key: 'rate_limited', label: 'Rate limited (429)', value: count(stats?.rate_limited) },
    ],
  };
}

/** Calls the caller's resolver; a throwing resolver means "unknown" for that item, not a failed report. */
function safeSourcePath(resolve: HtmlReportOptions['sourcePath'], item: ReportItem): string | null {
  try {
    const p = resolve(item);
    return p ? path.resolve(p) : null;
  } catch {
    return null;
  }
}

/**
 * The result file and its relative link. report.json writes `results/<id>.<ext>`; a merged report of
 * shards points into the sibling shard folders (`../shard-1/results/...`). Absolute paths and URLs
 * are not ours to link or read.
 */
function resultPath(outDir: string, output: string | null): { file: string; href: string } | null {
  if (!output || /^[a-z][a-z0-9+.-]*:/i.test(output) || path.isAbsolute(output)) return null;
  const file = path.resolve(outDir, output);
  const rel = path.relative(outDir, file);
  if (rel === '' || path.isAbsolute(rel)) return null;
  return { file, href: rel.split(path.sep).map(encodeURIComponent).join('/') };
}

/**
 * Thumbnail file names, one per image file: one photo restyled in five styles is shrunk once.
 * Result thumbs are `<result name>.out.webp` (so `<item-id>.out.webp` for a normal run). Names that would clash on a case-insensitive
 * file system (macOS, Windows) get a hash suffix.
 */
class ThumbNames {
  private readonly taken = new Map<string, string>();

  forSource(file: string): string {
    const base = safeId(path.basename(file, path.extname(file))).slice(0, 80);
    return this.claim(`src:${file}`, `${base}-${shortHash(file)}.src.webp`);
  }

  forResult(file: string): string {
    // results/<id>.<ext> → thumbs/<id>.out.webp; keyed by file so items sharing a result share its thumb.
    return this.claim(`out:${file}`, `${safeId(path.basename(file, path.extname(file)))}.out.webp`);
  }

  private claim(key: string, name: string): string {
    const lower = name.toLowerCase();
    const owner = this.taken.get(lower);
    if (owner === undefined || owner === key) {
      this.taken.set(lower, key);
      return name;
    }
    const unique = name.replace(/(\.\w+\.webp)$/, `-${shortHash(key)}$1`);
    this.taken.set(unique.toLowerCase(), key);
    return unique;
  }
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 10);
}
