/**
 * What a preflight answers for one image, and how a failure to read the source becomes that answer:
 * shared by the local path (`index.ts`) and the remote one (`remote.ts`).
 *
 * @module
 */
import path from 'node:path';
import { FORMAT_CONTENT_TYPE, FORMAT_EXTENSION, type UploadFormat } from '../image/format.js';
import { SourceError } from '../storage/http/errors.js';
import { parseS3Ref } from '../storage/s3/ref.js';
import { sourceKind } from '../storage/sources.js';
import type { RejectCode } from '../types.js';
import { redactUrl } from '../util/redact-url.js';
import type { ImageInfo } from './analysis.js';
import type { CacheEntry } from './cache.js';

/** What the preflight did with an accepted image. */
export type PreflightAction = 'as-is' | 'converted' | 'resized';

/** MIME types of the formats the service accepts. */
export type UploadContentType = 'image/jpeg' | 'image/png' | 'image/webp';

/**
 * Why an image is not uploaded: a rejection code, or `source_unavailable` (a remote source that
 * could not be read now: the item is incomplete and a rerun tries again).
 */
export type PreflightErrorCode = RejectCode | 'source_unavailable';

/** The outcome for one image: what to upload, or why it is refused. */
export type PreflightResult =
  | {
      ok: true;
      /** sha256 of the source file's bytes (the resume fingerprint). */
      sourceSha256: string;
      /** Size and mtime of the source when it was read (what a rerun compares before trusting the hash). */
      sourceFile: SourceFile;
      action: PreflightAction;
      original: ImageInfo;
      prepared: ImageInfo;
      /**
       * The file to upload: the source itself for a local 'as-is', the spooled copy of a remote one
       * (kept until `Preflighter.release`), else the prepared file.
       */
      path: string;
      contentType: UploadContentType;
      /** Upload file name: the source's base name with the prepared format's extension, e.g. `k1.jpg`. */
      filename: string;
      /** Words for `plan`, e.g. 'resized from 6000×4000 / 14.2 MB to 4096×2731 / 2.1 MB'. */
      note?: string;
      /** What was done, step by step (`rotated 90°`, `CMYK → sRGB`, …); empty for 'as-is'. */
      steps: string[];
    }
  | {
      ok: false;
      sourceSha256: string | null;
      sourceFile: SourceFile | null;
      error: { code: PreflightErrorCode; message: string };
    };

/**
 * Size and mtime of a source as read, and the validators a remote source sent with it (what the
 * journal keeps for a conditional rerun).
 */
export interface SourceFile {
  size: number;
  mtimeMs: number;
  etag?: string;
  lastModified?: string;
  versionId?: string;
}

/** A refusal found before any image work: the code and the whole message. */
export interface SourceRefusal {
  code: PreflightErrorCode;
  message: string;
}

/** File-system errors that mean "there is no readable image here"; anything else is thrown. */
export function unreadable(error: unknown): CacheEntry | undefined {
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

/**
 * A remote store's {@link SourceError} as the item's outcome: its code (404 → `file_not_found`,
 * 401/403 → `source_forbidden`, the guard → `source_blocked`, over the cap → `too_large`, the rest
 * `source_unavailable`) and its message, which names the source already redacted. Undefined for
 * anything else (an abort, a local disk fault), which the caller throws.
 */
export function sourceRefusal(error: unknown): SourceRefusal | undefined {
  if (!(error instanceof SourceError)) return undefined;
  return { code: error.code, message: error.message };
}

/** A reference as messages show it: a URL with its secrets (signatures, tokens) as `***`. */
export function shownRef(ref: string): string {
  return sourceKind(ref) === 'http' ? redactUrl(ref) : ref;
}

/** The base name of a source, without its extension: a file's, a URL path's last segment, an S3 key's. */
export function baseName(ref: string): string {
  let name: string;
  switch (sourceKind(ref)) {
    case 's3':
      name = parseS3Ref(ref).key.split('/').pop() ?? '';
      break;
    case 'http': {
      const segment = new URL(ref).pathname.split('/').pop() ?? '';
      try {
        name = decodeURIComponent(segment);
      } catch {
        name = segment;
      }
      break;
    }
    default:
      name = path.basename(ref);
  }
  const stem = name.slice(0, name.length - path.extname(name).length);
  return stem === '' ? 'image' : stem;
}

/**
 * The answer for one image from its content-level outcome. `upload` is the file an as-is image goes
 * up from (the local source, or a remote source's spooled copy).
 */
export function toResult(
  outcome: CacheEntry,
  source: { sha: string | null; file: SourceFile | null },
  ref: string,
  upload: string,
): PreflightResult {
  const sha = source.sha;
  if (!outcome.ok)
    return {
      ok: false,
      sourceSha256: sha,
      sourceFile: source.file,
      error: { code: outcome.code, message: `${shownRef(ref)}: ${outcome.reason}` },
    };
  const format = outcome.prepared.format as UploadFormat;
  return {
    ok: true,
    sourceSha256: sha as string,
    sourceFile: source.file as SourceFile,
    action: outcome.action,
    original: outcome.original,
    prepared: outcome.prepared,
    // Identical bytes at two paths share one preparation, but each as-is item uploads its own file.
    path: outcome.file ?? upload,
    contentType: FORMAT_CONTENT_TYPE[format],
    filename: `${baseName(ref)}.${FORMAT_EXTENSION[format]}`,
    steps: outcome.steps,
    ...(outcome.note === undefined ? {} : { note: outcome.note }),
  };
}
