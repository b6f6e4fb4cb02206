/**
 * Shared test vectors of the rate estimator: one table of event sequences with the estimate and the
 * rate each step must give, run against the pure estimator (src/api/rate-estimator.ts) and against
 * its Lua copy (`ESTIMATOR_LUA`, the very text the worker mode's scripts start with) evaluated by a
 * real Redis, so the two cannot drift apart unnoticed. The expected figures are worked out by hand
 * in the comments, not taken from either implementation; the two must also agree with each other to
 * the last bits (the Lua does the same float operations in the same order).
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { type EstimatorSettings, RateEstimator } from '../../src/api/rate-estimator.js';
import { ESTIMATOR_LUA } from '../../src/worker/rate-lua.js';
import { HAS_REDIS, type TestRedis } from '../support/redis.js';
import { useRedis } from './world.js';

/** What a step must give: the estimate and the rate after it (and, for the TS estimator, its flags). */
interface Expect {
  estimate: number;
  rate: number;
  /** TS only: the Lua copy keeps no such flag. */
  confirmed?: boolean;
  /** TS only (see {@link Vector.sharedKey}). */
  shared?: boolean;
}

/** One event: a request accepted, a congestion event (a fresh 429), or a look at the probing rate. */
type Step =
  | { accept: number }
  | { limited: number; busyMs: number; rateInUse?: number; expect: Expect }
  | { probe: number; expect: Pick<Expect, 'rate'> };

interface Vector {
  name: string;
  settings?: Partial<EstimatorSettings>;
  /**
   * Runs the TS estimator with shared-key detection (the governor's) and not the Lua copy, which has
   * no shared-key mode; every other vector runs both, the TS one without that detection.
   */
  sharedKey?: true;
  steps: Step[];
}

const BASE: EstimatorSettings = {
  initialRate: 8,
  minRate: 0.2,
  maxRate: 1000,
  holdShare: 0.98,
  probeGain: 0.002,
  quietSeconds: 30,
  quietGain: 0.01,
  assumedBurstSeconds: 1,
  detectSharedKey: false,
};

/** Requests accepted from `from` to `to` ms (both included), `step` ms apart. */
function accepts(from: number, to: number, step: number): Step[] {
  const out: Step[] = [];
  for (let at = from; at <= to; at += step) out.push({ accept: at });
  return out;
}

// Ten requests 100 ms apart, then the first 429 at 1 s: the k-th latest (from 0) is (100 + 100k) ms
// old, its window gives (k + 1.5) / (1.1 + 0.1k) with 1 s of burst, growing with k: the oldest,
// 10.5 / 2.0 = 5.25, is the first estimate; the rate is 0.98 of it.
const FIRST: Step[] = [
  ...accepts(0, 900, 100),
  { limited: 1000, busyMs: 1000, expect: { estimate: 5.25, rate: 5.145 } },
];
// Then 50 requests 200 ms apart to 11 s and a 429 at 11.1 s, busy throughout: 50 / 10.1 s; the
// best window, (49 + 1.5) / (9.9 + 1) = 4.63, is not over 1.1 × that.
const MEASURED: Step[] = [
  ...FIRST,
  ...accepts(1200, 11000, 200),
  {
    limited: 11100,
    busyMs: 10100,
    expect: { estimate: 50 / 10.1, rate: (50 / 10.1) * 0.98, confirmed: true },
  },
];

const VECTORS: Vector[] = [
  { name: 'first estimate: the best window before the first 429', steps: FIRST },
  {
    name: 'first estimate: at least a quarter of the starting rate',
    // One request 1 s before the 429: 1.5 / 2 = 0.75 < 8 / 4.
    steps: [{ accept: 0 }, { limited: 1000, busyMs: 0, expect: { estimate: 2, rate: 1.96 } }],
  },
  {
    name: 'first estimate with nothing accepted before the 429',
    steps: [{ limited: 500, busyMs: 0, expect: { estimate: 2, rate: 1.96 } }],
  },
  {
    name: 'first estimate with a burst of 2 s assumed',
    // (k + 1.5) / (2.1 + 0.1k), the oldest: 10.5 / 3.
    settings: { assumedBurstSeconds: 2 },
    steps: [...accepts(0, 900, 100), { limited: 1000, busyMs: 1000, expect: { estimate: 3.5, rate: 3.43 } }],
  },
  {
    name: 'second 429: what was accepted in between over the interval, then probing',
    // 5 s busy: 0.98 + 0.002 × 5 of the estimate.
    steps: [...MEASURED, { probe: 5, expect: { rate: (50 / 10.1) * 0.99 } }],
  },
  {
    name: 'a 429 while our queue was mostly idle: down by 15 % at most',
    // Ten requests 1 s apart, 429 at 11.5 s, never busy: 10 / 10.5 s (windows: 1.0, not 1.1 × over),
    // so 0.85 × 5.25.
    steps: [
      ...FIRST,
      ...accepts(2000, 11000, 1000),
      { limited: 11500, busyMs: 0, expect: { estimate: 4.4625, rate: 4.4625 * 0.98 } },
    ],
  },
  {
    name: 'a 429 while idle, between the two: to the measured rate',
    // 48 requests 200 ms apart to 11 s, 429 at 11.1 s (10.1 s): 48 / 10.1 = 4.75 in (4.46, 5.25).
    steps: [
      ...FIRST,
      ...accepts(1600, 11000, 200),
      { limited: 11100, busyMs: 1000, expect: { estimate: 48 / 10.1, rate: (48 / 10.1) * 0.98 } },
    ],
  },
  {
    name: 'too few requests between two 429s: a fifth off',
    steps: [
      ...FIRST,
      ...accepts(3000, 5000, 1000),
      { limited: 6000, busyMs: 5000, expect: { estimate: 4.2, rate: 4.116 } },
    ],
  },
  {
    name: 'too soon after the last 429: a fifth off',
    steps: [
      ...FIRST,
      ...accepts(1100, 1900, 100),
      { limited: 2500, busyMs: 1500, expect: { estimate: 4.2, rate: 4.116 } },
    ],
  },
  {
    name: 'a full bucket for part of the interval: the best window instead',
    // 10 requests in the last second of 10 s: 1/s over the interval, but the window from the oldest
    // of them gives 10.5 / 2.0, over 1.1 × that.
    steps: [
      ...FIRST,
      ...accepts(10000, 10900, 100),
      { limited: 11000, busyMs: 10000, expect: { estimate: 5.25, rate: 5.145, confirmed: true } },
    ],
  },
  {
    name: 'the estimate and the rate stay under maxRate',
    settings: { initialRate: 4, maxRate: 4 },
    steps: [...accepts(0, 900, 100), { limited: 1000, busyMs: 1000, expect: { estimate: 4, rate: 3.92 } }],
  },
  {
    name: 'the estimate and the rate stay over minRate',
    settings: { minRate: 3 },
    steps: [{ limited: 500, busyMs: 0, expect: { estimate: 3, rate: 3 } }],
  },
  {
    name: "probing: faster after the quiet spell, with the square of the spell's excess",
    // 40 s busy: 10 s over the 30 s spell: 0.98 + 0.08 + 0.01 × 10².
    steps: [...FIRST, { probe: 10, expect: { rate: 5.25 } }, { probe: 40, expect: { rate: 5.25 * 2.06 } }],
  },
  {
    name: "a slow key's quiet spell is 30 requests at its estimate long",
    // Estimate 0.25 (a quarter of 1): the spell is 120 s, not 30.
    settings: { initialRate: 1 },
    steps: [
      { limited: 500, busyMs: 0, expect: { estimate: 0.25, rate: 0.245 } },
      { probe: 100, expect: { rate: 0.25 * 1.18 } },
      { probe: 130, expect: { rate: 0.25 * 2.24 } },
    ],
  },
  {
    name: 'probing stops at maxRate',
    settings: { maxRate: 10 },
    steps: [...FIRST, { probe: 60, expect: { rate: 10 } }],
  },
  {
    name: 'without shared-key detection a cut estimate is measured again as alone',
    // 4.95 × 0.8 = 3.96 (a fifth off), then 40 requests 250 ms apart over 10 s, busy: 4.0.
    steps: [
      ...MEASURED,
      ...accepts(12000, 13000, 500),
      {
        limited: 14000,
        busyMs: 2900,
        expect: { estimate: (50 / 10.1) * 0.8, rate: (50 / 10.1) * 0.8 * 0.98 },
      },
      ...accepts(14250, 24000, 250),
      { limited: 24000, busyMs: 10000, expect: { estimate: 4, rate: 3.92, confirmed: true, shared: false } },
    ],
  },
  {
    name: 'shared key (TS only): a measured estimate cut by a tenth, then additive increase and a fifth off',
    sharedKey: true,
    // The same events: 3.96 < 0.9 × 4.95, so the key is shared; the probe adds 0.005 × 8 req/s per
    // busy second (10 s: +0.4); the next 429 takes a fifth off min(4.0 measured, 4.2 in use).
    steps: [
      ...MEASURED,
      ...accepts(12000, 13000, 500),
      {
        limited: 14000,
        busyMs: 2900,
        expect: { estimate: (50 / 10.1) * 0.8, rate: (50 / 10.1) * 0.8 * 0.98, shared: true },
      },
      { probe: 10, expect: { rate: (50 / 10.1) * 0.8 * 0.98 + 0.4 } },
      ...accepts(14250, 24000, 250),
      { limited: 24000, busyMs: 10000, rateInUse: 4.2, expect: { estimate: 3.2, rate: 3.136, shared: true } },
    ],
  },
];

/** What each `limited` or `probe` step gave: estimate and rate. */
type Outcome = { estimate: number; rate: number; confirmed?: boolean; shared?: boolean };

function settingsOf(vector: Vector): EstimatorSettings {
  return { ...BASE, ...vector.settings, detectSharedKey: vector.sharedKey === true };
}

function runTs(vector: Vector): Outcome[] {
  const estimator = new RateEstimator(settingsOf(vector));
  const out: Outcome[] = [];
  let rate = estimator.settings.initialRate;
  for (const step of vector.steps) {
    if ('accept' in step) {
      estimator.accepted(step.accept);
    } else if ('limited' in step) {
      rate = estimator.congestion(step.limited, step.busyMs, step.rateInUse ?? rate);
      const { confirmed, shared } = estimator;
      out.push({ estimate: estimator.estimate!, rate, confirmed, shared });
    } else {
      rate = estimator.probeRate(step.probe);
      out.push({ estimate: estimator.estimate!, rate });
    }
  }
  return out;
}

/**
 * Drives `ESTIMATOR_LUA` as the `LIMITED` script does (the accepted count and their times, latest
 * first, since the last event; the elapsed time; the busy time) and as `PRELUDE` probes.
 */
const LUA_DRIVER = `${ESTIMATOR_LUA}
local burstS = tonumber(ARGV[8])
local steps = cjson.decode(ARGV[9])
local est, eventAt, times, out = nil, nil, {}, {}
local function fmt(x) return string.format('%.17g', x) end
for _, s in ipairs(steps) do
  if s.accept then
    table.insert(times, 1, s.accept)
  elseif s.limited then
    local rate
    local elapsed = eventAt and (s.limited - eventAt) or 0
    est, rate = congestion(est, #times, elapsed, s.busyMs, times, s.limited, burstS)
    eventAt = s.limited
    times = {}
    out[#out + 1] = {fmt(est), fmt(rate)}
  else
    out[#out + 1] = {fmt(est), fmt(probe_rate(est, s.probe))}
  end
end
return out
`;

async function runLua(client: Redis, vector: Vector): Promise<Outcome[]> {
  const s = settingsOf(vector);
  const args = [s.initialRate, s.minRate, s.maxRate, s.holdShare, s.probeGain, s.quietSeconds, s.quietGain];
  const answer = (await client.eval(
    LUA_DRIVER,
    0,
    ...args.map(String),
    String(s.assumedBurstSeconds),
    JSON.stringify(vector.steps),
  )) as [string, string][];
  return answer.map(([estimate, rate]) => ({ estimate: Number(estimate), rate: Number(rate) }));
}

function expected(vector: Vector): Expect[] {
  return vector.steps.flatMap((step) => ('expect' in step ? [step.expect as Expect] : []));
}

/** Equal to the hand-worked figure but for float rounding in the last digits. */
function close(actual: number, wanted: number): boolean {
  return Math.abs(actual - wanted) <= 1e-9 * Math.max(1, Math.abs(wanted));
}

function check(outcomes: Outcome[], wanted: Expect[], withFlags: boolean): void {
  expect(outcomes).toHaveLength(wanted.length);
  wanted.forEach((want, i) => {
    const got = outcomes[i]!;
    if (!('estimate' in want) || want.estimate === undefined) {
      expect(close(got.rate, want.rate), `step ${i}: rate ${got.rate}, wanted ${want.rate}`).toBe(true);
      return;
    }
    expect(
      close(got.estimate, want.estimate),
      `step ${i}: estimate ${got.estimate}, wanted ${want.estimate}`,
    ).toBe(true);
    expect(close(got.rate, want.rate), `step ${i}: rate ${got.rate}, wanted ${want.rate}`).toBe(true);
    if (withFlags && want.confirmed !== undefined)
      expect(got.confirmed, `step ${i}: confirmed`).toBe(want.confirmed);
    if (withFlags && want.shared !== undefined) expect(got.shared, `step ${i}: shared`).toBe(want.shared);
  });
}

describe('rate estimator vectors: the TypeScript estimator', () => {
  it.each(VECTORS.map((v) => [v.name, v] as const))('%s', (_name, vector) => {
    check(runTs(vector), expected(vector), true);
  });
});

let redis: TestRedis;
const clients: Redis[] = [];

describe.skipIf(!HAS_REDIS)('rate estimator vectors: the Lua copy on a real Redis', () => {
  redis = useRedis();
  afterAll(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });
  const shared = VECTORS.filter((v) => !v.sharedKey);

  it.each(shared.map((v) => [v.name, v] as const))('%s', async (_name, vector) => {
    const client = new Redis(redis.url);
    clients.push(client);
    const lua = await runLua(client, vector);
    check(lua, expected(vector), false);
    // The same operations in the same order: the same doubles, not merely close ones.
    expect(lua).toEqual(runTs(vector).map(({ estimate, rate }) => ({ estimate, rate })));
  });
});
