/**
 * Remote http(s) sources (issue 32): the address guard, the fetcher and their error codes. URL
 * redaction for anything a person reads lives in `src/util/redact-url.ts`.
 */
export { type AddressClass, classifyAddress } from './address.js';
export { SourceError, type SourceErrorCode, type SourceErrorReason } from './errors.js';
export {
  DEFAULT_MAX_SOURCE_BYTES,
  type FetchSourceOptions,
  fetchSource,
  fetchSourceBytes,
  MAX_REDIRECTS,
  type SourceBytes,
  type SourceMeta,
  type SourceNotModified,
  type SourceResponse,
} from './fetch.js';
export {
  ALLOW_PRIVATE_ENV,
  ALLOW_PRIVATE_FLAG,
  allowPrivateFromEnv,
  checkHost,
  parseSourceUrl,
  type ResolvedAddress,
  refusedClass,
  SourceAgents,
  type SourceAgentsOptions,
  type SourceGuardOptions,
  type SourceResolver,
} from './guard.js';
