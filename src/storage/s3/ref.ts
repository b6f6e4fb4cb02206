/**
 * `s3://bucket/key` references and S3 globs (issue 32). Keys are taken verbatim: an S3 key may hold
 * `#`, `?`, `+`, `%`, spaces and any unicode, and WHATWG `URL` would cut a fragment at `#`, a query
 * at `?` and percent-decode or re-encode the rest, so these are split by hand at the first `/`
 * after the bucket and never decoded.
 */
import fg from 'fast-glob';
import { UsageError } from '../../errors.js';

/** The scheme every S3 reference starts with (lower case, as the AWS CLI writes it). */
export const S3_SCHEME = 's3://';

/** A parsed `s3://bucket/key`. */
export interface S3Ref {
  bucket: string;
  /** The object key, exactly as written after `bucket/` (no decoding). */
  key: string;
}

// Bucket names as the S3 documentation allows them (3-63 chars; lower case, digits, `.` and `-`),
// loosened to upper case and `_` because S3-compatible servers (and legacy us-east-1 buckets) take them.
const BUCKET_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{2,254}$/;

/** Whether `value` is written as an S3 reference (`s3://...`); says nothing of its validity. */
export function isS3Ref(value: string): boolean {
  return value.startsWith(S3_SCHEME);
}

/**
 * Splits `s3://bucket/key` into bucket and key, verbatim; with `prefix`, a key prefix (`s3://bucket/`,
 * `s3://bucket/out/`: an output location) whose key may be empty.
 * @throws {UsageError} when the scheme, the bucket or the key is missing or the bucket is not a bucket name.
 */
export function parseS3Ref(ref: string, options: { prefix?: boolean } = {}): S3Ref {
  if (!isS3Ref(ref)) {
    throw new UsageError(`${JSON.stringify(ref)} is not an S3 reference: expected s3://bucket/key`);
  }
  const rest = ref.slice(S3_SCHEME.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  if (bucket === '') {
    throw new UsageError(`${JSON.stringify(ref)} names no bucket: expected s3://bucket/key`);
  }
  if (!BUCKET_RE.test(bucket)) {
    throw new UsageError(
      `${JSON.stringify(ref)}: ${JSON.stringify(bucket)} is not a bucket name (3 to 255 letters, digits, ".", "-" or "_")`,
    );
  }
  const key = slash === -1 ? '' : rest.slice(slash + 1);
  if (key === '' && !options.prefix) {
    throw new UsageError(
      `${JSON.stringify(ref)} names a bucket but no object key: expected s3://${bucket}/key`,
    );
  }
  return { bucket, key };
}

/** The reference of `key` in `bucket`: the inverse of {@link parseS3Ref}. */
export function formatS3Ref(bucket: string, key: string): string {
  return `${S3_SCHEME}${bucket}/${key}`;
}

/**
 * Whether the key of an S3 reference is a glob, by fast-glob's own rule (`isDynamicPattern`, with the
 * options src/manifest/expand.ts uses), so `s3://b/k/*.jpg` and `kitchens/*.jpg` on disk agree.
 * Note that `?` is a glob character there as on disk: a key holding a literal `?` is a glob that
 * also matches itself (`?` matches any one character, `?` included).
 */
export function isS3Glob(ref: string | S3Ref): boolean {
  const { key } = typeof ref === 'string' ? parseS3Ref(ref) : ref;
  return fg.isDynamicPattern(key);
}

// Characters after which a key pattern may stop being literal: glob syntax, extglob openers, escapes.
// Stopping early only shortens the listing prefix, which is always safe.
const SPECIAL = new Set(['*', '?', '[', ']', '{', '}', '(', ')', '!', '@', '+', '\\']);

/**
 * The literal start of a key pattern, used as ListObjectsV2's `Prefix`: every whole segment before
 * the first dynamic one (by {@link isS3Glob}'s rule), then the dynamic segment's characters up to
 * its first special character. `kitchens/**\/*.jpg` → `kitchens/`; `kitchens/sku1*.jpg` →
 * `kitchens/sku1`; `*.jpg` → `` (the whole bucket).
 */
export function globPrefix(keyPattern: string): string {
  const segments = keyPattern.split('/');
  let prefix = '';
  for (const [index, segment] of segments.entries()) {
    const last = index === segments.length - 1;
    if (!fg.isDynamicPattern(segment)) {
      // The last segment is never a folder; a static one means the whole key is static.
      if (last) return prefix + segment;
      prefix += `${segment}/`;
      continue;
    }
    for (const char of segment) {
      if (SPECIAL.has(char)) break;
      prefix += char;
    }
    return prefix;
  }
  return prefix;
}
