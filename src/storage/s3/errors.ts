/**
 * S3 failures as the source outcomes of issue 32 (`SourceError` codes). One mapping for every call
 * the S3 source store makes, so that HEAD, GET and LIST agree. Messages name `s3://bucket/key`, the
 * S3 error code and the HTTP status, and never the service's own message: S3 echoes the access key
 * id (InvalidAccessKeyId) and the string to sign (SignatureDoesNotMatch) there.
 */
import { SourceError, type SourceErrorCode, type SourceErrorReason } from '../http/errors.js';

// S3 error codes (the `name` of the SDK's exception) by outcome. HEAD answers carry no body, so the
// SDK names them after the status (`NotFound`, `Forbidden`); GET and LIST carry the XML code.
const NOT_FOUND = new Set(['NoSuchKey', 'NotFound', 'NoSuchBucket', 'NoSuchVersion']);
const FORBIDDEN = new Set([
  'AccessDenied',
  'Forbidden',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'AllAccessDisabled',
  'AccountProblem',
  'CredentialsProviderError',
]);
// Socket-level failures the SDK retried and gave up on (Node's errno codes and the SDK's timeout names).
export const NETWORK: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);

/** The fields of an SDK error this mapping reads (an S3ServiceException, a network or credential error). */
export interface SdkErrorShape {
  name?: unknown;
  code?: unknown;
  $metadata?: { httpStatusCode?: number; attempts?: number };
}

export function shape(error: unknown): SdkErrorShape {
  return typeof error === 'object' && error !== null ? (error as SdkErrorShape) : {};
}

/**
 * What an SDK error says, for messages: its S3 error code (`name`), errno, HTTP status, attempts,
 * and `said` (`NoSuchBucket, HTTP 404`; the status alone when a bodiless answer left no name).
 */
export function sdkFacts(error: unknown) {
  const e = shape(error);
  const name = typeof e.name === 'string' ? e.name : 'Error';
  const errno = typeof e.code === 'string' ? e.code : undefined;
  const status = e.$metadata?.httpStatusCode;
  const attempts = e.$metadata?.attempts ?? 0;
  // A bodiless answer (HEAD, some proxies) leaves the SDK nothing to name it by but the status.
  const named = name !== 'Unknown' && name !== 'UnknownError' && name !== 'Error';
  const said = status === undefined ? name : named ? `${name}, HTTP ${status}` : `HTTP ${status}`;
  return { name, errno, status, attempts, said };
}

/** Whether `error` is the caller's own abort (an AbortSignal), which is not a source fault. */
export function isAbort(error: unknown): boolean {
  const { name } = shape(error);
  return name === 'AbortError';
}

/**
 * Turns what the SDK threw for `ref` into a {@link SourceError}; a {@link SourceError} passes through.
 * The caller rethrows aborts as they are (see {@link isAbort}).
 */
export function toSourceError(error: unknown, ref: string): SourceError {
  if (error instanceof SourceError) return error;
  const { name, errno, status, attempts, said } = sdkFacts(error);

  let code: SourceErrorCode;
  let reason: SourceErrorReason = 'status';
  let message: string;
  if (NOT_FOUND.has(name) || status === 404 || status === 410) {
    code = 'file_not_found';
    message =
      name === 'NoSuchBucket'
        ? `${ref}: the bucket does not exist (${said})`
        : `${ref}: no such object (${said})`;
  } else if (FORBIDDEN.has(name) || status === 401 || status === 403) {
    code = 'source_forbidden';
    reason = name === 'CredentialsProviderError' ? 'credentials' : 'status';
    message =
      name === 'CredentialsProviderError'
        ? `${ref}: no AWS credentials were found by the default chain (environment, shared config, web identity, container, instance)`
        : `${ref}: access refused (${said}); check the credentials and the bucket policy`;
  } else if (name === 'PreconditionFailed' || status === 412) {
    // Only our own re-reads are conditional (If-Match on the ETag first seen): the object was
    // replaced while it was being read. A rerun reads the new version whole.
    code = 'source_unavailable';
    message = `${ref}: the object changed while it was being read (${said}); a rerun reads it again`;
  } else {
    code = 'source_unavailable';
    const network = NETWORK.has(name) || (errno !== undefined && NETWORK.has(errno));
    reason = name.includes('Timeout') || errno === 'ETIMEDOUT' ? 'timeout' : network ? 'network' : 'status';
    const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
    message = `${ref}: S3 is unavailable${tries} (${errno !== undefined && status === undefined ? errno : said})`;
  }
  return new SourceError({
    code,
    reason,
    message,
    ...(status === undefined ? {} : { status }),
    ...(errno === undefined ? {} : { errno }),
    attempts,
    cause: error,
  });
}
