import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ServiceRefusedError } from '../../src/errors.js';
import type { Sandbox } from '../../src/sandbox/index.js';
import { submitItem } from '../../src/stages/submit.js';
import { createRequests } from '../helpers/sandbox.js';
import { ofKind, stageWorld } from '../helpers/stages.js';

const once = { retryAmbiguous: false };

/** Switches the sandbox's errors off once it has answered `n` creates. */
async function healAfter(sandbox: Sandbox, n: number): Promise<void> {
  while (createRequests(sandbox) < n) await sleep(5);
  sandbox.setFaults({ errorRate: 0 });
}

describe('submit stage (alone, against the sandbox)', () => {
  it('journals `submitting` before the POST and `accepted` with the job id after it; one job created', async () => {
    const w = await stageWorld();
    const { item, state, upload } = await w.item(1);
    const outcome = await submitItem(w.ctx, item, state, upload, once);
    expect(outcome).toMatchObject({ kind: 'accepted', jobId: expect.stringMatching(/^job_/) });
    const records = (await w.records()).filter((r) => r.t !== 'item');
    expect(records.map((r) => r.t)).toEqual(['submitting', 'accepted']);
    expect(ofKind(records, 'accepted')[0]!.job_id).toBe(outcome.kind === 'accepted' ? outcome.jobId : '');
    expect(state).toMatchObject({ phase: 'accepted', submissions: 1, error: null });
    expect(createRequests(w.sandbox)).toBe(1);
    expect([...w.sandbox.stats.createsByItem.values()]).toEqual([1]);
    // The poll clock starts at creation: the first poll is not at once.
    expect(w.ctx.polls.firstDelay(item.id)).toBeGreaterThan(0);
  });

  it('a 422 refuses the item alone: `refused` with the service code, nothing counted, no retry', async () => {
    const w = await stageWorld({
      sandbox: {
        faults: { failCreateWith: { status: 422, code: 'not_a_kitchen', message: 'no kitchen in view' } },
      },
    });
    const { item, state, upload } = await w.item(1);
    const outcome = await submitItem(w.ctx, item, state, upload, once);
    expect(outcome).toEqual({
      kind: 'refused',
      error: { code: 'not_a_kitchen', message: 'no kitchen in view' },
    });
    expect(state).toMatchObject({ phase: 'failed', submissions: 0 });
    expect(ofKind(await w.records(), 'refused')).toHaveLength(1);
    expect(createRequests(w.sandbox)).toBe(1);
  });

  it('503s are resent (the service created nothing) and each is journaled `not_created`', async () => {
    const w = await stageWorld({
      sandbox: { faults: { errorRate: 1, errorStatuses: [503], errorOn: 'create' } },
      retry: { retries: 20, baseMs: 20, capMs: 60 },
    });
    const { item, state, upload } = await w.item(1);
    const healed = healAfter(w.sandbox, 2);
    const outcome = await submitItem(w.ctx, item, state, upload, once);
    await healed;
    expect(outcome.kind).toBe('accepted');
    const records = await w.records();
    const failedTries = ofKind(records, 'not_created').length;
    expect(failedTries).toBeGreaterThanOrEqual(2);
    expect(ofKind(records, 'submitting')).toHaveLength(failedTries + 1);
    expect(state.submissions).toBe(1);
    expect(createRequests(w.sandbox)).toBe(failedTries + 1);
    expect([...w.sandbox.stats.createsByItem.values()]).toEqual([1]);
  });

  it('a 500 may have created the job: incomplete/submit_unknown, not resent; --retry-ambiguous resends', async () => {
    const w = await stageWorld({
      sandbox: { faults: { errorRate: 1, errorStatuses: [500], errorOn: 'create' } },
      retry: { retries: 20, baseMs: 20, capMs: 60 },
    });
    const first = await w.item(1);
    const outcome = await submitItem(w.ctx, first.item, first.state, first.upload, once);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'submit_unknown' } });
    expect(createRequests(w.sandbox)).toBe(1);
    expect(first.state).toMatchObject({ phase: 'unknown', submissions: 1 });

    const second = await w.item(2);
    const healed = healAfter(w.sandbox, 3);
    const resent = await submitItem(w.ctx, second.item, second.state, second.upload, {
      retryAmbiguous: true,
    });
    await healed;
    expect(resent.kind).toBe('accepted');
    // Every ambiguous attempt stays counted: the report flags a possible duplicate.
    expect(second.state.submissions).toBe(createRequests(w.sandbox) - 1);
    expect(second.state.submissions).toBeGreaterThan(1);
  });

  it('a refused key (401) stops the run: fatal ServiceRefusedError, the POST journaled as not created', async () => {
    const w = await stageWorld({ clientKey: 'sk_wrong' });
    const { item, state, upload } = await w.item(1);
    const outcome = await submitItem(w.ctx, item, state, upload, once);
    expect(outcome.kind).toBe('fatal');
    if (outcome.kind === 'fatal') expect(outcome.error).toBeInstanceOf(ServiceRefusedError);
    expect(ofKind(await w.records(), 'not_created')).toHaveLength(1);
    expect(state.submissions).toBe(0);
  });

  it('sends nothing once the run is stopping', async () => {
    const w = await stageWorld();
    const { item, state, upload } = await w.item(1);
    w.stop();
    expect(await submitItem(w.ctx, item, state, upload, once)).toEqual({ kind: 'stopped' });
    expect(w.sandbox.stats.requests).toHaveLength(0);
    expect(ofKind(await w.records(), 'submitting')).toHaveLength(0);
  });
});
