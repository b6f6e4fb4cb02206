/**
 * The preflight's cache on disk: prepared uploads named `<sourceSha256>-<optionsKey>.<ext>` with a
 * JSON sidecar, so a rerun with the same options does no image work again. The sidecar is written
 * last: its presence promises that the prepared file is whole.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FORMAT_EXTENSION, type UploadFormat } from '../image/format.js';
import { sha256 } from '../util/fs.js';
import type { AnalyseLimits, Analysis, ImageInfo } from './analyse.js';

/** Bump when the output of the preparation changes, so stale cache entries are not reused. */
const CACHE_VERSION = 3;

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
    // Written without fsync (a cache is cheap to redo), so after a power cut the file may be torn
    // or zero-filled at the right size; it may also be deleted or altered since: its hash decides.
    const data = await readFile(entry.file).catch(() => null);
    if (data?.length !== entry.prepared.bytes || sha256(data) !== entry.sha256) return undefined;
  }
  const { sha256: _hash, ...accepted } = entry;
  return accepted;
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
  let hash: string | undefined;
  if (analysis.data) {
    const file = `${base}.${FORMAT_EXTENSION[analysis.prepared.format as UploadFormat]}`;
    await writeFileRenamed(file, analysis.data);
    entry.file = file;
    hash = sha256(analysis.data);
  }
  // Nothing here must survive a power cut: a torn or lost entry only means preparing again, and
  // a prepared file is trusted only while its hash matches the sidecar's (readCache). So no fsync:
  // measured, the two fsyncs of an atomic write were a tenth of the normalisation path.
  const sidecar = `${JSON.stringify({ v: CACHE_VERSION, ...entry, ...(hash ? { sha256: hash } : {}) })}\n`;
  await writeFileRenamed(`${base}.json`, sidecar);
  return entry;
}

/** Atomic (temp file + rename) but not durable: for cache entries that are cheap to redo. */
async function writeFileRenamed(file: string, data: string | Buffer): Promise<void> {
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

function isCachedEntry(value: unknown): value is Accepted & { v: number; sha256?: string } {
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
    (v.file === undefined || (typeof v.sha256 === 'string' && v.sha256.length === 64)) &&
    (v.note === undefined || typeof v.note === 'string') &&
    Array.isArray(v.steps) &&
    v.steps.every((step) => typeof step === 'string')
  );
}
