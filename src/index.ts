/**
 * kitchen-batch as a library: `import { runBatch } from 'kitchen-batch'`.
 * The CLI is a thin shell over these.
 */

export type { ClientOptions, Job, Style } from './api/index.js';
export { ApiError, KitchenClient, RateGovernor } from './api/index.js';
export * from './errors.js';
export { readManifest } from './manifest/index.js';
export type { ProgressCounts, RunEvent } from './pipeline/events.js';
export type {
  LimitOptions,
  OutputOptions,
  PreflightRunOptions,
  ResumeOptions,
  RunOptions,
  ServiceOptions,
  SignalOptions,
  TimingOptions,
} from './pipeline/options.js';
export { type RunResult, runBatch } from './pipeline/run.js';
export type { PreflightOptions, PreflightResult } from './preflight/index.js';
export { createPreflighter } from './preflight/index.js';
export type { Sandbox, SandboxOptions } from './sandbox/index.js';
export { startSandbox } from './sandbox/index.js';
export type * from './types.js';
