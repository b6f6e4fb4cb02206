/**
 * RateGovernor: timing and order of grants under a fake clock (vi fake timers drive both the
 * governor's `now` and its setTimeout), plus two real-clock checks that the pieces fit at runtime.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type GovernorEvent,
  type GovernorOptions,
  type Priority,
  RateGovernor,
} from '../../src/api/governor.js';

/** A governor on the fake clock, and a log of when (fake ms) and in what order grants came. */
function setup(options: GovernorOptions = {}) {
  const start = Date.now();
  const events: GovernorEvent[] = [];
  const governor = new RateGovernor({ now: () => Date.now(), onChange: (e) => events.push(e), ...options });
  const grants: Array<{ label: string; at: number }> = [];
  // Each granted request is answered at once (settled), unless a test holds the answers back.
  const request = (priority: Priority, label: string = priority, signal?: AbortSignal) =>
    governor.acquire(priority, signal).then(() => {
      grants.push({ label, at: Date.now() - start });
      governor.settled();
    });
  const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
  return { governor, events, grants, request, advance, elapsed: () => Date.now() - start };
}

describe('RateGovernor (fake clock)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('paces grants evenly before the first 429, then lets a small burst through', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 10 });
    // Nothing is known of the key's bucket yet: no burst, so when it runs dry one request is in flight.
    for (let i = 0; i < 4; i++) void request('submit');
    await advance(0);
    expect(grants.map((g) => g.at)).toEqual([0]);
    await advance(1000);
    expect(grants.map((g) => g.at)).toEqual([0, 100, 200, 300]);
    // Once a 429 has taught it the key's rate (12 accepted within its assumed 1 s burst: 12.5 req/s),
    // a little burst goes (half a second of the rate held, at most 10) and the rest are paced.
    for (let i = 0; i < 12; i++) governor.onSuccess();
    governor.onRateLimited(1000, 0);
    grants.length = 0;
    await advance(3000);
    expect(governor.estimate).not.toBeNull();
    for (let i = 0; i < 8; i++) void request('submit');
    await advance(0);
    expect(grants.length).toBe(6);
    await advance(2000);
    expect(grants.length).toBe(8);
  });

  it('one request at a time before the first 429 (for the first 32 accepted), then overlapping', async () => {
    const { governor, advance } = setup({ initialRate: 100 });
    const granted: number[] = [];
    for (let i = 0; i < 3; i++) void governor.acquire('submit').then(() => granted.push(i));
    await advance(500);
    // The first is on the wire: the next waits for its answer, however much rate there is.
    expect(granted).toEqual([0]);
    governor.onSuccess();
    governor.settled();
    await advance(20);
    expect(granted).toEqual([0, 1]);
    // A 429 answers the second: the third waits out the pause, not only the answer.
    governor.onRateLimited(1000, 0);
    governor.settled();
    await advance(900);
    expect(granted).toEqual([0, 1]);
    await advance(200);
    expect(granted).toEqual([0, 1, 2]);
    // Once the key's rate is known, requests overlap.
    for (let i = 3; i < 6; i++) void governor.acquire('submit').then(() => granted.push(i));
    await advance(2000);
    expect(granted).toEqual([0, 1, 2, 3, 4, 5]);

    // A key that accepts 32 requests without a 429 has room: overlapping from then on.
    const fast = setup({ initialRate: 100 }).governor;
    for (let i = 0; i < 32; i++) {
      const granted = fast.acquire('submit');
      await advance(20);
      await granted;
      fast.onSuccess();
      fast.settled();
    }
    let overlapping = 0;
    for (let i = 0; i < 3; i++) void fast.acquire('submit').then(() => overlapping++);
    await advance(1000);
    expect(overlapping).toBe(3);
  });

  it('keeps a fast rate when its timer fires late (a busy event loop): a turn releases what it owes, up to 10 ms of the rate', async () => {
    // The governor's clock runs 4 ms per turn of the loop, while its 1 ms timer fires once a turn.
    let clock = 0;
    const run = async (rate: number) => {
      const governor = new RateGovernor({ initialRate: rate, maxRate: rate, now: () => clock });
      let granted = 0;
      for (let i = 0; i < 3000; i++) {
        governor
          .acquire('submit')
          .then(() => {
            granted++;
            governor.onSuccess();
            governor.settled();
          })
          .catch(() => {});
      }
      await vi.advanceTimersByTimeAsync(0);
      const before = granted;
      for (let turn = 0; turn < 250; turn++) {
        clock += 4;
        await vi.advanceTimersByTimeAsync(4);
      }
      governor.close(new Error('done'));
      return granted - before;
    };
    // One second of the governor's clock: its rate, not one request per turn (250).
    expect(await run(1000)).toBeGreaterThanOrEqual(990);
    expect(await run(400)).toBeGreaterThanOrEqual(396);
    // A slow rate still goes one token at a time: 4 ms turns give 20 a second at 20/s.
    expect(await run(20)).toBeLessThanOrEqual(21);
  });

  it('after onRateLimited(1000) nothing is granted before 1000 ms, polls and submits alike', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 50 });
    governor.onRateLimited(1000, 60_000);
    expect(governor.pauseRemainingMs).toBe(1000);
    void request('submit');
    void request('poll');
    await advance(600);
    void request('poll');
    await advance(399);
    expect(grants).toEqual([]);
    expect(governor.pauseRemainingMs).toBe(1);
    await advance(1);
    expect(grants.map((g) => g.at)).toEqual([1000]);
    expect(governor.pauseRemainingMs).toBe(0);
    // Then paced at the rate learnt from the 429 (no history: a quarter of 50/s, held at 0.98).
    expect(governor.rate).toBeCloseTo(12.25, 10);
    await advance(200);
    expect(grants.map((g) => g.at)).toEqual([1000, 1082, 1164]);
  });

  it('the pause is not saved up as credit: one request probes at its end, the rest follow at the rate', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 80 });
    await advance(5000);
    governor.onRateLimited(1000, 0);
    expect(governor.rate).toBeCloseTo(19.6, 10);
    for (let i = 0; i < 6; i++) void request('submit');
    await advance(1000);
    expect(grants.map((g) => g.at)).toEqual([6000]);
    await advance(1000);
    expect(grants.map((g) => g.at)).toEqual([6000, 6052, 6103, 6154, 6205, 6256]);
  });

  it('without Retry-After the pause is the caller’s fallback', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 50 });
    governor.onRateLimited(undefined, 2500);
    void request('poll');
    await advance(2499);
    expect(grants).toEqual([]);
    await advance(1);
    expect(grants.map((g) => g.at)).toEqual([2500]);
  });

  it('a later 429 extends the pause; an earlier deadline never shortens it', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 50 });
    governor.onRateLimited(1000, 0);
    await advance(500);
    governor.onRateLimited(2000, 0);
    governor.onRateLimited(100, 0);
    void request('poll');
    await advance(1999);
    expect(grants).toEqual([]);
    await advance(1);
    expect(grants.map((g) => g.at)).toEqual([2500]);
  });

  it('serves submits before polls when the budget is tight, polls in their order', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 2 });
    governor.onRateLimited(1000, 0);
    void request('submit', 's1');
    void request('submit', 's2');
    void request('poll', 'p1');
    void request('submit', 's3');
    void request('poll', 'p2');
    await advance(10_000);
    expect(grants.map((g) => g.label)).toEqual(['s1', 's2', 's3', 'p1', 'p2']);
    // Still paced after the pause: one slot per 1/rate seconds.
    const gaps = grants.slice(1).map((g, i) => g.at - (grants[i]?.at ?? 0));
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(490);
  });

  it('learns from a 429 once per pause: 429s of one burst are one event', async () => {
    const { governor, events, advance } = setup({ initialRate: 10 });
    governor.onRateLimited(500, 0);
    const first = governor.rate;
    // A burst of 429s from requests already in flight: one event, no further decrease.
    governor.onRateLimited(500, 0);
    governor.onRateLimited(undefined, 800);
    await advance(900);
    governor.onRateLimited(500, 0);
    expect(governor.rate).toBe(first);
    expect(governor.rateLimited).toBe(4);
    expect(events.filter((e) => e.type === 'decrease')).toEqual([
      { type: 'decrease', rate: first, pauseMs: 500, retryAfter: true, estimate: 2.5 },
    ]);
    // Well after that pause, a new 429 is a new event; nothing got through in between, so it
    // measures nothing and only backs off (×0.8).
    await advance(1200);
    governor.onRateLimited(undefined, 300);
    expect(governor.estimate).toBeCloseTo(2, 10);
    expect(events.at(-1)).toMatchObject({ type: 'decrease', pauseMs: 300, retryAfter: false, estimate: 2 });
    expect(governor.confirmed).toBe(false);
  });

  it('never goes below minRate', async () => {
    const { governor, advance } = setup({ initialRate: 1, minRate: 0.5 });
    for (let i = 0; i < 10; i++) {
      governor.onRateLimited(0, 0);
      await advance(1001);
    }
    expect(governor.rate).toBe(0.5);
  });

  it('grows only a rate in use: slow start before any 429, then the estimate probed, never past maxRate', async () => {
    const { governor, events, request, advance } = setup({ initialRate: 4, maxRate: 8 });
    // Idle (tokens to spare): a success says nothing about what the service would take.
    governor.onSuccess();
    expect(governor.rate).toBe(4);
    // In use: the burst is taken and requests wait.
    for (let i = 0; i < 4; i++) void request('poll');
    await advance(0);
    governor.onSuccess();
    expect(governor.rate).toBe(5); // slow start: +1 per success, about ×2 per second of full use
    for (let i = 0; i < 10; i++) governor.onSuccess();
    expect(governor.rate).toBe(8); // maxRate
    // Reported in steps: each increase is at least 1.25× the rate last reported.
    const increases = events.filter((e) => e.type === 'increase');
    expect(increases.map((e) => e.rate)).toEqual([5, 7]);
  });

  it('holds just under the estimate, probes gently, and faster after a quiet spell of full use', async () => {
    const { governor, request, advance } = setup({
      initialRate: 8,
      probeGain: 0.002,
      quietSeconds: 15,
      quietGain: 0.01,
    });
    // 30 requests accepted over 3 s, then a 429: the window estimate (burst assumed 1 s, half a
    // token left in the bucket) is (30 + 0.5) / (3 + 1) ≈ 7.6/s; the rate is held at 0.98 of it.
    for (let i = 0; i < 30; i++) {
      governor.onSuccess();
      await advance(100);
    }
    governor.onRateLimited(1000, 0);
    const estimate = governor.estimate!;
    expect(estimate).toBeCloseTo(30.5 / (3 + 1), 10);
    expect(governor.rate).toBeCloseTo(0.98 * estimate, 10);
    // Full use (requests waiting) for 10 s: +0.2 % of the estimate per second.
    for (let i = 0; i < 400; i++) void request('poll').catch(() => {});
    await advance(11_000);
    governor.onSuccess();
    expect(governor.rate / estimate).toBeCloseTo(0.98 + 0.002 * 11, 2);
    // Past the quiet spell the excess grows with its square: 25 s → +1 % × 10² on top.
    await advance(14_000);
    governor.onSuccess();
    expect(governor.rate / estimate).toBeCloseTo(0.98 + 0.002 * 25 + 0.01 * 100, 2);
    governor.close(new Error('done'));
  });

  it('on a key shared with others (a 429 cut its measured share by a tenth): a fifth off at each 429, then the same requests per second added in every process', async () => {
    const { governor, request, advance } = setup({ initialRate: 8, quietSeconds: 30 });
    for (let i = 0; i < 1000; i++) void request('poll').catch(() => {});
    /** `n` requests accepted evenly over `ms` of full use, then a 429. */
    const interval = async (n: number, ms: number) => {
      for (let i = 0; i < n; i++) {
        await advance(ms / n);
        governor.onSuccess();
      }
      governor.onRateLimited(1000, 0);
    };
    // The first 429 (an estimate from an assumed burst), then one measured between two 429s: 70
    // accepted in 10 s + the 1 s pause, about 6.4/s. A lone key is learnt so, however far apart.
    await interval(30, 3000);
    await interval(70, 10_000);
    expect(governor.confirmed).toBe(true);
    const measured = governor.estimate!;
    // Then only 30 in the next 10 s: others took the rest; the measured share is cut by over a tenth.
    await interval(30, 10_000);
    const shared = governor.estimate!;
    expect(shared).toBeLessThan(measured * 0.9);
    // 12 s of full use: +0.005 × the starting rate (8/s) per second, in requests per second, not in
    // shares of the estimate: every process adds the same whatever its share.
    await advance(12_000);
    governor.onSuccess();
    expect(governor.rate).toBeCloseTo(0.98 * shared + 0.005 * 8 * 12, 1);
    // The next 429: a fifth off what the share used, the lower of the rate it was allowed and what
    // it got through: here 20 accepted in 8 s, measured as after any 429 (the best window, burst
    // assumed 1 s, half a token left: 21.5 / 9 per second), under a rate of about 3.7/s.
    const before = governor.rate;
    await interval(20, 8000);
    const cut = governor.estimate!;
    expect(before + 0.005 * 8 * 8).toBeGreaterThan(21.5 / 9);
    expect(cut).toBeCloseTo(0.8 * (21.5 / 9), 3);
    // Past the 30 s quiet spell (as alone, not shorter), the step grows with the excess²:
    // 40 s of full use: + 0.005 × 8 × 40 + 0.003 × 8 × 10².
    await advance(40_000);
    governor.onSuccess();
    expect(governor.rate).toBeCloseTo(0.98 * cut + 0.005 * 8 * 40 + 0.003 * 8 * 100, 1);
    governor.close(new Error('done'));
  });

  it('between two 429s the accepted requests over the interval are the rate (confirmed)', async () => {
    const { governor, request, advance } = setup({ initialRate: 8 });
    governor.onRateLimited(1000, 0);
    expect(governor.confirmed).toBe(false);
    // Requests wait all along (the rate binds); 24 accepted in the 6 s to the next 429: 4/s.
    for (let i = 0; i < 100; i++) void request('poll').catch(() => {});
    await advance(1000);
    for (let i = 0; i < 24; i++) {
      await advance(5000 / 24);
      governor.onSuccess();
    }
    governor.onRateLimited(1000, 0);
    expect(governor.confirmed).toBe(true);
    expect(governor.estimate).toBeCloseTo(4, 1);
    expect(governor.rate).toBeCloseTo(0.98 * governor.estimate!, 10);
    governor.close(new Error('done'));
  });

  it('a 429 after a quiet queue lowers the estimate by 15 % at most: our demand is not the key', async () => {
    const { governor, advance } = setup({ initialRate: 8 });
    governor.onRateLimited(1000, 0);
    const before = governor.estimate!;
    // 5 requests in 10 s, never waiting for a slot: then a 429 (someone else uses the key).
    for (let i = 0; i < 5; i++) {
      await advance(2000);
      governor.onSuccess();
    }
    governor.onRateLimited(1000, 0);
    expect(governor.estimate).toBeCloseTo(before * 0.85, 10);
    expect(governor.confirmed).toBe(false);
  });

  it('an aborted waiter is rejected with the reason and gives its slot to the next one', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 10 });
    const reason = new Error('stop');
    await expect(governor.acquire('poll', AbortSignal.abort(reason))).rejects.toBe(reason);
    governor.onRateLimited(1000, 0);
    const controller = new AbortController();
    const aborted = request('poll', 'aborted', controller.signal);
    void request('submit', 'next');
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await advance(1000);
    expect(grants).toEqual([{ label: 'next', at: 1000 }]);
  });

  it('close() rejects every waiter and stops the timer', async () => {
    const { governor, request, advance } = setup({ initialRate: 10 });
    governor.onRateLimited(5000, 0);
    const waiters = [request('poll'), request('submit')];
    const reason = new Error('shutdown');
    governor.close(reason);
    for (const w of waiters) await expect(w).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
    await advance(10_000);
  });
});

describe('RateGovernor (real clock)', () => {
  it('holds a real request back for the whole Retry-After', async () => {
    const governor = new RateGovernor({ initialRate: 100 });
    governor.onRateLimited(300, 0);
    const t0 = performance.now();
    await governor.acquire('poll');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(295);
    governor.close(new Error('done'));
  });

  it('waitForPause waits out a pause without queueing, and returns at once when there is none', async () => {
    const governor = new RateGovernor({ initialRate: 100 });
    let t0 = performance.now();
    await governor.waitForPause();
    expect(performance.now() - t0).toBeLessThan(50);
    governor.onRateLimited(250, 0);
    t0 = performance.now();
    await governor.waitForPause();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(245);
    const controller = new AbortController();
    governor.onRateLimited(5000, 0);
    setTimeout(() => controller.abort(new Error('stop')), 20);
    t0 = performance.now();
    await expect(governor.waitForPause(controller.signal)).rejects.toThrow();
    expect(performance.now() - t0).toBeLessThan(1000);
    governor.close(new Error('done'));
  });
});
