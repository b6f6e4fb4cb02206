/**
 * The governor against the sandbox's own token bucket (src/sandbox/faults.ts), on a fake clock so
 * minutes of saturated traffic take milliseconds: how fast the estimate finds the bucket's rate, how
 * much of the rate is used, how often a 429 comes once it is learnt, and that one 429 never turns
 * into a burst. The same behaviour over real HTTP is in test/engine/rate.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RateGovernor } from '../../src/api/governor.js';
import { TokenBucket } from '../../src/sandbox/faults.js';
import { saturatingWorker } from './bucket-traffic.js';

interface Trace {
  /** Fake ms of each accepted request and each 429. */
  accepted: number[];
  limited: number[];
  /** The governor's estimate at given fake seconds. */
  estimates: Map<number, number | null>;
  governor: RateGovernor;
}

/**
 * `clients` saturating workers share one governor (one process) and a bucket of `rps`/`burst`; each
 * request takes 5 ms on the wire. A 429 says Retry-After as the sandbox does (whole seconds, ≥ 1).
 */
async function saturate(rps: number, burst: number, seconds: number, clients = 16): Promise<Trace> {
  const start = Date.now();
  const now = () => Date.now() - start;
  const bucket = new TokenBucket(rps, burst, 0);
  const governor = new RateGovernor({ now });
  const trace: Trace = { accepted: [], limited: [], estimates: new Map(), governor };
  let running = true;
  const worker = () =>
    saturatingWorker(governor, bucket, now, {
      running: () => running,
      wireMs: () => 5,
      onAnswer: (accepted, at) => (accepted ? trace.accepted : trace.limited).push(at),
    });
  const workers = Array.from({ length: clients }, worker);
  for (let s = 1; s <= seconds; s++) {
    await vi.advanceTimersByTimeAsync(1000);
    trace.estimates.set(s, governor.estimate);
  }
  running = false;
  governor.close(new Error('done'));
  // A worker may be inside its 5 ms on the (fake) wire: let it land.
  await vi.advanceTimersByTimeAsync(10);
  await Promise.all(workers);
  return trace;
}

/** 429 events: 429s more than a second after the previous one (one pause, one event). */
function events(limited: number[]): number[] {
  return limited.filter((t, i) => i === 0 || t - limited[i - 1]! > 1000);
}

describe('RateGovernor on a token bucket (fake clock)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  // [rate, burst in seconds of rate, tolerance of the estimate, share of the rate used, share of
  // requests answered 429 once learnt]. At 2 req/s Retry-After's whole seconds pause longer than the
  // bucket takes to fill, so an interval measures up to 15 % low, and one probing 429 every ~25 s is
  // 2 % of the requests.
  for (const [rps, burstSeconds, tolerance, used, limitedShare] of [
    [2, 1, 0.15, 0.85, 0.025],
    [5, 1, 0.1, 0.9, 0.015],
    [5, 3, 0.1, 0.9, 0.015],
    [10, 1, 0.1, 0.9, 0.015],
    [40, 1, 0.1, 0.9, 0.015],
  ] as const) {
    it(`${rps} req/s, burst ${burstSeconds} s: the estimate is within ${tolerance * 100} % by 5 s, over ${used * 100} % of the rate used, 429s rare`, async () => {
      const burst = Math.max(1, rps * burstSeconds);
      const t = await saturate(rps, burst, 120);
      // Found within 5 s of the first request, and still as close at 1 and 2 minutes.
      for (const at of [5, 60, 120]) {
        expect(t.estimates.get(at)).not.toBeNull();
        expect(Math.abs(t.estimates.get(at)! / rps - 1), `estimate at ${at} s`).toBeLessThan(tolerance);
      }
      // Accepted from 10 s on, against what the bucket allowed (the rate × time).
      const late = t.accepted.filter((at) => at >= 10_000).length;
      expect(late / (rps * 110)).toBeGreaterThan(used);
      // Once learnt: at most one 429 event per 20 s of saturated traffic, and few requests answered
      // 429 (under 3 % with the learning at the start).
      const after = events(t.limited).filter((at) => at >= 10_000);
      expect(after.length).toBeLessThanOrEqual(110 / 20);
      const lateLimited = t.limited.filter((at) => at >= 10_000).length;
      expect(lateLimited / (lateLimited + late)).toBeLessThan(limitedShare);
      expect(t.limited.length / (t.limited.length + t.accepted.length)).toBeLessThan(0.03);
    });
  }

  it('a 429 is never answered with a burst: one request when the pause ends, then the rate', async () => {
    const t = await saturate(5, 5, 60);
    for (const at of events(t.limited)) {
      // Retry-After was 1 s: nothing accepted or refused inside it, from requests sent after the 429.
      const sent = [...t.accepted, ...t.limited].filter((x) => x > at + 10 && x < at + 1000);
      expect(sent).toEqual([]);
      // In the 300 ms after the pause ends: the probe, and what ~5/s allows after it.
      const after = [...t.accepted, ...t.limited].filter((x) => x >= at + 1000 && x < at + 1300);
      expect(after.length).toBeLessThanOrEqual(3);
    }
    // Each event is one 429 (no request of the same burst piles onto the empty bucket).
    expect(t.limited.length).toBe(events(t.limited).length);
  });
});
