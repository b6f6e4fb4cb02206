/**
 * `s3://bucket/prefix/` output locations (issue 33) and the keys under them. Split by hand like
 * `parseS3Ref` (keys are verbatim: no WHATWG URL decoding of `#`, `?`, `%`), and normalised so the
 * prefix is `''` or ends in `/`: `s3://b/runs/a` and `s3://b/runs/a/` name the same folder.
 */
import path from 'node:path';
import { UsageError } from '../../errors.js';
import { StorageError } from '../types.js';
import { formatS3Ref, isS3Ref, parseS3Ref, S3_SCHEME } from './ref.js';

/** A parsed output location. */
export interface OutputUrl {
  bucket: string;
  /** `''` (the bucket's root) or a key prefix ending in `/`. */
  prefix: string;
}

/** Whether `value` is written as an S3 output location (`s3://...`); says nothing of its validity. */
export function isOutputUrl(value: string): boolean {
  return isS3Ref(value);
}

/**
 * Splits `s3://bucket/prefix/` into bucket and prefix (a `/` is added when missing).
 * @throws {UsageError} for another scheme, a bad bucket name, or a prefix with an empty, `.` or `..` segment.
 */
export function parseOutputUrl(url: string): OutputUrl {
  if (!isOutputUrl(url)) {
    throw new UsageError(`${JSON.stringify(url)} is not an S3 output location: expected s3://bucket/prefix/`);
  }
  const rest = url.slice(S3_SCHEME.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  // The bucket is checked by the reference parser's own rule (a dummy key makes it a full reference).
  parseS3Ref(formatS3Ref(bucket, 'k'));
  let prefix = slash === -1 ? '' : rest.slice(slash + 1);
  if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
  if (prefix !== '' && !isKey(prefix.slice(0, -1))) {
    throw new UsageError(
      `${JSON.stringify(url)}: the prefix must be slash-separated names without empty, "." or ".." parts`,
    );
  }
  return { bucket, prefix };
}

/** Whether `key` is a store key: relative, slash-separated, normalised (the local store's rule). */
export function isKey(key: string): boolean {
  if (key === '' || key.includes('\\') || key.includes('\0')) return false;
  return key.split('/').every((p) => p !== '' && p !== '.' && p !== '..');
}

/** `key` checked by {@link isKey}. @throws {StorageError} `bad_key` otherwise. */
export function checkKey(key: string): string {
  if (!isKey(key)) {
    throw new StorageError(
      'bad_key',
      key,
      `not a storage key: ${JSON.stringify(key)} (relative, slash-separated, no . or ..)`,
    );
  }
  return key;
}

/**
 * The bucket key a link relative to the prefix points at: `results/k1.jpg` → `<prefix>results/k1.jpg`,
 * `../shard-1/results/k1.jpg` (a merged report's link into a sibling run) → the sibling prefix in the
 * same bucket. A link that climbs above the bucket's root is a `bad_key`.
 */
export function resolveInBucket(prefix: string, relative: string): string {
  const joined = path.posix.normalize(`/${prefix}${relative}`);
  if (relative.startsWith('/') || !joined.startsWith('/') || joined === '/' || relative.includes('\0')) {
    throw new StorageError('bad_key', relative, `${JSON.stringify(relative)} leaves the bucket`);
  }
  // normalize('/../x') is '/x': check that no `..` was swallowed at the root.
  let depth = prefix.split('/').length - 1;
  for (const part of relative.split('/')) {
    if (part === '..') depth -= 1;
    else if (part !== '.' && part !== '') depth += 1;
    if (depth < 0)
      throw new StorageError('bad_key', relative, `${JSON.stringify(relative)} leaves the bucket`);
  }
  return joined.slice(1);
}
