import { afterEach, describe, expect, it } from 'vitest';
import { closeWorkspaces, type Workspace, workspace } from '../helpers/batch.js';
import { assertPollFloor, createRequests, sentDuringBackoff } from '../helpers/sandbox.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

describe('run under service faults', () => {
  it('429 storm with Retry-After (seconds): nothing is sent in the window, polls keep the 2 s floor, all succeed', async () => {
    ws = await workspace({
      items: 6,
      sandbox: { seed: 7, faults: { rate429: 0.25, retryAfter: 'seconds' } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    expect(ws.sandbox.stats.rateLimited).toBeGreaterThan(0);
    // The sandbox's random 429s say Retry-After: 1.
    expect(sentDuringBackoff(ws.sandbox, 1000)).toBe(0);
    assertPollFloor(ws.sandbox);
    const report = await ws.report();
    expect(report.run.stats?.rate_limited).toBe(ws.sandbox.stats.rateLimited);
  });

  it('429 storm with Retry-After as an HTTP-date from a server whose clock is 2 h ahead: waits the meant time', async () => {
    ws = await workspace({
      items: 4,
      sandbox: { seed: 3, faults: { rate429: 0.25, retryAfter: 'date', dateSkewMs: 2 * 3600_000 } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    expect(ws.sandbox.stats.rateLimited).toBeGreaterThan(0);
    // Measured against the local clock the date is 2 h away; against the Date header it is ~1 s.
    expect(sentDuringBackoff(ws.sandbox, 1000)).toBe(0);
    const report = await ws.report();
    expect(report.run.stats?.duration_ms).toBeLessThan(60_000);
  });

  it('429s without Retry-After back off with jitter instead of looping', async () => {
    ws = await workspace({
      items: 4,
      sandbox: { seed: 5, faults: { rateLimit: { rps: 2, burst: 2 }, retryAfter: 'none' } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const limited = ws.sandbox.stats.rateLimited;
    const total = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/')).length;
    // The limit did bite (the governor starts above 2 req/s), and a busy loop would send hundreds of
    // 429s; AIMD plus backoff keeps them a small share.
    expect(limited).toBeGreaterThan(0);
    expect(limited).toBeLessThan(total / 2);
    assertPollFloor(ws.sandbox);
  });

  it('5xx and connection resets on polls are retried; every item succeeds', async () => {
    ws = await workspace({
      items: 6,
      sandbox: { seed: 1, faults: { errorRate: 0.4, errorOn: 'poll', resetRate: 0.3, resetOn: 'poll' } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const polls = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/jobs/'));
    expect(polls.filter((r) => r.status === 0 || r.status >= 500).length).toBeGreaterThan(0);
    assertPollFloor(ws.sandbox);
    expect(createRequests(ws.sandbox)).toBe(6);
  });

  it('unknown status values and malformed poll bodies are transient, never "succeeded"', async () => {
    ws = await workspace({
      items: 3,
      sandbox: { seed: 2, faults: { badStatusRate: 0.3, malformedRate: 0.3 } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    expect(createRequests(ws.sandbox)).toBe(3);
  });

  it('500/502/504 on a submission: incomplete/submit_unknown, not resent; a rerun resends and flags nothing it did not send twice', async () => {
    ws = await workspace({
      items: 3,
      sandbox: { faults: { errorRate: 1, errorOn: 'create', errorStatuses: [500, 502, 504] } },
    });
    const first = await ws.run();
    expect(first.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(3);
    let report = await ws.report();
    for (const item of report.items) {
      expect(item.status).toBe('incomplete');
      expect(item.error?.code).toBe('submit_unknown');
      expect(item.submissions).toBe(1);
    }
    ws.sandbox.setFaults({ errorRate: 0 });
    const second = await ws.run();
    expect(second.exitCode).toBe(0);
    report = await ws.report();
    expect(report.items.every((i) => i.submissions === 2)).toBe(true);
    expect(report.run.totals.possible_duplicates).toBe(3);
  });

  it('a reset after the upload: the job exists at the service, the item is submit_unknown and is not resent', async () => {
    ws = await workspace({
      items: 2,
      sandbox: { faults: { resetRate: 1, resetOn: 'create', resetWhen: 'after-body' } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(2);
    expect([...ws.sandbox.stats.createsByItem.values()]).toEqual([1, 1]);
    const report = await ws.report();
    expect(report.items.map((i) => i.error?.code)).toEqual(['submit_unknown', 'submit_unknown']);
  });

  it('--retry-ambiguous resends ambiguous submissions within the run', async () => {
    ws = await workspace({
      items: 3,
      sandbox: { seed: 9, faults: { errorRate: 0.5, errorOn: 'create', errorStatuses: [502] } },
    });
    const result = await ws.run({ resume: { retryAmbiguous: true } });
    expect(result.exitCode).toBe(0);
    const report = await ws.report();
    const resent = report.items.filter((i) => i.submissions > 1).length;
    expect(report.run.totals.possible_duplicates).toBe(resent);
  });

  it('503 and 429 on submissions are retried automatically (the job cannot exist yet)', async () => {
    ws = await workspace({
      items: 3,
      sandbox: { seed: 4, faults: { errorRate: 0.5, errorOn: 'create', errorStatuses: [503] } },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const report = await ws.report();
    expect(report.items.every((i) => i.submissions === 1)).toBe(true);
    expect(report.run.totals.possible_duplicates).toBe(0);
  });

  it('400/422 on a submission fails that item alone with the service message; no retry', async () => {
    ws = await workspace({
      items: 2,
      sandbox: {
        faults: {
          failCreateWith: { status: 422, code: 'validation_error', message: 'style is not allowed' },
        },
      },
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(2);
    const report = await ws.report();
    for (const item of report.items) {
      expect(item.status).toBe('failed');
      expect(item.error).toEqual({ code: 'validation_error', message: 'style is not allowed' });
      expect(item.submissions).toBe(0);
    }
  });
});
