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
  const request = (priority: Priority, label: string = priority, signal?: AbortSignal) =>
    governor.acquire(priority, signal).then(() => {
      grants.push({ label, at: Date.now() - start });
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

  it('lets a small burst through, then paces grants at the rate', async () => {
    const { grants, request, advance } = setup({ initialRate: 10 });
    for (let i = 0; i < 8; i++) void request('submit');
    await advance(0);
    expect(grants.map((g) => g.at)).toEqual([0, 0]);
    await advance(2000);
    expect(grants.map((g) => g.at)).toEqual([0, 0, 100, 200, 300, 400, 500, 600]);
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
    // Then paced at the lowered rate (50 × 0.7 = 35/s).
    await advance(100);
    expect(grants.map((g) => g.at)).toEqual([1000, 1029, 1058]);
  });

  it('the pause is not saved up as credit: one request probes at its end, the rest follow at the rate', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 40, decreaseFactor: 0.5 });
    await advance(5000);
    governor.onRateLimited(1000, 0);
    expect(governor.rate).toBe(20);
    for (let i = 0; i < 6; i++) void request('submit');
    await advance(1000);
    expect(grants.map((g) => g.at)).toEqual([6000]);
    await advance(1000);
    expect(grants.map((g) => g.at)).toEqual([6000, 6050, 6100, 6150, 6200, 6250]);
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

  it('serves polls before submits when slots are scarce', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 2 });
    governor.onRateLimited(1000, 0);
    void request('submit', 's1');
    void request('submit', 's2');
    void request('poll', 'p1');
    void request('submit', 's3');
    void request('poll', 'p2');
    await advance(10_000);
    expect(grants.map((g) => g.label)).toEqual(['p1', 'p2', 's1', 's2', 's3']);
    // Still paced after the pause: one slot per 1/rate seconds.
    const gaps = grants.slice(1).map((g, i) => g.at - (grants[i]?.at ?? 0));
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(490);
  });

  it('decreases the rate multiplicatively on a 429, once per pause, and paces at the new rate', async () => {
    const { governor, events, grants, request, advance } = setup({ initialRate: 10, decreaseFactor: 0.5 });
    governor.onRateLimited(500, 0);
    expect(governor.rate).toBe(5);
    // A burst of 429s from requests already in flight: one congestion event.
    governor.onRateLimited(500, 0);
    governor.onRateLimited(undefined, 800);
    await advance(900);
    governor.onRateLimited(500, 0);
    expect(governor.rate).toBe(5);
    expect(governor.rateLimited).toBe(4);
    expect(events.filter((e) => e.type === 'decrease')).toEqual([
      { type: 'decrease', rate: 5, pauseMs: 500, retryAfter: true },
    ]);
    // Well after that pause, a new 429 is a new congestion event.
    await advance(1200);
    governor.onRateLimited(undefined, 300);
    expect(governor.rate).toBe(2.5);
    expect(events.at(-1)).toEqual({ type: 'decrease', rate: 2.5, pauseMs: 300, retryAfter: false });

    // Paced at 2.5/s once the pause is over and the small bucket is spent.
    for (let i = 0; i < 6; i++) void request('poll');
    await advance(5000);
    expect(grants).toHaveLength(6);
    const tail = grants.slice(-3).map((g) => g.at);
    expect((tail[2] ?? 0) - (tail[1] ?? 0)).toBe(400);
    expect((tail[1] ?? 0) - (tail[0] ?? 0)).toBe(400);
  });

  it('never goes below minRate', () => {
    const { governor } = setup({ initialRate: 1, minRate: 0.5, decreaseFactor: 0.1 });
    governor.onRateLimited(0, 0);
    expect(governor.rate).toBe(0.5);
  });

  it('grows only a rate in use: slow start before any 429, additive after, never past maxRate', async () => {
    const { governor, events, request, advance } = setup({
      initialRate: 4,
      increasePerSecond: 1,
      maxRate: 8,
    });
    // Idle (tokens to spare): a success says nothing about what the service would take.
    governor.onSuccess();
    expect(governor.rate).toBe(4);
    // In use: the burst is taken and requests wait.
    for (let i = 0; i < 4; i++) void request('poll');
    await advance(0);
    governor.onSuccess();
    expect(governor.rate).toBe(5); // slow start: +1 per success, about ×2 per second of full use
    governor.onRateLimited(0, 0);
    const after = governor.rate;
    expect(after).toBeCloseTo(3.5, 10);
    governor.onSuccess();
    // After a 429: +increase/rate per success, about +1 req/s per second of full use.
    expect(governor.rate).toBeCloseTo(after + 1 / after, 10);
    for (let i = 0; i < 1000; i++) governor.onSuccess();
    expect(governor.rate).toBe(8);
    // Reported in steps: each increase is at least 1.25× the rate last reported (up or down).
    expect(events.filter((e) => e.type === 'increase').length).toBeGreaterThanOrEqual(2);
    for (const [i, event] of events.entries()) {
      if (event.type === 'increase' && i > 0)
        expect(event.rate).toBeGreaterThanOrEqual(events[i - 1]!.rate * 1.25);
    }
  });

  it('recovers speed after a decrease: successes in use raise the pace again', async () => {
    const { governor, grants, request, advance } = setup({ initialRate: 2, increasePerSecond: 4 });
    governor.onRateLimited(0, 0);
    const slow = governor.rate;
    for (let i = 0; i < 30; i++) void request('poll');
    for (let i = 0; i < 20; i++) governor.onSuccess();
    expect(governor.rate).toBeGreaterThan(slow * 2);
    await advance(20_000);
    const last = grants.slice(-2).map((g) => g.at);
    expect((last[1] ?? 0) - (last[0] ?? 0)).toBeLessThanOrEqual(Math.ceil(1000 / governor.rate));
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
