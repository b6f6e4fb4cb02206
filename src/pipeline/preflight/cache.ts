/**
 * The preflight's cache on disk: prepared uploads named `<sourceSha256>-<optionsKey>.<ext>` with a
 * JSON sidecar, so a rerun with the same options does no image work again. The sidecar is written
 * last: its presence promises that the prepared file is whole.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sha256, writeFileAtomic } from '../../util/fs.js';
import { FORMAT_EXTENSION, type UploadFormat } from '../../util/image-format.js';
import type { AnalyseLimits, Analysis, ImageInfo } from './analyse.js';

/** Bump when the output of the preparation changes, so stale cache entries are not reused. */
const CACHE_VERSION = 2;

/**
 * What the preflight knows of one content hash: an analysis with its bytes written out (`file`, the
 * cached prepared file, absent for 'as-is'), or why the image is refused.
 */
export type CacheEntry =
  | (Omit<Extract<Analysis, { ok: true }>, 'data'> & { file?: string })
  | Extract<Analysis, { ok: false }>;

type Accepted = Extract<CacheEntry, { ok: true }>;

/** The part of a cache file's name that says which options prepared it. */
export function cacheKey(limits: AnalyseLimits): string {
  return sha256(JSON.stringify({ v: CACHE_VERSION, ...limits })).slice(0, 16);
}

function stem(dir: string, sourceSha256: string, key: string): string {
  return path.join(dir, `${sourceSha256}-${key}`);
}

/** The cached preparation of `sourceSha256` under `limits`, or undefined (absent, torn or stale). */
export async function readCache(
  dir: string,
  sourceSha256: string,
  key: string,
): Promise<Accepted | undefined> {
  const base = stem(dir, sourceSha256, key);
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(`${base}.json`, 'utf8'));
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

/** Writes an accepted analysis out (the prepared bytes, then the sidecar) and returns its entry. */
export async function writeCache(
  dir: string,
  sourceSha256: string,
  key: string,
  analysis: Extract<Analysis, { ok: true }>,
): Promise<Accepted> {
  const base = stem(dir, sourceSha256, key);
  const entry: Accepted = {
    ok: true,
    action: analysis.action,
    original: analysis.original,
    prepared: analysis.prepared,
    steps: analysis.steps,
    ...(analysis.note === undefined ? {} : { note: analysis.note }),
  };
  if (analysis.data) {
    const file = `${base}.${FORMAT_EXTENSION[analysis.prepared.format as UploadFormat]}`;
    await writeFileAtomic(file, analysis.data);
    entry.file = file;
  }
  // An as-is sidecar guards nothing that must survive a power cut (the source is what gets
  // uploaded, and a torn sidecar only means preparing again), so it skips the two fsyncs:
  // measured ~1.6 ms, a seventh of the whole passthrough path.
  const sidecar = `${JSON.stringify({ v: CACHE_VERSION, ...entry })}\n`;
  if (entry.file) await writeFileAtomic(`${base}.json`, sidecar);
  else await writeFileRenamed(`${base}.json`, sidecar);
  return entry;
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

function isCachedEntry(value: unknown): value is Accepted & { v: number } {
  const v = value as Record<string, unknown> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    v.v === CACHE_VERSION &&
    v.ok === true &&
    (v.action === 'as-is' || v.action === 'converted' || v.action === 'resized') &&
    isImageInfo(v.original) &&
    isImageInfo(v.prepared) &&
    v.prepared.format in FORMAT_EXTENSION &&
    (v.file === undefined || typeof v.file === 'string') &&
    (v.action === 'as-is') === (v.file === undefined) &&
    (v.note === undefined || typeof v.note === 'string') &&
    Array.isArray(v.steps) &&
    v.steps.every((step) => typeof step === 'string')
  );
}
