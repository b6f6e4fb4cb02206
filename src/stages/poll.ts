/**
 * Poll: asks for the item's job until it ends, never twice within 2 s per job
 * (docs/contract.md#poll-floor), its first poll placed from the times jobs took so far in the run.
 * Failed polls are retried by the gate (the floor holds for retries too); a job that does not end
 * within the job timeout is left `incomplete/job_timeout` with its id kept, so a rerun polls it.
 */
import type { Job } from '../api/wire.js';
import type { ItemState } from '../state/state.js';
import { monotonicMs } from '../util/time.js';
import { failed, type StageContext } from './context.js';
import { JobTimeoutError, type Outcome } from './outcomes.js';

/**
 * One GET of the item's job through the gate (retried there), each attempt counted against the 2 s
 * floor: the one request both the poll loop and a download's fresh-URL poll send.
 * @param beforeAttempt waits for the job's turn (and checks what else the caller must) before each attempt
 */
export function askJob(
  ctx: StageContext,
  id: string,
  jobId: string,
  beforeAttempt: () => Promise<void>,
): Promise<Job> {
  return ctx.gate.call(
    'poll',
    async () => {
      try {
        return await ctx.client.getJob(jobId, { signal: ctx.abort });
      } finally {
        ctx.polls.polled(id);
      }
    },
    { signal: ctx.stop, label: id, beforeAttempt },
  );
}

/** Options of {@link pollJob}. */
export interface PollOptions {
  /** A job not ended this long after this run started polling it is `incomplete/job_timeout`. */
  jobTimeoutMs: number;
}

/** Polls the item's job (its id is in `state`) until it ends; `ended` is journaled. */
export async function pollJob(ctx: StageContext, state: ItemState, options: PollOptions): Promise<Outcome> {
  const { id, fp } = state;
  const jobId = state.jobId!;
  const startedMono = monotonicMs();
  let delay: number | (() => number) = () => ctx.polls.firstDelay(id);
  const beforeAttempt = async () => {
    await ctx.polls.waitTurn(id, delay, ctx.stop);
    // After a failed attempt the floor alone decides (the gate has already backed off).
    delay = 0;
    if (monotonicMs() - startedMono > options.jobTimeoutMs)
      throw new JobTimeoutError(jobId, options.jobTimeoutMs);
  };
  try {
    for (;;) {
      const job = await askJob(ctx, id, jobId, beforeAttempt);
      if (job.status === 'succeeded' || job.status === 'failed') {
        ctx.polls.ended(id, job);
        await ctx.store.record(
          {
            t: 'ended',
            id,
            fp,
            job_id: jobId,
            status: job.status,
            image_url: job.imageUrl,
            processing_time_ms: job.processingTimeMs,
            error: job.error,
          },
          // Not waited for: the download sends nothing that costs, and a crash before this commits
          // costs one poll of the rerun. The `downloaded` record commits after it.
          { wait: false },
        );
        if (job.status === 'failed') {
          ctx.logger.info({ event: 'failed', item: id, job_id: jobId, code: job.error?.code }, 'job failed');
        }
        return { kind: 'ended', status: job.status, jobId, error: job.error };
      }
      ctx.polls.running(id);
      delay = ctx.polls.nextDelay(id);
    }
  } catch (error) {
    return failed(ctx, 'poll', error, jobId);
  }
}
