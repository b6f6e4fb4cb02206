import { createHash } from 'node:crypto';
import path from 'node:path';
import { loadSharp } from '../image/sharp.js';
import { sniff } from '../image/sniff.js';
import { normalisation } from '../preflight/analyse.js';
import { LocalOutputStore } from '../storage/local-output.js';
import { localSources } from '../storage/local-source.js';
import type { OpenedSource, OutputStore, SourceStore, StoredObject } from '../storage/types.js';
import type { ReportItem } from '../types.js';
import { safeId } from '../util/ids.js';

/** One thumbnail to make: a source image and where its thumbnail goes. */
export interface ThumbJob {
  /** The image to shrink: a {@link SourceStore} reference (a result's is its output store's `refOf`). */
  source: string;
  /** The thumbnail's key in the output store (`thumbs/<name>.webp`); an absolute path without stores. */
  dest: string;
}

/** What became of one thumbnail: its state and the file that serves as it (see {@link ensureThumbnail}). */
export interface ThumbOutcome {
  state: 'reused' | 'created' | 'failed';
  /** The thumbnail: `dest`, or `dest` with the source's own extension when it was copied. */
  file: string;
}

/** Where thumbnails read their images and write themselves. */
export interface ThumbStores {
  sources: SourceStore;
  output: OutputStore;
  /**
   * The thumbnails that exist, from one listing of their folder, when the caller made one: a key
   * absent from it is taken as absent (no HEAD). Without it each thumbnail asks the store.
   */
  listed?: ReadonlyMap<string, StoredObject>;
}

/** The thumbnail stored under `key`, if any: from the listing when there is one, else the store's answer. */
async function existingThumb(stores: ThumbStores, key: string): Promise<StoredObject | null> {
  if (stores.listed) return stores.listed.get(key) ?? null;
  return stores.output.head(key).catch(() => null);
}

/** Sources up to this size are read to see whether they are thumbnail-sized already. */
const SMALL_BYTES = 256 * 1024;

/** Media types of the thumbnails: a shrunk WebP, or a copy in its own format. */
const THUMB_TYPE: Record<string, string> = { webp: 'image/webp', jpg: 'image/jpeg', png: 'image/png' };

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
 *
 * Without `stores`, `source` is a local path and `dest` an absolute path, whose folder is the store.
 */
export async function ensureThumbnail(
  job: ThumbJob,
  size: number,
  stores?: ThumbStores,
): Promise<ThumbOutcome> {
  if (stores) return makeThumbnail(job, size, stores);
  const dir = path.dirname(job.dest);
  const output = new LocalOutputStore(dir);
  const made = await makeThumbnail({ source: job.source, dest: path.basename(job.dest) }, size, {
    sources: localSources,
    output,
  });
  return { state: made.state, file: output.describe(made.file) };
}

async function makeThumbnail(job: ThumbJob, size: number, stores: ThumbStores): Promise<ThumbOutcome> {
  let source: OpenedSource;
  try {
    source = await stores.sources.open(job.source);
  } catch {
    // A source out of reach (a bucket result not in this machine's cache) keeps the thumb it has.
    const made = await existingThumb(stores, job.dest);
    return { state: made ? 'reused' : 'failed', file: job.dest };
  }
  // In whole seconds, since S3 keeps Last-Modified to the second: a result and its thumb written in
  // one second would otherwise look stale on every report. A source rewritten within the second its
  // thumb was made keeps that thumb (a preview, and the next change of the source remakes it).
  const fresh = async (key: string): Promise<boolean> => {
    const made = await existingThumb(stores, key);
    return made !== null && Math.floor(made.mtimeMs / 1000) >= Math.floor(source.mtimeMs / 1000);
  };
  // A thumb made from this very source (shrunk, or a copy) is kept before anything is decoded, so a
  // report whose thumbs are all made (a rerun) does not load sharp at all.
  if (await fresh(job.dest)) return { state: 'reused', file: job.dest };
  const bytes = source.size <= SMALL_BYTES ? await source.bytes().catch(() => null) : null;
  const own = bytes ? thumbnailSized(bytes, size) : null;
  const copyDest = own ? job.dest.replace(/\.webp$/, `.${own}`) : job.dest;
  if (copyDest !== job.dest && (await fresh(copyDest))) return { state: 'reused', file: copyDest };
  const copy = bytes && own && (await shownAsUploaded(bytes)) ? bytes : null;
  const dest = copy ? copyDest : job.dest;
  const ext = copy ? own! : 'webp';
  try {
    const body = copy ?? (await shrunk(source, size));
    // Atomic (a crash mid-write must not leave a torn thumb that the time check would keep), but not
    // durable: a thumbnail is a cache, and 10,000 fsyncs would make reports slow.
    await stores.output.put(dest, body, { contentType: THUMB_TYPE[ext] ?? 'image/webp', durable: false });
    return { state: 'created', file: dest };
  } catch {
    return { state: 'failed', file: dest };
  }
}

/** The source as a WebP of at most `size` px on its long side, upright. */
async function shrunk(source: OpenedSource, size: number): Promise<Buffer> {
  const sharp = await loadSharp();
  return sharp(source.localPath ?? (await source.bytes()), { failOn: 'error' })
    .rotate() // honour EXIF orientation so phone photos are not shown sideways
    .resize(size, size, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 74, effort: 0 })
    .toBuffer();
}

/**
 * Whether a browser shows these bytes as they were uploaded: upright without an orientation tag,
 * 8-bit sRGB, one frame. A tagged, CMYK, wide-gamut or 16-bit image is drawn (turned, converted)
 * like the upload instead, so the before/after pair match.
 */
async function shownAsUploaded(bytes: Buffer): Promise<boolean> {
  const sharp = await loadSharp();
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
  options: ThumbOptions & ThumbStores,
): Promise<Map<string, ThumbOutcome>> {
  const unique = new Map<string, ThumbJob>();
  for (const job of jobs) if (!unique.has(job.dest)) unique.set(job.dest, job);
  const queue = [...unique.values()];
  // One listing per folder (a few requests per thousand thumbnails on a bucket) instead of a HEAD each.
  const listed = await listFolders(
    options.output,
    new Set(queue.map((job) => `${path.posix.dirname(job.dest)}/`)),
  );
  const stores: ThumbStores = listed ? { ...options, listed } : options;
  const outcomes = new Map<string, ThumbOutcome>();
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let job = queue[next++]; job !== undefined; job = queue[next++]) {
      outcomes.set(job.dest, await ensureThumbnail(job, options.size, stores));
    }
  };
  const workers = Math.max(1, Math.min(options.concurrency, queue.length));
  await Promise.all(Array.from({ length: workers }, worker));
  return outcomes;
}

/**
 * What the output store holds under each of `folders`, by key; undefined when a listing fails (each
 * thumbnail then asks the store itself, as without a listing).
 */
async function listFolders(
  output: OutputStore,
  folders: ReadonlySet<string>,
): Promise<Map<string, StoredObject> | undefined> {
  const listed = new Map<string, StoredObject>();
  try {
    for (const folder of folders) {
      for await (const object of output.list(folder)) listed.set(object.key, object);
    }
  } catch {
    return undefined;
  }
  return listed;
}

/** Where an item's thumbnails go, and its result's link. */
export interface PlannedThumbs {
  /** The result (its source reference) and its link relative to the report, or null. */
  result: { file: string; href: string } | null;
  /** The source image's thumbnail, or null when the source is unknown. */
  srcJob: ThumbJob | null;
  /** The result's thumbnail, or null when there is no result. */
  outJob: ThumbJob | null;
}

/** What {@link planThumbs} needs besides the item. */
export interface ThumbContext {
  /** The report's store (thumbnails go to `thumbs/` in it; results are linked from its root). */
  output: OutputStore;
  /** Names given so far (one instance per report, so that names are unique in it). */
  names: ThumbNames;
  /** Reference of the item's source image, or null when unknown. */
  sourcePath: (item: ReportItem) => string | null;
}

/**
 * The thumbnails of one item of report.html. The run makes those of the first items as their
 * results arrive, and the report makes the rest: both plan them here, so names agree.
 */
export function planThumbs(item: ReportItem, ctx: ThumbContext): PlannedThumbs {
  const source = safeSourcePath(ctx.sourcePath, item);
  const result = resultLink(ctx.output, item.output);
  return {
    result,
    srcJob: source ? { source, dest: `thumbs/${ctx.names.forSource(source)}` } : null,
    outJob: result ? { source: result.file, dest: `thumbs/${ctx.names.forResult(result.file)}` } : null,
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
 * The result and its relative link. report.json writes `results/<id>.<ext>`; a merged report of
 * shards points into the sibling shard folders (`../shard-1/results/...`). Absolute paths and URLs
 * are not ours to link or read.
 */
function resultLink(output: OutputStore, link: string | null): { file: string; href: string } | null {
  if (!link || /^[a-z][a-z0-9+.-]*:/i.test(link) || path.isAbsolute(link)) return null;
  const rel = path.posix.normalize(link.split(path.sep).join('/'));
  if (rel === '.' || rel === './' || rel.startsWith('/')) return null;
  return { file: output.refOf(rel), href: rel.split('/').map(encodeURIComponent).join('/') };
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
