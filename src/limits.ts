/**
 * The bounds and defaults that `run`, `plan`, the worker and the library share, named once: a worker
 * takes the same values a run does, and a default changed here changes everywhere
 * (docs/contract.md#options, #worker-mode).
 */

/** Jobs (or items) one process holds at once. */
export const CONCURRENCY = { min: 1, max: 1000, default: 8 } as const;
/** Longest side of an uploaded image, px. */
export const MAX_SIDE = { min: 64, max: 16_384, default: 4096 } as const;
/** A job not ended this long after polling of it started is `incomplete/job_timeout`. */
export const JOB_TIMEOUT_MS = 1_800_000;
/** No answer from the service for this long while calls keep failing: unreachable (exit 3). */
export const UNREACHABLE_MS = 120_000;
/** After a stop, how long requests in flight get before they are aborted: a run's default. */
export const RUN_GRACE_MS = 5000;
/**
 * How long a silent worker's lock on its items lasts (`--stall-timeout`): they are back in play within
 * 1.4 times this (the lock runs out, then the next stall check, every 0.4 of it, finds them), short
 * enough that a killed worker costs a night little, long enough that a live worker's lock, renewed
 * every 0.15 to 0.3 of it, survives its event loop being held up for the rest (docs/contract.md#worker-mode).
 */
export const WORKER_STALL_MS = 10_000;
/** After a worker's stop, how long requests in flight get before items are handed back (`--grace`). */
export const WORKER_GRACE_MS = 10_000;
/** A source (https or S3) over this many bytes is refused without reading the rest (issue 32's `--max-source-bytes`). */
export const DEFAULT_MAX_SOURCE_BYTES = 200 * 1024 * 1024;
