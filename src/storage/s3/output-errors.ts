/**
 * S3 failures of the output store (issue 33) as {@link StorageError}s. Two outcomes matter to the
 * run: the store REFUSED (missing bucket, access denied, unknown key id: exit 2 before anything is
 * submitted) and the store is UNAVAILABLE (network, timeout, 5xx, SlowDown after the SDK's retries:
 * `incomplete/output_unavailable`, no new submissions). Messages name the object, the S3 error code
 * and status, never the service's own message (S3 echoes the access key id there).
 */

import { StorageError } from '../types.js';
import { describeS3Access, type S3Access } from './client.js';
import { NETWORK, sdkFacts, shape } from './errors.js';

// Answers that say "try later" rather than "no".
const BUSY = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'Throttling',
  'ThrottlingException',
]);

/** The S3 error code and HTTP status of an SDK error (`NoSuchBucket, HTTP 404`), or its errno. */
export function s3Said(error: unknown): string {
  const facts = sdkFacts(error);
  const said = facts.status === undefined ? (facts.errno ?? facts.name) : facts.said;
  return facts.attempts > 1 ? `${said}, after ${facts.attempts} attempts` : said;
}

/** The HTTP status an SDK error carries, if any. */
export function statusOf(error: unknown): number | undefined {
  return shape(error).$metadata?.httpStatusCode;
}

/** The S3 error code (the SDK exception's name). */
export function nameOf(error: unknown): string {
  const { name } = shape(error);
  return typeof name === 'string' ? name : '';
}

/**
 * Whether `error` means the store could not be reached after the SDK's retries (network errors,
 * timeouts, 5xx, SlowDown), as opposed to a refusal or a bad request: the caller maps it to
 * `incomplete/output_unavailable` and stops submitting. Reads a {@link StorageError}'s code, else the
 * SDK error itself (and its `cause`).
 */
export function isStoreUnavailable(error: unknown): boolean {
  // Our own errors say it by their code (a refusal, a missing or existing object: not unavailable).
  if (error instanceof StorageError) return error.code === 'store_unavailable';
  const e = shape(error);
  const name = typeof e.name === 'string' ? e.name : '';
  const errno = typeof e.code === 'string' ? e.code : '';
  const status = e.$metadata?.httpStatusCode;
  if (NETWORK.has(name) || NETWORK.has(errno) || BUSY.has(name)) return true;
  if (status !== undefined && status >= 500) return true;
  const cause = (error as { cause?: unknown } | null)?.cause;
  return cause !== undefined && cause !== error ? isStoreUnavailable(cause) : false;
}

/**
 * What the SDK threw for `what` (e.g. `putting s3://b/runs/a/report.json`) as a {@link StorageError}:
 * `store_unavailable` or `store_refused`, the latter naming the access (bucket, endpoint, region,
 * credential source) so the user sees which credentials were refused. A StorageError passes through.
 */
export function toStoreError(error: unknown, key: string, what: string, access: S3Access, bucket: string) {
  if (error instanceof StorageError) return error;
  const said = s3Said(error);
  if (isStoreUnavailable(error)) {
    return new StorageError('store_unavailable', key, `${what}: S3 is unavailable (${said})`, {
      cause: error,
    });
  }
  const name = nameOf(error);
  const why =
    name === 'NoSuchBucket'
      ? 'the bucket does not exist'
      : name === 'CredentialsProviderError'
        ? 'no AWS credentials were found by the default chain'
        : statusOf(error) === 403 || statusOf(error) === 401
          ? 'access refused; check the credentials and the bucket policy'
          : 'S3 refused the request';
  return new StorageError(
    'store_refused',
    key,
    `${what}: ${why} (${said}); ${describeS3Access(access.config, bucket)}`,
    { cause: error },
  );
}
