/**
 * Preflight: make sure every image we upload is one the service accepts (JPEG, PNG or WebP of at
 * most 10 MB), or refuse it locally with a contract rejection code before any money is spent.
 *
 * - Formats are judged by content, never by the file extension.
 * - Accepted images are sent byte for byte, but are still decoded once to catch truncated files
 *   (their header parses fine; measured with sharp 0.35.5).
 * - Other decodable formats are converted, oversized images are shrunk and re-encoded, upright and
 *   without EXIF/GPS.
 * - Work is memoised per path and per content hash, bounded by a pool, and prepared files are
 *   cached on disk by content hash so a rerun does no sharp work again.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from '../errors.js';
import type { RejectCode } from '../types.js';
import { sha256, sha256File, writeFileAtomic } from '../util/fs.js';
import { type Analysis, analyse, formatBytes, formatLabel, type ImageInfo } from './preflight/analyse.js';
import { SNIFF_BYTES } from './preflight/sniff.js';

export type { ImageInfo } from './preflight/analyse.js';

/** One step of work the preflighter did, reported to {@link PreflightOptions.onWork}. */
export interface PreflightWorkEvent {
  /** 'read': the source was read and hashed; 'decode': sharp analysed it; 'cache-hit': a cached preparation was reused. */
  kind: 'read' | 'decode' | 'cache-hit';
  /** Absolute path of the source. */
  path: string;
  sourceSha256: string;
}

/** Options of {@link createPreflighter}; all are validated once, when the preflighter is created. */
export interface PreflightOptions {
  /**
   * Largest upload in bytes. The service says "10 MB" without saying which megabyte; we take the
   * smaller, 10^7.
   * @default 10_000_000
   */
  maxBytes?: number;
  /** Longest side in pixels; larger images are shrunk to fit. @default 4096 */
  maxSide?: number;
  /**
   * Also remove EXIF/GPS/XMP/IPTC from images that could otherwise be sent as they are. They are
   * then re-encoded: PNG and lossless WebP losslessly, JPEG and lossy WebP at quality 92.
   * Re-encoded images (converted or resized) never carry that metadata, whatever this says.
   * @default false
   */
  stripMetadata?: boolean;
  /**
   * Folder for prepared files, named `<sourceSha256>-<optionsKey>.<ext>` with a JSON sidecar, so a
   * rerun with the same options does no image work again. When absent, prepared files go to a temp
   * folder owned by the preflighter and removed by {@link Preflighter.close}.
   */
  cacheDir?: string;
  /** How many images are read and processed at once (bounds memory too). @default os.availableParallelism() */
  concurrency?: number;
  /**
   * Refuse images with more pixels than this before decoding them (pixel bombs). Must be a
   * positive integer: "unlimited" is not allowed.
   * @default 268402689 (sharp's default, 0x3FFF²)
   */
  limitInputPixels?: number;
  /** Test and diagnostics hook, called for each unit of work done (not for memoised calls). */
  onWork?: (event: PreflightWorkEvent) => void;
}

/** What the preflight did with an accepted image. */
export type PreflightAction = 'as-is' | 'converted' | 'resized';

/** MIME types of the formats the service accepts. */
export type UploadContentType = 'image/jpeg' | 'image/png' | 'image/webp';

/** The outcome for one image: what to upload, or why it is refused. */
export type PreflightResult =
  | {
      ok: true;
      /** sha256 of the source file's bytes (the resume fingerprint). */
      sourceSha256: string;
      action: PreflightAction;
      original: ImageInfo;
      prepared: ImageInfo;
      /** The file to upload: the source itself for 'as-is', else the prepared file in the cache. */
      path: string;
      contentType: UploadContentType;
      /** Upload file name: the source's base name with the prepared format's extension, e.g. `k1.jpg`. */
      filename: string;
      /** Words for `plan`, e.g. 'resized from 6000×4000 / 14.2 MB to 4096×2731 / 2.1 MB'. */
      note?: string;
    }
  | { ok: false; sourceSha256: string | null; error: { code: RejectCode; message: string } };

/** Prepares images for upload; see {@link createPreflighter}. */
export interface Preflighter {
  /**
   * Prepares one image. Never rejects for a problem with the image itself (that is an `ok: false`
   * result); rejects with `signal.reason` when aborted, and on environment faults such as a full
   * disk while writing the cache.
   */
  prepare(imagePath: string, signal?: AbortSignal): Promise<PreflightResult>;
  /** Removes the temp folder when the preflighter owns one (no `cacheDir`); prepared paths become invalid. */
  close(): Promise<void>;
}

const DEFAULTS = {
  maxBytes: 10_000_000,
  maxSide: 4096,
  limitInputPixels: 0x3fff * 0x3fff,
};

/** Bump when the output of the preparation changes, so stale cache entries are not reused. */
const CACHE_VERSION = 1;

/** Sources up to this size are read into memory once (hash and decode from the same bytes). */
const IN_MEMORY_LIMIT = 64 * 1024 * 1024;

const EXTENSION = { jpeg: 'jpg', png: 'png', webp: 'webp' } as const;
const CONTENT_TYPE = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp' } as const;
type UploadFormat = keyof typeof EXTENSION;

/** An analysis after its bytes are on disk: what the content-hash memo and the cache hold. */
type Prepared =
  | {
      ok: true;
      action: PreflightAction;
      original: ImageInfo;
      prepared: ImageInfo;
      /** The cached prepared file; absent for 'as-is'. */
      file?: string;
      note?: string;
    }
  | { ok: false; code: RejectCode; reason: string };

interface PathEntry {
  promise: Promise<PreflightResult>;
  /** Callers still waiting; when every caller has aborted before the work starts, it is skipped. */
  waiters: number;
}

/**
 * Creates a preflighter. Options are validated here; a bad value throws a {@link UsageError}.
 *
 * `prepare` is memoised per absolute path (one preparation however many styles use the image) and
 * per content hash (identical files at two paths are prepared once).
 */
export function createPreflighter(options: PreflightOptions = {}): Preflighter {
  const maxBytes = positiveInteger('maxBytes', options.maxBytes, DEFAULTS.maxBytes);
  const maxSide = positiveInteger('maxSide', options.maxSide, DEFAULTS.maxSide);
  const limitInputPixels = positiveInteger(
    'limitInputPixels',
    options.limitInputPixels,
    DEFAULTS.limitInputPixels,
  );
  const concurrency = positiveInteger('concurrency', options.concurrency, os.availableParallelism());
  const stripMetadata = options.stripMetadata ?? false;
  if (typeof stripMetadata !== 'boolean') {
    throw new UsageError(
      `preflight option stripMetadata must be true or false, got ${String(stripMetadata)}`,
    );
  }
  const limits = { maxBytes, maxSide, stripMetadata, limitInputPixels };
  const optionsKey = sha256(JSON.stringify({ v: CACHE_VERSION, ...limits })).slice(0, 16);
  const onWork = options.onWork;
  const limiter = createLimiter(concurrency);

  const ownsDir = options.cacheDir === undefined;
  let dirPromise: Promise<string> | undefined;
  const cacheDir = (): Promise<string> => {
    dirPromise ??= options.cacheDir
      ? mkdir(path.resolve(options.cacheDir), { recursive: true }).then(() =>
          path.resolve(options.cacheDir ?? '.'),
        )
      : mkdtemp(path.join(os.tmpdir(), 'kitchen-batch-preflight-'));
    return dirPromise;
  };

  const byPath = new Map<string, PathEntry>();
  const byHash = new Map<string, Promise<Prepared>>();

  /** The content-hash level: cache lookup, else sharp analysis and writing the result out. */
  async function prepareContent(abs: string, sourceSha256: string, source: Source): Promise<Prepared> {
    const dir = await cacheDir();
    const stem = path.join(dir, `${sourceSha256}-${optionsKey}`);
    const cached = await readCache(stem);
    if (cached) {
      onWork?.({ kind: 'cache-hit', path: abs, sourceSha256 });
      return cached;
    }
    onWork?.({ kind: 'decode', path: abs, sourceSha256 });
    const analysis: Analysis = await analyse(source, limits);
    if (!analysis.ok) return analysis; // refusals are cheap to find again and may depend on the caller's limits: not cached
    const prepared: Prepared = {
      ok: true,
      action: analysis.action,
      original: analysis.original,
      prepared: analysis.prepared,
      ...(analysis.note === undefined ? {} : { note: analysis.note }),
    };
    if (analysis.data) {
      const file = `${stem}.${EXTENSION[analysis.prepared.format as UploadFormat]}`;
      await writeFileAtomic(file, analysis.data);
      prepared.file = file;
    }
    // The sidecar goes last: its presence promises that the prepared file is whole. An as-is
    // sidecar guards nothing that must survive a power cut (the source is what gets uploaded, and
    // a torn sidecar only means preparing again), so it skips the two fsyncs: measured ~1.6 ms, a
    // seventh of the whole passthrough path.
    const sidecar = `${JSON.stringify({ v: CACHE_VERSION, ...prepared })}\n`;
    if (prepared.file) await writeFileAtomic(`${stem}.json`, sidecar);
    else await writeFileRenamed(`${stem}.json`, sidecar);
    return prepared;
  }

  /** The path level: read and hash inside a pool slot, then share the content-level work. */
  async function preparePath(abs: string, shown: string, entry: PathEntry): Promise<PreflightResult> {
    const step = await limiter.run(
      async (): Promise<{ sha: string | null; outcome?: Prepared; shared?: Promise<Prepared> }> => {
        if (entry.waiters === 0) throw new DOMException('preflight aborted before it started', 'AbortError');
        let source: Source & { sha: string };
        try {
          source = await readSource(abs);
        } catch (error) {
          const refusal = unreadable(error);
          if (!refusal) throw error;
          return { sha: null, outcome: refusal };
        }
        onWork?.({ kind: 'read', path: abs, sourceSha256: source.sha });
        const existing = byHash.get(source.sha);
        // Identical bytes are being prepared already: wait for them outside the pool, freeing the slot.
        if (existing) return { sha: source.sha, shared: existing };
        const work = prepareContent(abs, source.sha, source);
        byHash.set(source.sha, work);
        // An environment fault (disk full) must not stick: a later call may try again.
        work.catch(() => byHash.delete(source.sha));
        return { sha: source.sha, outcome: await work };
      },
    );
    const outcome = step.outcome ?? (await (step.shared as Promise<Prepared>));
    return toResult(outcome, step.sha, abs, shown);
  }

  return {
    prepare(imagePath, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const abs = path.resolve(imagePath);
      let entry = byPath.get(abs);
      // An entry whose callers all aborted may be about to fail with AbortError: do not join it.
      if (entry && entry.waiters > 0) {
        entry.waiters += 1;
      } else {
        // Counted before the work starts: the pool may run it at once, and it checks for waiters.
        const created: PathEntry = { waiters: 1, promise: Promise.resolve() as never };
        created.promise = preparePath(abs, imagePath, created);
        // Forget failures (aborts, disk faults) so that a later call starts afresh.
        created.promise.catch(() => {
          if (byPath.get(abs) === created) byPath.delete(abs);
        });
        byPath.set(abs, created);
        entry = created;
      }
      return waitFor(entry, signal);
    },
    async close() {
      if (ownsDir && dirPromise) {
        const dir = await dirPromise.catch(() => undefined);
        if (dir) await rm(dir, { recursive: true, force: true });
      }
      dirPromise = undefined;
    },
  };
}

/** One short human line for `plan`. */
export function describePreflight(result: PreflightResult): string {
  if (!result.ok) return `rejected (${result.error.code}): ${result.error.message}`;
  if (result.action === 'as-is') {
    const o = result.original;
    return `as-is: ${formatLabel(o.format)} ${o.width}×${o.height}, ${formatBytes(o.bytes)}`;
  }
  // The note already starts with what was done ('resized from …', 'converted from …').
  return (
    result.note ??
    `${result.action} to ${formatLabel(result.prepared.format)}, ${formatBytes(result.prepared.bytes)}`
  );
}

interface Source {
  input: Buffer | string;
  head: Buffer;
  bytes: number;
}

async function readSource(abs: string): Promise<Source & { sha: string }> {
  const info = await stat(abs);
  if (!info.isFile()) throw Object.assign(new Error(`${abs} is not a file`), { code: 'EISDIR' });
  if (info.size <= IN_MEMORY_LIMIT) {
    // Hash and decode the very same bytes, so the fingerprint always matches what was checked.
    const data = await readFile(abs);
    return { sha: sha256(data), input: data, head: data.subarray(0, SNIFF_BYTES), bytes: data.length };
  }
  // Huge files (usually not images at all) are streamed for the hash and left for sharp to read.
  const sha = await sha256File(abs);
  const handle = await open(abs, 'r');
  try {
    const head = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await handle.read(head, 0, SNIFF_BYTES, 0);
    return { sha, input: abs, head: head.subarray(0, bytesRead), bytes: info.size };
  } finally {
    await handle.close();
  }
}

/** File-system errors that mean "there is no readable image here"; anything else is thrown. */
function unreadable(error: unknown): Prepared | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file',
    ENOTDIR: 'no such file (a parent is not a folder)',
    EISDIR: 'is a folder, not an image file',
    EACCES: 'cannot be read (permission denied)',
    EPERM: 'cannot be read (permission denied)',
    ELOOP: 'cannot be read (symbolic link loop)',
  };
  const reason = code === undefined ? undefined : reasons[code];
  return reason === undefined ? undefined : { ok: false, code: 'file_not_found', reason };
}

function toResult(outcome: Prepared, sha: string | null, abs: string, shown: string): PreflightResult {
  if (!outcome.ok)
    return {
      ok: false,
      sourceSha256: sha,
      error: { code: outcome.code, message: `${shown}: ${outcome.reason}` },
    };
  const format = outcome.prepared.format as UploadFormat;
  const base = path.basename(abs, path.extname(abs));
  return {
    ok: true,
    sourceSha256: sha as string,
    action: outcome.action,
    original: outcome.original,
    prepared: outcome.prepared,
    // Identical bytes at two paths share one preparation, but each as-is item uploads its own file.
    path: outcome.file ?? abs,
    contentType: CONTENT_TYPE[format],
    filename: `${base}.${EXTENSION[format]}`,
    ...(outcome.note === undefined ? {} : { note: outcome.note }),
  };
}

/** Atomic (temp file + rename) but not durable: for cache entries that are cheap to redo. */
async function writeFileRenamed(file: string, data: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, data);
    await rename(tmp, file);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

async function readCache(stem: string): Promise<Prepared | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(`${stem}.json`, 'utf8'));
  } catch {
    return undefined; // absent or torn: prepare afresh
  }
  if (!isCachedEntry(parsed)) return undefined;
  const { v: _version, ...entry } = parsed;
  if (entry.file !== undefined) {
    // The sidecar is written after the file, but the file could be deleted or altered since.
    const size = await stat(entry.file).then(
      (s) => s.size,
      () => -1,
    );
    if (size !== entry.prepared.bytes) return undefined;
  }
  return entry;
}

function isImageInfo(value: unknown): value is ImageInfo {
  const v = value as Partial<ImageInfo> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.format === 'string' &&
    typeof v.width === 'number' &&
    typeof v.height === 'number' &&
    typeof v.bytes === 'number'
  );
}

function isCachedEntry(value: unknown): value is Prepared & { ok: true; v: number } {
  const v = value as Record<string, unknown> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    v.v === CACHE_VERSION &&
    v.ok === true &&
    (v.action === 'as-is' || v.action === 'converted' || v.action === 'resized') &&
    isImageInfo(v.original) &&
    isImageInfo(v.prepared) &&
    v.prepared.format in EXTENSION &&
    (v.file === undefined || typeof v.file === 'string') &&
    (v.action === 'as-is') === (v.file === undefined) &&
    (v.note === undefined || typeof v.note === 'string')
  );
}

/**
 * Waits for a shared preparation on behalf of one caller (already counted in `waiters`), who may
 * give up without cancelling it for the others.
 */
function waitFor(entry: PathEntry, signal: AbortSignal | undefined): Promise<PreflightResult> {
  if (!signal) return entry.promise;
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      entry.waiters -= 1;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    entry.promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new UsageError(`preflight option ${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

interface Limiter {
  run<T>(task: () => Promise<T>): Promise<T>;
}

/** A FIFO pool: at most `size` tasks run at once. */
function createLimiter(size: number): Limiter {
  let active = 0;
  const queue: Array<() => void> = [];
  return {
    async run(task) {
      if (active >= size) await new Promise<void>((resolve) => queue.push(resolve));
      else active += 1;
      // A woken task inherits the slot of the one that finished, so `active` is unchanged then.
      try {
        return await task();
      } finally {
        if (queue.length > 0) queue.shift()?.();
        else active -= 1;
      }
    },
  };
}
