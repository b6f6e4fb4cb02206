import { createHash, randomBytes } from 'node:crypto';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { sniff } from '../image/sniff.js';
import { normalisation } from '../preflight/analyse.js';
import type { ReportItem } from '../types.js';
import { safeId } from '../util/ids.js';

/** One thumbnail to make: a source image and where its thumbnail goes. */
export interface ThumbJob {
  /** Absolute path of the image to shrink. */
  source: string;
  /** Absolute path of the thumbnail (WebP). */
  dest: string;
}

/** What became of one thumbnail: its state and the file that serves as it (see {@link ensureThumbnail}). */
export interface ThumbOutcome {
  state: 'reused' | 'created' | 'failed';
  /** The thumbnail file: `dest`, or `dest` with the source's own extension when it was copied. */
  file: string;
}

/** Sources up to this size are read to see whether they are thumbnail-sized already. */
const SMALL_BYTES = 256 * 1024;

/** Options of {@link ensureThumbnails}. */
export interface ThumbOptions {
  /** Long side of the thumbnail in pixels; smaller images are not enlarged. */
  size: number;
  /** Thumbnails made at once. */
  concurrency: number;
}

/**
 * Makes one thumbnail unless one newer than its source already exists, so that `kitchen-batch
 * report` reruns only touch what changed. A source that is already thumbnail-sized (JPEG, PNG or
 * WebP, whole, no larger than `size`) is copied as it is, under its own extension: no decode, no
 * encode. Anything else is shrunk to a WebP at `dest`. Never throws for a bad image: a missing,
 * unreadable or corrupt source is `'failed'` and the page shows a placeholder instead.
 */
export async function ensureThumbnail(job: ThumbJob, size: number): Promise<ThumbOutcome> {
  let source: { mtimeMs: number; size: number };
  try {
    source = await stat(job.source);
  } catch {
    return { state: 'failed', file: job.dest };
  }
  let copy: Buffer | null = null;
  let dest = job.dest;
  if (source.size <= SMALL_BYTES) {
    const bytes = await readFile(job.source).catch(() => null);
    const ext = bytes ? thumbnailSized(bytes, size) : null;
    if (bytes && ext && (await shownAsUploaded(bytes))) {
      copy = bytes;
      dest = job.dest.replace(/\.webp$/, `.${ext}`);
    }
  }
  try {
    // `>=`: a thumb written in the same millisecond as its source was still made from that source.
    if ((await stat(dest)).mtimeMs >= source.mtimeMs) return { state: 'reused', file: dest };
  } catch {
    // No thumbnail yet.
  }
  // Temp file + rename: a crash mid-write must not leave a torn thumb that the mtime check would keep.
  // No fsync: a thumbnail is a cache, and 10,000 fsyncs would make reports slow.
  const tmp = `${dest}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    if (copy) await writeFile(tmp, copy);
    else {
      await sharp(job.source, { failOn: 'error' })
        .rotate() // honour EXIF orientation so phone photos are not shown sideways
        .resize(size, size, { fit: 'inside', withoutEnlargement: true })
        .webp({ quality: 74, effort: 0 })
        .toFile(tmp);
    }
    await rename(tmp, dest);
    return { state: 'created', file: dest };
  } catch {
    await rm(tmp, { force: true }).catch(() => {});
    return { state: 'failed', file: dest };
  }
}

/**
 * Whether a browser shows these bytes as they were uploaded: upright without an orientation tag,
 * 8-bit sRGB, one frame. A tagged, CMYK, wide-gamut or 16-bit image is drawn (turned, converted)
 * like the upload instead, so the before/after pair match.
 */
async function shownAsUploaded(bytes: Buffer): Promise<boolean> {
  const meta = await sharp(bytes)
    .metadata()
    .catch(() => null);
  return meta !== null && normalisation(meta, false).every((step) => step === 'metadata removed');
}

/**
 * The extension under which an image can serve as its own thumbnail: a JPEG, PNG or WebP that a
 * browser shows as it is, no larger than `size` on its long side, and whole by its own structure
 * (a cut file goes the decoding way, which fails cleanly). Null otherwise.
 */
function thumbnailSized(bytes: Buffer, size: number): string | null {
  const { kind, width, height } = sniff(bytes);
  if (width === undefined || height === undefined || Math.max(width, height) > size) return null;
  const tail = (n: number) => bytes.subarray(bytes.length - n);
  if (kind === 'jpeg' && tail(2).equals(Buffer.from([0xff, 0xd9]))) return 'jpg';
  if (kind === 'png' && tail(8).subarray(0, 4).toString('latin1') === 'IEND') return 'png';
  if (kind === 'webp' && bytes.length >= 12 && bytes.readUInt32LE(4) + 8 === bytes.length) return 'webp';
  return null;
}

/**
 * Runs {@link ensureThumbnail} for every job with at most `concurrency` at once.
 * Returns the outcome per `dest`; jobs with the same `dest` are made once.
 */
export async function ensureThumbnails(
  jobs: readonly ThumbJob[],
  options: ThumbOptions,
): Promise<Map<string, ThumbOutcome>> {
  const unique = new Map<string, ThumbJob>();
  for (const job of jobs) if (!unique.has(job.dest)) unique.set(job.dest, job);
  const queue = [...unique.values()];
  const outcomes = new Map<string, ThumbOutcome>();
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let job = queue[next++]; job !== undefined; job = queue[next++]) {
      outcomes.set(job.dest, await ensureThumbnail(job, options.size));
    }
  };
  const workers = Math.max(1, Math.min(options.concurrency, queue.length));
  await Promise.all(Array.from({ length: workers }, worker));
  return outcomes;
}

/** Where an item's thumbnails go, and its result's link. */
export interface PlannedThumbs {
  /** The result file and its link relative to the report, or null. */
  result: { file: string; href: string } | null;
  /** The source image's thumbnail, or null when the source is unknown. */
  srcJob: ThumbJob | null;
  /** The result's thumbnail, or null when there is no result. */
  outJob: ThumbJob | null;
}

/** What {@link planThumbs} needs besides the item. */
export interface ThumbContext {
  /** The report's folder (thumbnails go to `thumbs/` in it). */
  outDir: string;
  /** Names given so far (one instance per report, so that names are unique in it). */
  names: ThumbNames;
  /** Absolute path of the item's source image, or null when unknown. */
  sourcePath: (item: ReportItem) => string | null;
}

/**
 * The thumbnails of one item of report.html. The run makes those of the first items as their
 * results arrive, and the report makes the rest: both plan them here, so names agree.
 */
export function planThumbs(item: ReportItem, ctx: ThumbContext): PlannedThumbs {
  const thumbsDir = path.join(ctx.outDir, 'thumbs');
  const source = safeSourcePath(ctx.sourcePath, item);
  const result = resultPath(ctx.outDir, item.output);
  return {
    result,
    srcJob: source ? { source, dest: path.join(thumbsDir, ctx.names.forSource(source)) } : null,
    outJob: result
      ? { source: result.file, dest: path.join(thumbsDir, ctx.names.forResult(result.file)) }
      : null,
  };
}

/** Calls the caller's resolver; a throwing resolver means "unknown" for that item, not a failed report. */
function safeSourcePath(resolve: ThumbContext['sourcePath'], item: ReportItem): string | null {
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
export class ThumbNames {
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
