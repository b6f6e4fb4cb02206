/**
 * The one table that turns a failure into what it means: an outcome for the item (and sometimes
 * for the run), or a stop of the whole run. Stages catch, call {@link failureOutcome}, and return
 * what it says; the flow routes the outcome. Codes and exit codes: docs/contract.md#report-json and
 * docs/contract.md#exit-codes.
 */
import { ApiError } from '../api/errors.js';
import { KitchenError, ResultDecodeError, ServiceRefusedError, StateError } from '../errors.js';
import { StorageError } from '../storage/types.js';
import type { ItemError } from '../types.js';
import { isLocalFsError } from '../util/fs.js';

/** What became of an item in a stage; the flow decides what comes next. */
export type Outcome =
  /** submit: the service took the job; its id is journaled. */
  | { kind: 'accepted'; jobId: string }
  /** poll: the job ended at the service (`ended` is journaled). */
  | { kind: 'ended'; status: 'succeeded' | 'failed'; jobId: string; error: ItemError | null }
  /** download: the result is on disk (`downloaded` is journaled). */
  | { kind: 'downloaded'; jobId: string }
  /** submit: the service refused this item alone (400/413/415/422): failed, nothing was created. */
  | { kind: 'refused'; error: ItemError }
  /**
   * The item did not finish in this run; `fatal` is set when the run must stop too (service
   * unreachable); `halt` when no new job may start but those accepted may end (nothing could be stored).
   */
  | { kind: 'incomplete'; error: ItemError; fatal?: KitchenError; halt?: boolean }
  /** The run is stopping: nothing to record, the journal already says where the item stands. */
  | { kind: 'stopped' }
  /** The run must stop (refused key, broken disk, a bug). */
  | { kind: 'fatal'; error: KitchenError };

/** The item stages. */
export type Stage = 'submit' | 'poll' | 'download';

/** What the table needs to know besides the error. */
export interface FailureContext {
  /** The run is stopping (soft stop or an earlier fatal error). */
  stopping: boolean;
  /** The service has not answered for long (`ServiceGate.unreachable`). */
  unreachable: boolean;
  baseUrl: string;
  /** Where results are written, for messages about the disk. */
  resultsDir: string;
  /** The job the stage worked on, for messages. */
  jobId?: string | null;
}

/** A poll's budget of time ran out: a local verdict, thrown by the poll stage's own check. */
export class JobTimeoutError extends KitchenError {
  constructor(jobId: string, timeoutMs: number) {
    super(
      'job_timeout',
      `job ${jobId} did not end within --job-timeout ${Math.round(timeoutMs / 1000)} s; a rerun polls it again`,
    );
  }
}

/**
 * The table. Rows in order: our own stop (a submission's answer is still recorded); a refused key
 * (exit 3); local verdicts (job timeout, a result that does not decode); local disk faults and
 * other non-service errors (fatal, but for a download's odd local failure, which a rerun retries);
 * then, per stage, the service's answers. An item left incomplete by transient failures also stops
 * the run when the service stays unreachable (exit 3).
 */
export function failureOutcome(stage: Stage, error: unknown, ctx: FailureContext): Outcome {
  const api = error instanceof ApiError ? error : undefined;
  if (ctx.stopping && (stage !== 'submit' || !api)) return { kind: 'stopped' };
  // The result storage takes no key: its 403 is an expired URL, not a refused key.
  if (api?.auth && stage !== 'download') return { kind: 'fatal', error: refusedKey(api) };
  if (error instanceof JobTimeoutError) return { kind: 'incomplete', error: itemError(error) };
  if (error instanceof ResultDecodeError) return { kind: 'incomplete', error: downloadFailed(error) };
  if (!api) {
    const stored = outputOutcome(error);
    if (stored) return stored;
    if (isLocalFsError(error)) {
      const where: DiskPlace = stage === 'download' ? { results: ctx.resultsDir } : {};
      return { kind: 'fatal', error: diskError(error, where) };
    }
    if (stage === 'download' && !(error instanceof KitchenError)) {
      return { kind: 'incomplete', error: downloadFailed(error as Error) };
    }
    return { kind: 'fatal', error: runError(error) };
  }
  return serviceOutcome(stage, api, ctx);
}

/** The per-stage rows of the table: what the service's (or the network's) answer means. */
function serviceOutcome(stage: Stage, error: ApiError, ctx: FailureContext): Outcome {
  const unreachable = (outcome: Extract<Outcome, { kind: 'incomplete' }>): Outcome =>
    affectsReachability(error) && ctx.unreachable
      ? { ...outcome, fatal: unreachableError(ctx.baseUrl, error) }
      : outcome;
  switch (stage) {
    case 'submit':
      if (!error.transient) return { kind: 'refused', error: serviceError(error) };
      if (error.mayHaveCreatedJob) {
        return {
          kind: 'incomplete',
          error: {
            code: 'submit_unknown',
            message: `the job may have been created (${error.message}); not resent, to avoid a duplicate charge. A rerun (or --retry-ambiguous) sends it again`,
          },
        };
      }
      return unreachable({
        kind: 'incomplete',
        error: { code: 'service_unavailable', message: `not submitted: ${error.message}` },
      });
    case 'poll':
      if (error.status === 404 || error.status === 410) {
        return {
          kind: 'incomplete',
          error: {
            code: 'job_not_found',
            message: `the service no longer knows job ${ctx.jobId} (HTTP ${error.status}); not resubmitted automatically`,
          },
        };
      }
      return unreachable({
        kind: 'incomplete',
        error: { code: 'poll_failed', message: `polling job ${ctx.jobId} kept failing: ${error.message}` },
      });
    case 'download':
      return unreachable({ kind: 'incomplete', error: downloadFailed(error) });
  }
}

/** What `GET /v1/styles` failing means: the run cannot start (exit 3), or styles go unchecked. */
export function stylesFailure(
  error: unknown,
  baseUrl: string,
): { kind: 'fatal'; error: KitchenError } | { kind: 'unchecked'; message: string } {
  if (error instanceof ApiError && error.auth) return { kind: 'fatal', error: refusedKey(error) };
  if (error instanceof ApiError && error.transient) {
    return {
      kind: 'fatal',
      error: new ServiceRefusedError(
        'unreachable',
        `the service at ${baseUrl} cannot be reached: ${error.message}`,
        { cause: error },
      ),
    };
  }
  if (error instanceof ApiError) {
    return {
      kind: 'unchecked',
      message: `GET /v1/styles failed (${error.message}); styles are not checked before submitting`,
    };
  }
  return { kind: 'fatal', error: runError(error) };
}

/** Any error that stops a run, as a {@link KitchenError} with a message a user can act on. */
export function runError(error: unknown, outDir?: string): KitchenError {
  if (error instanceof KitchenError) return error;
  if (isLocalFsError(error)) return diskError(error, outDir === undefined ? {} : { outDir });
  return new KitchenError('internal', `unexpected error: ${(error as Error)?.stack ?? String(error)}`);
}

/** The service's own code and words for an item (a refused submission), else ours. */
export function serviceError(error: ApiError): ItemError {
  return { code: error.serviceCode ?? error.code, message: error.serviceMessage ?? error.message };
}

function itemError(error: KitchenError): ItemError {
  return { code: error.code, message: error.message };
}

/**
 * A result the output store would not take: another object already holds its key with other bytes
 * (never overwritten: `output_conflict`), its bytes no longer match the sha256 they were verified
 * with (`download_failed`: a rerun downloads it again), or the store stayed unreachable after its retries
 * (`output_unavailable`, and no new submissions: nothing they paid for could be stored).
 */
function outputOutcome(error: unknown): Outcome | null {
  if (error instanceof StorageError && error.code === 'object_exists') {
    return {
      kind: 'incomplete',
      error: {
        code: 'output_conflict',
        message: `${error.message}; the stored object was not overwritten. Move it aside (or use another --out) and rerun`,
      },
    };
  }
  // The result's bytes changed after they were verified (the store checked them): this item only.
  if (error instanceof StorageError && error.code === 'body_mismatch') {
    return { kind: 'incomplete', error: downloadFailed(error) };
  }
  // Only the output store's own verdict: a network error of the result download is not the store's.
  if (error instanceof StorageError && error.code === 'store_unavailable') {
    return {
      kind: 'incomplete',
      error: {
        code: 'output_unavailable',
        message: `the output store could not be written (${(error as Error).message}); a rerun stores it`,
      },
      halt: true,
    };
  }
  return null;
}

function downloadFailed(error: Error): ItemError {
  return { code: 'download_failed', message: `result download failed: ${error.message}; a rerun retries it` };
}

/** Errors that say nothing of the service being up: a 4xx other than 429 is an answer. */
function affectsReachability(error: ApiError): boolean {
  return !(error.kind === 'http' && error.status !== undefined && error.status < 500 && error.status !== 429);
}

function refusedKey(error: ApiError): ServiceRefusedError {
  return new ServiceRefusedError(
    error.status === 403 ? 'forbidden' : 'unauthorized',
    `the service refused the API key (HTTP ${error.status}${error.serviceMessage ? `: ${error.serviceMessage}` : ''}); check KITCHEN_API_KEY. State is saved; rerun when fixed`,
    { cause: error },
  );
}

function unreachableError(baseUrl: string, error: ApiError): ServiceRefusedError {
  return new ServiceRefusedError(
    'unreachable',
    `the service at ${baseUrl} stayed unreachable (${error.message}); state is saved, rerun to continue`,
    { cause: error },
  );
}

/** Where a disk fault happened, for its message: the results folder, or the run's folder. */
type DiskPlace = { results: string } | { outDir?: string };

function diskError(error: NodeJS.ErrnoException, where: DiskPlace): StateError {
  const message =
    'results' in where
      ? `cannot write results to ${where.results} (${error.code}); the run stops, nothing is marked done; free space and rerun`
      : `cannot write${where.outDir ? ` in ${where.outDir}` : ''} (${error.code}${error.path ? ` on ${error.path}` : ''}); free space or fix permissions, then rerun`;
  return new StateError('disk', message, { cause: error });
}
