import { describe, expect, it } from 'vitest';
import { createRng } from '../../src/sandbox/faults.js';
import { cheapestFirstPoll, PollScheduler } from '../../src/stages/poll-schedule.js';

function clock() {
  let t = 0;
  return { now: () => t, set: (v: number) => (t = v) };
}

/** Feeds `times` as creation-to-end durations (server timestamps) of finished jobs. */
function learn(s: PollScheduler, c: ReturnType<typeof clock>, times: number[]): void {
  times.forEach((ms, i) => {
    s.accepted(`done-${i}`, new Date(1_000_000).toISOString());
    s.ended(`done-${i}`, { updatedAt: new Date(1_000_000 + ms).toISOString(), processingTimeMs: null });
  });
  c.set(c.now());
}

/** 98 jobs between 1 and 1.97 s, two at 2.9 s: p10..p90 is narrow, p98 is a tail. */
const outliers = [...Array.from({ length: 98 }, (_, i) => 1000 + i * 10), 2900, 2900];

describe('PollScheduler', () => {
  it('uses the recommended 2 s until jobs have ended, and polls a job from an earlier run at once', () => {
    const c = clock();
    const s = new PollScheduler(2000, c.now);
    s.accepted('a');
    expect(s.firstDelay('a')).toBe(2000);
    expect(s.firstDelay('resumed')).toBe(0);
  });

  it('aims where a job costs the least slot time when jobs take about the same time, at the median when they spread wide', () => {
    const c = clock();
    const narrow = new PollScheduler(2000, c.now);
    learn(
      narrow,
      c,
      Array.from({ length: 100 }, (_, i) => 4300 + (i % 20) * 100),
    ); // 4.3–6.2 s
    narrow.accepted('x');
    // Spread evenly over less than the floor, a later poll costs no more on average than a miss:
    // the slowest job seen (p90, 6.1 s, would miss one job in twenty and cost it 2 s).
    expect(narrow.firstDelay('x')).toBe(6200);
    // A few jobs far slower than the rest cost less as misses than as everyone's wait.
    const tail = new PollScheduler(2000, c.now);
    learn(tail, c, outliers);
    tail.accepted('t');
    expect(tail.firstDelay('t')).toBe(1970);
    const wide = new PollScheduler(2000, c.now);
    learn(
      wide,
      c,
      Array.from({ length: 100 }, (_, i) => 1000 + i * 200),
    ); // 1–20.8 s
    wide.accepted('y');
    expect(wide.firstDelay('y')).toBe(11000);
    const instant = new PollScheduler(2000, c.now);
    learn(instant, c, [0, 0, 0, 5]);
    instant.accepted('z');
    expect(instant.firstDelay('z')).toBe(5);
    // Jobs that end at once are polled at once: waiting would hold their slots for nothing.
    const atOnce = new PollScheduler(2000, c.now);
    learn(atOnce, c, [0, 0, 0]);
    atOnce.accepted('w');
    expect(atOnce.firstDelay('w')).toBe(0);
  });

  it('never lets two polls of one job come within the floor, whatever delay is asked', async () => {
    let t = 1000;
    const s = new PollScheduler(50, () => t);
    s.accepted('j');
    const started = performance.now();
    t = 1000;
    s.polled('j'); // a poll at t=1000
    // Asked for 0 ms, but the floor says 50 ms after the last poll: the sleep must cover it.
    const waiting = s.waitTurn('j', 0);
    // Advance the fake clock as real time passes.
    const timer = setInterval(() => {
      t = 1000 + (performance.now() - started);
    }, 5);
    await waiting;
    clearInterval(timer);
    expect(t - 1000).toBeGreaterThanOrEqual(50);
  });

  it('before any job has ended the oldest jobs scout: a job as old seen running moves first polls to its age + the floor', () => {
    const c = clock();
    const s = new PollScheduler(2000, c.now);
    s.accepted('scout');
    c.set(300);
    s.accepted('b');
    expect(s.firstDelay('b')).toBe(2000);
    /** A poll of the scout at `t` finds it still running. */
    const scoutRunningAt = (t: number) => {
      c.set(t);
      s.polled('scout');
      s.running('scout');
    };
    // The scout's first poll at 2 s finds it running: nobody else polls before 4 s of age.
    scoutRunningAt(2000);
    expect(s.firstDelay('b')).toBe(4000);
    scoutRunningAt(4000);
    expect(s.firstDelay('b')).toBe(6000);
    // A scout stuck for minutes holds nobody back beyond 30 s.
    scoutRunningAt(200_000);
    expect(s.firstDelay('b')).toBe(30_000);
  });

  it('with one or two jobs ended, their times and the scouts both count', () => {
    const c = clock();
    const s = new PollScheduler(2000, c.now);
    s.accepted('scout');
    c.set(4000);
    s.polled('scout');
    s.running('scout');
    learn(s, c, [4700]);
    s.accepted('b');
    expect(s.firstDelay('b')).toBe(4700);
    learn(s, c, [3500]);
    expect(s.firstDelay('b')).toBe(4700);
  });

  it('aims at p98 at least while the request budget binds (a missed poll costs a request)', () => {
    const c = clock();
    let pressure = 0;
    const s = new PollScheduler(2000, c.now, { pressure: () => pressure });
    learn(s, c, outliers);
    s.accepted('x');
    expect(s.firstDelay('x')).toBe(1970);
    pressure = 0.9;
    expect(s.firstDelay('x')).toBe(2900);
  });

  it('aims at p98 at least once the run drains (a miss among the last jobs puts the end of the run off by the floor)', () => {
    const c = clock();
    let draining = false;
    const s = new PollScheduler(2000, c.now, { draining: () => draining });
    learn(s, c, outliers);
    s.accepted('x');
    expect(s.firstDelay('x')).toBe(1970);
    draining = true;
    expect(s.firstDelay('x')).toBe(2900);
  });

  it('places the first poll where t + (share of job times over t) × what a miss costs is least', () => {
    // Checked against every whole millisecond from the quickest time to the slowest, on seeded random samples.
    const rand = createRng(7);
    const cost = (xs: number[], t: number) => t + (xs.filter((x) => x > t).length / xs.length) * 3000;
    for (let round = 0; round < 40; round++) {
      const n = 3 + Math.floor(rand() * 60);
      const spread = rand() < 0.5 ? 300 : 3000;
      const xs = Array.from({ length: n }, () => Math.floor(rand() * spread) + (rand() < 0.1 ? 1500 : 0));
      xs.sort((a, b) => a - b);
      const got = cheapestFirstPoll(xs, 3000);
      expect(xs).toContain(got);
      let least = Number.POSITIVE_INFINITY;
      for (let t = xs[0]!; t <= xs[n - 1]!; t++) least = Math.min(least, cost(xs, t));
      expect(cost(xs, got)).toBeCloseTo(least, 6);
      // Of equal costs, the latest (fewer polls).
      expect(xs.filter((x) => x > got && Math.abs(cost(xs, x) - least) < 1e-6)).toEqual([]);
    }
    expect(cheapestFirstPoll([0, 0, 0], 3000)).toBe(0);
  });

  it('times spread evenly over about the floor: the first poll goes near the slowest (a miss costs a request too), not anywhere', () => {
    const rand = createRng(11);
    let missed = 0;
    const draws = 50;
    for (let d = 0; d < draws; d++) {
      const c = clock();
      const s = new PollScheduler(2000, c.now);
      const times = Array.from({ length: 200 }, () => 3250 + Math.round(rand() * 2000)); // 4 ± 1 s + 0.25 s
      learn(s, c, times);
      s.accepted('x');
      const at = s.firstDelay('x');
      missed += times.filter((t) => t > at).length / times.length;
    }
    // Counting slot time alone, every time costs about the same and noise places the poll anywhere:
    // about half the jobs then missed their first poll.
    expect(missed / draws).toBeLessThan(0.05);
  });

  it('asks a delay function again after each sleep: what the run learns meanwhile moves the first poll', async () => {
    let t = 0;
    const s = new PollScheduler(20, () => t);
    s.accepted('j');
    let asked = 0;
    const delays = [30, 60, 60];
    const started = performance.now();
    const timer = setInterval(() => {
      t = performance.now() - started;
    }, 2);
    await s.waitTurn('j', () => delays[Math.min(asked++, delays.length - 1)]!);
    clearInterval(timer);
    expect(asked).toBeGreaterThanOrEqual(2);
    expect(t).toBeGreaterThanOrEqual(60);
  });
});
