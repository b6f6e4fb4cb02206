import { describe, expect, it, onTestFinished } from 'vitest';
import { KitchenClient } from '../../src/api/client.js';
import { ServiceRefusedError } from '../../src/errors.js';
import { pollJob } from '../../src/stages/poll.js';
import { submitItem } from '../../src/stages/submit.js';
import { ofKind, type StageWorld, stageWorld } from '../helpers/stages.js';

const FLOOR = 200;
const poll = (w: StageWorld, state: Parameters<typeof pollJob>[1], jobTimeoutMs = 30_000) =>
  pollJob(w.ctx, state, { jobTimeoutMs });

/** An accepted item: submitted through the submit stage. */
async function accepted(w: StageWorld, n = 1) {
  const { item, state, upload } = await w.item(n);
  const outcome = await submitItem(w.ctx, item, state, upload, { retryAmbiguous: false });
  if (outcome.kind !== 'accepted') throw new Error(`expected accepted, got ${outcome.kind}`);
  return { item, state, jobId: outcome.jobId };
}

/** Gaps between consecutive polls of one job, in ms, as the sandbox saw them. */
function gaps(w: StageWorld, jobId: string): number[] {
  const at = w.sandbox.stats.polls.get(jobId) ?? [];
  return at.slice(1).map((t, i) => t - at[i]!);
}

describe('poll stage (alone, against the sandbox)', () => {
  it('polls until the job succeeds, never twice within the floor, and journals `ended` with the URL', async () => {
    const w = await stageWorld({ sandbox: { processingMs: 700, jitterMs: 0 }, pollFloorMs: FLOOR });
    const { state, jobId } = await accepted(w);
    const outcome = await poll(w, state);
    expect(outcome).toEqual({ kind: 'ended', status: 'succeeded', jobId, error: null });
    expect(state).toMatchObject({ phase: 'succeeded', imageUrl: expect.stringContaining('/storage/') });
    const ended = ofKind(await w.records(), 'ended');
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({ job_id: jobId, status: 'succeeded', image_url: state.imageUrl });
    expect(gaps(w, jobId).length).toBeGreaterThan(0);
    for (const gap of gaps(w, jobId)) expect(gap).toBeGreaterThanOrEqual(FLOOR - 5);
  });

  it('a failed job ends `failed` with the service code and message', async () => {
    const w = await stageWorld({
      sandbox: { faults: { failRate: 1, failCode: 'not_a_kitchen', failMessage: 'a bathroom' } },
      pollFloorMs: FLOOR,
    });
    const { state, jobId } = await accepted(w);
    const outcome = await poll(w, state);
    expect(outcome).toEqual({
      kind: 'ended',
      status: 'failed',
      jobId,
      error: { code: 'not_a_kitchen', message: 'a bathroom' },
    });
    expect(state).toMatchObject({ phase: 'failed', error: { code: 'not_a_kitchen' } });
  });

  it('a job stuck in processing is left incomplete/job_timeout with its id kept', async () => {
    const w = await stageWorld({ sandbox: { faults: { stuckRate: 1 } }, pollFloorMs: FLOOR });
    const { state, jobId } = await accepted(w);
    const outcome = await poll(w, state, 900);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'job_timeout' } });
    expect(state).toMatchObject({ phase: 'accepted', jobId });
    expect(w.sandbox.stats.polls.get(jobId)!.length).toBeGreaterThanOrEqual(2);
  });

  it('a job the service no longer knows (404) is incomplete/job_not_found, polled once', async () => {
    const w = await stageWorld({ pollFloorMs: FLOOR });
    const { state, jobId } = await accepted(w);
    w.sandbox.setFaults({ pollNotFoundRate: 1 });
    const outcome = await poll(w, state);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'job_not_found' } });
    expect(w.sandbox.stats.polls.get(jobId)).toHaveLength(1);
  });

  it('answers that break the spec are retried with the floor kept, then incomplete/poll_failed after the budget', async () => {
    const w = await stageWorld({
      sandbox: { faults: { badStatusRate: 1 } },
      pollFloorMs: FLOOR,
      retry: { pollAttempts: 3, baseMs: 10, capMs: 20 },
    });
    const { state, jobId } = await accepted(w);
    const outcome = await poll(w, state);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'poll_failed' } });
    expect(w.sandbox.stats.polls.get(jobId)).toHaveLength(3);
    for (const gap of gaps(w, jobId)) expect(gap).toBeGreaterThanOrEqual(FLOOR - 5);
    expect(w.log().filter((l) => l.event === 'retry' && l.kind === 'poll')).toHaveLength(2);
  });

  it('a refused key stops the run', async () => {
    const w = await stageWorld({ pollFloorMs: FLOOR });
    const { state } = await accepted(w);
    // The key is revoked between the submission and the poll.
    const client = new KitchenClient({ baseUrl: w.sandbox.url, apiKey: 'sk_revoked' });
    onTestFinished(() => client.close());
    const outcome = await pollJob({ ...w.ctx, client }, state, { jobTimeoutMs: 30_000 });
    expect(outcome.kind).toBe('fatal');
    if (outcome.kind === 'fatal') expect(outcome.error).toBeInstanceOf(ServiceRefusedError);
  });

  it('stops waiting at once when the run stops', async () => {
    const w = await stageWorld({ sandbox: { faults: { stuckRate: 1 } }, pollFloorMs: 5000 });
    const { state } = await accepted(w);
    setTimeout(() => w.stop(), 50);
    expect(await poll(w, state)).toEqual({ kind: 'stopped' });
  });
});
