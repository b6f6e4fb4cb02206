/**
 * S3 access for sources (issue 32), one client shared with the S3 output of issue 33: references,
 * the client, the source store and glob listing.
 */

export { SourceError, type SourceErrorCode } from '../http/errors.js';
export {
  createS3Client,
  credentialSourceFrom,
  describeS3Access,
  resolveCredentialSource,
  type S3Access,
  type S3AccessConfig,
  type S3ClientOptions,
  type S3Env,
} from './client.js';
export { isAbort, toSourceError } from './errors.js';
export { FAST_GLOB_MATCH_OPTIONS, type ListS3GlobOptions, listS3Glob, type S3ListedObject } from './list.js';
export { isStoreUnavailable, toStoreError } from './output-errors.js';
export { S3OutputStore, type S3OutputStoreOptions } from './output-store.js';
export { isOutputUrl, type OutputUrl, parseOutputUrl } from './output-url.js';
export { formatS3Ref, globPrefix, isS3Glob, isS3Ref, parseS3Ref, S3_SCHEME, type S3Ref } from './ref.js';
export {
  DEFAULT_MAX_SOURCE_BYTES,
  type S3NotModified,
  type S3OpenedSource,
  type S3ReadOptions,
  type S3SourceInfo,
  S3SourceStore,
  type S3SourceStoreOptions,
} from './source-store.js';
