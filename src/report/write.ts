import path from 'node:path';
import { toOutputStore } from '../storage/local-output.js';
import { isS3Ref } from '../storage/s3/ref.js';
import type { OutputStore, SourceStore } from '../storage/types.js';
import type { Report, ReportItem } from '../types.js';
import { jsonElement, jsonHead, jsonTail } from '../util/json-stream.js';
import { type RunInfo, shownItem, Tally } from './build.js';
import { csvHeader, csvRow } from './csv.js';

/** What a report is written from: the run's facts and its rows in order. */
export interface ReportSource {
  info: RunInfo;
  /** The rows in manifest order. Called twice (totals first, then the files), so it must give the same rows again. */
  rows(): AsyncIterable<ReportItem> | Iterable<ReportItem>;
}

/** Options of {@link writeReports}. */
export interface WriteReportsOptions {
  /** Also write report.html (with thumbnails). @default true */
  html?: boolean;
  /** Folder the items' `image` paths are relative to (the manifest's folder), for thumbnails. */
  manifestDir?: string;
  /** report.html's "how to fix" hints by error code. @default a `run`'s (ERROR_HINTS) */
  hints?: Readonly<Record<string, string>>;
  /** Where the thumbnails' source images are read. @default the local files */
  sources?: SourceStore;
}

/** What {@link writeReports} wrote, in brief. */
export interface WrittenReport {
  /** report.json's `run` object (totals, stats). */
  run: Report['run'];
  /** The first {@link PROBLEMS} items that did not succeed, in manifest order. */
  problems: ReportItem[];
}

/** Items that did not succeed kept for the caller's summary. */
export const PROBLEMS = 100;

/**
 * What report.html shows: the first {@link PAGE_FIRST} items in manifest order (what a person looks
 * at first) and every item that did not succeed or whose result the review flagged, up to
 * {@link PAGE_PROBLEMS} of them. Whatever the
 * run's size the page stays about 10 MB and opens at once; it says that the full list is in
 * report.csv and report.json (docs/contract.md#report-html).
 */
export const PAGE_FIRST = 2000;
/** See {@link PAGE_FIRST}. */
export const PAGE_PROBLEMS = 20_000;

/**
 * Writes report.json and report.csv, streamed and atomic (the store's writers: temp file, fsync,
 * rename for a folder), and report.html when asked. `outDir` is the run's output store, or its folder. Memory stays bounded by the page's items, whatever the run's size.
 */
export async function writeReports(
  outDir: OutputStore | string,
  source: ReportSource,
  options: WriteReportsOptions = {},
): Promise<WrittenReport> {
  const tally = new Tally();
  for await (const item of source.rows()) tally.add(item);
  const run = tally.header(source.info);
  const output = toOutputStore(outDir);
  const json = await output.writer('report.json', { contentType: 'application/json' });
  const csv = await output.writer('report.csv', { contentType: 'text/csv; charset=utf-8' });
  const html = options.html ?? true;
  const page: ReportItem[] = [];
  const problems: ReportItem[] = [];
  let index = 0;
  let pageProblems = 0;
  try {
    await json.write(jsonHead({ run, items: [] }));
    await csv.write(csvHeader());
    for await (const item of source.rows()) {
      // What a person reads has a URL's secrets redacted; the page keeps the item whole (its
      // thumbnail reads the source) and redacts what it shows (html/index.ts).
      const shown = shownItem(item);
      await json.write(jsonElement(shown, index));
      await csv.write(csvRow(shown));
      if (item.status !== 'succeeded' && problems.length < PROBLEMS) problems.push(shown);
      // The page's items (up to 22,000 rows in memory) are kept only for a page that is written.
      const first = index < PAGE_FIRST;
      if (html && (first || (needsALook(item) && pageProblems < PAGE_PROBLEMS))) {
        page.push(item);
        if (!first) pageProblems++;
      }
      index++;
    }
    await json.write(jsonTail(index));
    await json.commit();
    await csv.commit();
  } catch (error) {
    await json.abort();
    await csv.abort();
    throw error;
  }
  if (html) {
    const base = options.manifestDir;
    // The page's code (thumbnails: sharp) only when a page is written.
    const { writeHtmlReport } = await import('./html/index.js');
    await writeHtmlReport({
      outDir: output,
      ...(options.sources ? { sources: options.sources } : {}),
      report: { run, items: page },
      ...(options.hints ? { hints: options.hints } : {}),
      sourcePath: (item) => sourceRef(item.image, base, options.sources !== undefined),
    });
  }
  return { run, problems };
}

/**
 * Where an item's source thumbnail is read: a local path against the manifest's folder; a remote
 * reference as it is, only when the caller gave a store that reads it (without one, the page shows
 * the placeholder rather than fetching a catalogue's sources again); null when it cannot be told.
 */
export function sourceRef(image: string, manifestDir: string | undefined, remote: boolean): string | null {
  // `storage/sources.ts`'s `isRemoteRef`, without loading the S3 client for a report.
  if (isS3Ref(image) || /^https?:\/\//i.test(image)) return remote ? image : null;
  return path.isAbsolute(image) ? image : manifestDir ? path.resolve(manifestDir, image) : null;
}

/** An item a person should see on the page: it did not succeed, or its result was flagged. */
function needsALook(item: ReportItem): boolean {
  return item.status !== 'succeeded' || (item.review?.flags.length ?? 0) > 0;
}
