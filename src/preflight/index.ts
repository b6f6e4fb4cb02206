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
 * - Remote sources (http(s), `s3://`) are streamed once per reference into the cache folder, under
 *   their own concurrency bound, and deleted once no item holds them (`remote.ts`).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SNIFF_BYTES } from '../image/sniff.js';
import { localSources } from '../storage/local-source.js';
import { isRemoteRef, openIfChanged } from '../storage/sources.js';
import type { KnownSource, OpenedSource, SourceNotModified, SourceStore } from '../storage/types.js';
import { sha256, sha256Stream } from '../util/fs.js';
import { flag, OptionError, wholeNumber } from '../util/validate.js';
import {
  type Analysis,
  analyse,
  formatBytes,
  formatLabel,
  type PixelSample,
  SHRINK_ON_LOAD_PIXELS,
} from './analyse.js';
import { type CacheEntry, cacheKey, readCache, writeCache } from './cache.js';
import { createLimiter, remember, waitFor } from './pool.js';
import { RemotePreparations } from './remote.js';
import { type PreflightResult, type SourceFile, toResult, unreadable } from './result.js';

export type { ImageInfo, PixelSample } from './analyse.js';
export type {
  PreflightAction,
  PreflightErrorCode,
  PreflightResult,
  SourceFile,
  UploadContentType,
} from './result.js';

/** One step of work the preflighter did, reported to {@link PreflightOptions.onWork}. */
export interface PreflightWorkEvent {
  /** 'read': the source was read and hashed; 'decode': sharp analysed it; 'cache-hit': a cached preparation was reused. */
  kind: 'read' | 'decode' | 'cache-hit';
  /** Absolute path of a local source; a remote source's reference (URL, `s3://`) as given. */
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
   * Send images the service can take as they are: with their EXIF (GPS included), XMP and IPTC,
   * orientation tag and colour profile. By default uploads are normalised (upright, 8-bit sRGB or
   * grey, one frame, no metadata) and only images that already are go up byte for byte; the others
   * are re-encoded: PNG and lossless WebP losslessly, JPEG and lossy WebP at quality 92.
   * Converted and resized images are normalised either way.
   * @default false
   */
  keepMetadata?: boolean;
  /**
   * @deprecated Removing metadata is the default now; `true` is accepted and changes nothing,
   * and contradicts `keepMetadata`.
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
  /**
   * Called with the small rendition an as-is image's check decodes anyway, and the source's sha256:
   * the result review's view of the source (not for cache hits or converted images).
   */
  onSample?: (sourceSha256: string, sample: PixelSample) => void;
  /** Test and diagnostics hook, called for each unit of work done (not for memoised calls). */
  onWork?: (event: PreflightWorkEvent) => void;
  /** Where source images are read (local files, http(s) URLs, `s3://`). @default the local files */
  sources?: SourceStore;
  /**
   * How many remote sources are read over the network at once: their own bound, so that a source
   * waiting on the network holds no slot of the sharp pool ({@link concurrency}). @default 16
   */
  sourceConcurrency?: number;
}

/** Prepares images for upload; see {@link createPreflighter}. */
export interface Preflighter {
  /**
   * Prepares one image. Never rejects for a problem with the image itself (that is an `ok: false`
   * result); rejects with `signal.reason` when aborted, and on environment faults such as a full
   * disk while writing the cache. A remote source is held from here until {@link release}: every
   * call that resolved must be released once (the stages do it after the upload's 202, or when the
   * item ends otherwise; `releaseDecision` of `stages/decide.ts`). `opened` is a body already open
   * for a remote source (read instead of fetching it again); ignored for a local file.
   */
  prepare(imagePath: string, signal?: AbortSignal, opened?: OpenedSource): Promise<PreflightResult>;
  /**
   * Gives back the hold a resolved {@link prepare} of `imagePath` took. A remote source's spooled bytes
   * and the preparations made from them stay on disk while any item holds them (its upload is not
   * accepted yet) and are deleted with the last release; the reference is then forgotten, so a later
   * prepare reads it again. Local sources hold nothing (their preparations stay cached by content
   * hash): a no-op for them.
   */
  release(imagePath: string): Promise<void>;
  /** Where the sources are read. */
  readonly sources: SourceStore;
  /**
   * Opens the source only if it changed since it was `known` (the journal's record), through
   * {@link sources}: a remote source is asked once per reference and validators however many
   * items use it (the answer is shared for a few minutes). Null: it changed, and its
   * body, already open, is what the next {@link prepare} of it reads.
   */
  openIfChanged(
    imagePath: string,
    known: KnownSource,
    signal?: AbortSignal,
  ): Promise<OpenedSource | SourceNotModified | null>;
  /**
   * Removes the temp folder when the preflighter owns one (no `cacheDir`), and every remote source's
   * spooled files; prepared paths become invalid.
   */
  close(): Promise<void>;
}

const DEFAULTS = {
  maxBytes: 10_000_000,
  maxSide: 4096,
  limitInputPixels: 0x3fff * 0x3fff,
};

/** Sources up to this size are read into memory once (hash and decode from the same bytes). */
const IN_MEMORY_LIMIT = 64 * 1024 * 1024;

interface PathEntry {
  promise: Promise<PreflightResult>;
  /** Callers still waiting; when every caller has aborted before the work starts, it is skipped. */
  waiters: number;
  /** The preparation is done (it may be forgotten to bound memory). */
  settled: boolean;
}

/**
 * Creates a preflighter. Options are validated here; a bad value throws a {@link UsageError}.
 *
 * `prepare` is memoised per absolute path (one preparation however many styles use the image) and
 * per content hash (identical files at two paths are prepared once).
 */
export function createPreflighter(options: PreflightOptions = {}): Preflighter {
  const positive = (name: keyof PreflightOptions, value: unknown, fallback: number) =>
    wholeNumber(`preflight option ${name}`, value, { min: 1 }, fallback);
  const limits = {
    maxBytes: positive('maxBytes', options.maxBytes, DEFAULTS.maxBytes),
    maxSide: positive('maxSide', options.maxSide, DEFAULTS.maxSide),
    keepMetadata: flag('preflight option keepMetadata', options.keepMetadata, false),
    limitInputPixels: positive('limitInputPixels', options.limitInputPixels, DEFAULTS.limitInputPixels),
    shrinkOnLoadPixels: SHRINK_ON_LOAD_PIXELS,
  };
  // A limit the caller set binds every format; by default JPEG and WebP may be larger (they shrink on load).
  if (options.limitInputPixels !== undefined) limits.shrinkOnLoadPixels = limits.limitInputPixels;
  if (flag('preflight option stripMetadata', options.stripMetadata, false) && limits.keepMetadata) {
    throw new OptionError(
      'preflight option stripMetadata',
      'not together with keepMetadata (removing metadata is the default)',
      true,
    );
  }
  const concurrency = positive('concurrency', options.concurrency, os.availableParallelism());
  const key = cacheKey(limits);
  const onWork = options.onWork;
  const limiter = createLimiter(concurrency);
  const sources = options.sources ?? localSources;
  const fetches = createLimiter(positive('sourceConcurrency', options.sourceConcurrency, 16));

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
  const byHash = new Map<string, { promise: Promise<CacheEntry>; settled: boolean }>();
  const remote = new RemotePreparations({
    sources,
    cacheDir,
    fetches,
    onRead: (ref, sourceSha256) => onWork?.({ kind: 'read', path: ref, sourceSha256 }),
    // Never looked up in the cache, never shared by content: deleted with the source's last release.
    prepare: (source, sourceSha256, dir, ref) =>
      limiter.run(async () => {
        onWork?.({ kind: 'decode', path: ref, sourceSha256 });
        const analysis = await analyse(source, limits);
        if (analysis.ok && analysis.sample) options.onSample?.(sourceSha256, analysis.sample);
        return analysis.ok ? writeCache(dir, sourceSha256, key, analysis) : analysis;
      }),
  });

  /** The content-hash level: cache lookup, else sharp analysis and writing the result out. */
  async function prepareContent(abs: string, sourceSha256: string, source: Source): Promise<CacheEntry> {
    const dir = await cacheDir();
    const cached = await readCache(dir, sourceSha256, key);
    if (cached) {
      onWork?.({ kind: 'cache-hit', path: abs, sourceSha256 });
      return cached;
    }
    onWork?.({ kind: 'decode', path: abs, sourceSha256 });
    const analysis: Analysis = await analyse(source, limits);
    if (analysis.ok && analysis.sample) options.onSample?.(sourceSha256, analysis.sample);
    // Refusals are cheap to find again and may depend on the caller's limits: not cached.
    if (!analysis.ok) return analysis;
    return writeCache(dir, sourceSha256, key, analysis);
  }

  /** The path level: read and hash inside a pool slot, then share the content-level work. */
  async function preparePath(abs: string, shown: string, entry: PathEntry): Promise<PreflightResult> {
    const step = await limiter.run(
      async (): Promise<{
        sha: string | null;
        file: SourceFile | null;
        outcome?: CacheEntry;
        shared?: Promise<CacheEntry>;
      }> => {
        if (entry.waiters === 0) throw new DOMException('preflight aborted before it started', 'AbortError');
        let source: Awaited<ReturnType<typeof readSource>>;
        try {
          source = await readSource(sources, abs);
        } catch (error) {
          const refusal = unreadable(error);
          if (!refusal) throw error;
          return { sha: null, file: null, outcome: refusal };
        }
        const file = source.file;
        onWork?.({ kind: 'read', path: abs, sourceSha256: source.sha });
        const existing = byHash.get(source.sha);
        // Identical bytes are being prepared already: wait for them outside the pool, freeing the slot.
        if (existing) return { sha: source.sha, file, shared: existing.promise };
        const work = { promise: prepareContent(abs, source.sha, source), settled: false };
        remember(byHash, source.sha, work);
        work.promise.then(
          () => {
            work.settled = true;
          },
          // An environment fault (disk full) must not stick: a later call may try again.
          () => byHash.delete(source.sha),
        );
        return { sha: source.sha, file, outcome: await work.promise };
      },
    );
    const outcome = step.outcome ?? (await (step.shared as Promise<CacheEntry>));
    return toResult(outcome, step, shown, abs);
  }

  return {
    sources,
    prepare(imagePath, signal, opened) {
      if (isRemoteRef(imagePath)) return remote.prepare(imagePath, signal, opened);
      if (signal?.aborted) return Promise.reject(signal.reason);
      const abs = path.resolve(imagePath);
      let entry = byPath.get(abs);
      // An entry whose callers all aborted may be about to fail with AbortError: do not join it.
      if (entry && entry.waiters > 0) {
        entry.waiters += 1;
      } else {
        // Counted before the work starts: the pool may run it at once, and it checks for waiters.
        const created: PathEntry = { waiters: 1, promise: Promise.resolve() as never, settled: false };
        created.promise = preparePath(abs, imagePath, created);
        created.promise.then(
          () => {
            created.settled = true;
          },
          // Forget failures (aborts, disk faults) so that a later call starts afresh.
          () => {
            if (byPath.get(abs) === created) byPath.delete(abs);
          },
        );
        remember(byPath, abs, created);
        entry = created;
      }
      return waitFor(entry, signal);
    },
    openIfChanged: (imagePath, known, signal) =>
      isRemoteRef(imagePath)
        ? remote.check(imagePath, known, signal)
        : openIfChanged(sources, imagePath, known, signal ? { signal } : {}),
    release: (imagePath) => (isRemoteRef(imagePath) ? remote.release(imagePath) : Promise.resolve()),
    async close() {
      await remote.close();
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
  const p = result.prepared;
  const done = result.steps.length > 0 ? result.steps.join(', ') : result.action;
  return `${done}: ${formatLabel(p.format)} ${p.width}×${p.height}, ${formatBytes(p.bytes)}`;
}

interface Source {
  input: Buffer | string;
  head: Buffer;
  bytes: number;
}

async function readSource(
  sources: SourceStore,
  ref: string,
): Promise<Source & { sha: string; file: SourceFile }> {
  // Not a file (a folder) or not there: the store throws the file system's code, see unreadable().
  const source = await sources.open(ref);
  const file = { size: source.size, mtimeMs: source.mtimeMs };
  if (source.size <= IN_MEMORY_LIMIT) {
    // Hash and decode the very same bytes, so the fingerprint always matches what was checked.
    const data = await source.bytes();
    return { sha: sha256(data), file, input: data, head: data.subarray(0, SNIFF_BYTES), bytes: data.length };
  }
  // Huge sources (usually not images at all) are streamed for the hash and left for sharp to read
  // from their local file; one with no local file is decoded from memory.
  const sha = await sha256Stream(source.stream());
  const head = await source.head(SNIFF_BYTES);
  return { sha, file, input: source.localPath ?? (await source.bytes()), head, bytes: source.size };
}
