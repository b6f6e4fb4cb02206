export { parseRetryAfter } from '../util/retry-after.js';
export {
  type CallOptions,
  type ClientOptions,
  type CreateJobInput,
  type DownloadedFile,
  KitchenClient,
} from './client.js';
export { ApiError, type ApiErrorKind, type ApiRequestInfo } from './errors.js';
export { type GateOptions, ServiceGate, type ServiceStats } from './gate.js';
export { type GovernorEvent, type GovernorOptions, type Priority, RateGovernor } from './governor.js';
export {
  backoffDelay,
  isRetryable,
  MAX_RETRY_AFTER_MS,
  type RequestKind,
  type RetryOptions,
  retryBudget,
  retryDelay,
} from './policy.js';
export { type Job, type JobStatus, parseJobEnvelope, parseStyles, type Style } from './wire.js';
