/**
 * What the engine bench's scenarios share: the work's size, the ideal bound, the rate-limited
 * service, and the shape of a scenario's machine-readable result (`npm run bench -- engine --json`).
 */
import type { SandboxOptions } from '../../src/sandbox/index.js';
import type { NaiveItem } from '../naive.js';
import { printTable, type RequestCounts, verdict } from '../util.js';

export const JOBS = 200;
/** Start rate of the governor in the overhead row that takes its ramp out of the picture. */
export const PRESET_RATE = 200;
/** The contract's floor between two polls of one job. */
export const POLL_FLOOR_S = 2;
export const CONCURRENCY = 16;
export const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal'];

/** Everything one client run produced that the tables need. */
export interface Measured {
  seconds: number;
  succeeded: number;
  counts: RequestCounts;
  /** Mean seconds from the 202 to the job's first poll. */
  firstPollS: number;
  /** Mean seconds between the job's end at the service and the poll that saw it. */
  noticeLagS: number;
  /** Share of jobs whose first poll already saw the end (0..1). */
  firstHit: number;
  /** Process CPU seconds (client and sandbox: they share the process). */
  cpuS: number;
  note?: string;
}

/** One job's timeline as seen from outside the client. */
export interface JobTrace {
  acceptedAt: number;
  jobId: string;
  processingTimeMs: number | null;
}

/** The ideal bound and its parts, in seconds. */
export interface Ideal {
  seconds: number;
  slotBound: number;
  rateBound: number;
  workFloor: number;
  meanJobS: number;
  requests: number;
  /** Least mean delay between a job's end and the poll that sees it, under the 2 s floor. */
  minLagS: number;
  /** The slot bound again with that lag added to every job: what a contract-abiding client can reach. */
  achievable: number;
}

/**
 * The best makespan any client can reach with these settings:
 *
 *   ideal = max(slot bound, rate bound)
 *   slot bound = ceil(jobs / concurrency) × (queuedMs + processingMs)
 *   rate bound = (requests_min − burst) / rps,  requests_min = 2 × jobs (one submit, one poll)
 *
 * Assumptions: the jitter is uniform and symmetric, so a job's mean service time is queuedMs +
 * processingMs (the sandbox holds a job `queued` for queuedMs before processing starts, so that is
 * service time too); a job slot is busy from its submit until the job ends, and the perfect client
 * polls exactly at that moment, once; uploads, downloads, preflight and the one `GET /v1/styles` take
 * no time. The slot bound treats the run as ceil(jobs / concurrency) waves of mean-length jobs,
 * which includes the tail of the last, partly filled wave; the strict floor of a work-conserving
 * pool, jobs × mean / concurrency, is printed beside it.
 */
export function idealBound(s: {
  jobs: number;
  concurrency: number;
  processingMs: number;
  jitterMs: number;
  queuedMs: number;
  rps: number | null;
  burst: number;
}): Ideal {
  const meanJobS = (s.queuedMs + s.processingMs) / 1000;
  const slotBound = Math.ceil(s.jobs / s.concurrency) * meanJobS;
  const requests = 2 * s.jobs;
  const rateBound = s.rps ? Math.max(0, requests - s.burst) / s.rps : 0;
  const workFloor = (s.jobs * meanJobS) / s.concurrency;
  // The ideal's "one poll exactly at the end" needs to know when a job ends. A real client does not:
  // the end is uniform over [mean − jitter, mean + jitter] and polls of one job must be ≥ 2 s apart.
  // Polls every 2 s across that window (or one poll at its end, when it is ≤ 2 s wide) leave a mean
  // lag of min(jitter, 2 s / 2), whatever their phase, and nothing with gaps ≥ 2 s does better.
  const minLagS = Math.min(s.jitterMs / 1000, POLL_FLOOR_S / 2);
  const achievable = Math.max(Math.ceil(s.jobs / s.concurrency) * (meanJobS + minLagS), rateBound);
  return {
    seconds: Math.max(slotBound, rateBound),
    slotBound,
    rateBound,
    workFloor,
    meanJobS,
    requests,
    minLagS,
    achievable,
  };
}

/** A rate-limited service as the scenarios set it up: its timing and its token bucket. */
export interface LimitedService {
  processingMs: number;
  jitterMs: number;
  queuedMs: number;
  rps: number;
  burst: number;
}

/** The sandbox for a {@link LimitedService}: 429 with Retry-After in seconds on an empty bucket. */
export function limitedSandbox(s: LimitedService): SandboxOptions {
  return {
    processingMs: s.processingMs,
    jitterMs: s.jitterMs,
    queuedMs: s.queuedMs,
    maxJobs: 10_000,
    faults: { rateLimit: { rps: s.rps, burst: s.burst }, retryAfter: 'seconds' },
  };
}

/** "processing 4 ± 1 s (+0.25 s queued), rate limit 5 req/s burst 5". */
export function describeService(s: LimitedService): string {
  return (
    `processing ${s.processingMs / 1000} ± ${s.jitterMs / 1000} s (+${s.queuedMs / 1000} s queued), ` +
    `rate limit ${s.rps} req/s burst ${s.burst}`
  );
}

/** What every scenario starts from: the temporary folder, the manifest of drawn kitchens and their items. */
export interface EngineWork {
  dir: string;
  /** `JOBS` rows, one per drawn kitchen. */
  manifest: string;
  /** The same items for the naive client. */
  naiveItems: NaiveItem[];
  /** Mean bytes of the drawn kitchens. */
  meanBytes: number;
}

/** One target of a scenario: its figure as a number and as the table shows it, and whether it is met. */
export interface TargetResult {
  target: string;
  /** A ratio, a share in %, a count: what `shown` says. */
  figure: number;
  shown: string;
  pass: boolean;
}

/** A scenario's machine-readable result, printed by `npm run bench -- engine --json`. */
export interface ScenarioResult {
  /** Its name (`rate-limited`, `overhead`, `budget`, `shared-key`, `workers`). */
  scenario: string;
  /** Its number in the human output (`[1]` to `[5]`). */
  number: number;
  title: string;
  /** Why it did not run (null when it ran). */
  skipped: string | null;
  /** Its measured figures and bounds (seconds, counts, ratios), named as in its table. */
  figures: Record<string, unknown>;
  targets: TargetResult[];
}

/** A {@link TargetResult}. */
export function target(name: string, figure: number, shown: string, pass: boolean): TargetResult {
  return { target: name, figure, shown, pass };
}

/** Prints a scenario's targets as the table every scenario ends with (`header`: the first column's). */
export function printTargets(header: string, targets: readonly TargetResult[]): void {
  printTable(
    [header, 'figure', 'verdict'],
    targets.map((t) => [t.target, t.shown, verdict(t.pass)]),
  );
}
