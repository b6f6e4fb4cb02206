/**
 * The rate governor over real HTTP against the sandbox's token bucket (issue 12): timing and
 * counts, not only results. The same behaviour over minutes of simulated traffic, on a fake clock,
 * is in test/api/governor-bucket.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeWorkspaces, workspace } from '../helpers/batch.js';
import { assertPollFloor, sentDuringBackoff } from '../helpers/sandbox.js';

afterEach(closeWorkspaces);

describe('run on a rate-limited key', () => {
  it('learns a 6 req/s bucket within the run, never sends inside Retry-After, never answers a 429 with a burst, keeps the 2 s floor', async () => {
    const rps = 6;
    const ws = await workspace({
      items: 40,
      sandbox: {
        processingMs: 1500,
        jitterMs: 500,
        queuedMs: 100,
        faults: { rateLimit: { rps, burst: rps }, retryAfter: 'seconds' },
      },
    });
    const result = await ws.run({ limits: { concurrency: 16 } });
    expect(result.exitCode).toBe(0);
    const api = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
    const limited = api.filter((r) => r.status === 429).map((r) => r.at);
    // The bucket was found: at least one 429, none sent inside its 1 s Retry-After.
    expect(limited.length).toBeGreaterThan(0);
    expect(sentDuringBackoff(ws.sandbox, 1000)).toBe(0);
    // Never amplified: 429s of one pause are one event, each event a single 429 or two in flight,
    // and in the 300 ms after a pause ends one probe and what ~6/s allows after it.
    const events = limited.filter((at, i) => i === 0 || at - limited[i - 1]! > 1000);
    expect(limited.length).toBeLessThanOrEqual(2 * events.length);
    for (const at of events) {
      const after = api.filter((r) => r.at >= at + 950 && r.at < at + 1300);
      expect(after.length).toBeLessThanOrEqual(3);
    }
    // Rare: 429s under 3 % of API requests, and about two requests a job.
    expect(limited.length / api.length).toBeLessThan(0.03);
    expect(api.length / 40).toBeLessThan(2.4);
    assertPollFloor(ws.sandbox);
    // Learnt within the run (about 15 s of traffic): within 15 % of the bucket's rate.
    const stats = (await ws.report()).run.stats!;
    expect(Math.abs((stats.rate_learnt ?? 0) / rps - 1)).toBeLessThan(0.15);
    expect(stats.rate_limited).toBe(limited.length);
    // About one poll a job: the first wave scouted, the rest placed at the 90th/98th percentile.
    expect(stats.polls_per_job).toBeLessThan(1.3);
    expect(stats.first_poll_hit_share).toBeGreaterThan(0.7);
  });
});
