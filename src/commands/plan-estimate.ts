/**
 * `plan`'s estimate (docs/contract.md#plan): how long the new jobs should take at the key's rate,
 * learnt by an earlier run and remembered per service (`src/state/rates.ts`), and whether that fits
 * `--max-duration`. Said before the night rather than found out in the morning.
 */
import { type RememberedRate, recallRate } from '../state/rates.js';

/** Requests each job costs at the least: its POST and one poll that finds it done. */
const REQUESTS_PER_JOB = 2;

/** The estimate as `plan --json` carries it. */
export interface PlanEstimate {
  /** Jobs the run would submit (new and again). */
  jobs: number;
  /** Requests per second the estimate assumes, or null when none is known. */
  rate_per_second: number | null;
  /** Where that rate comes from: learnt by an earlier run, or `--max-rate`. */
  rate_source: 'learnt' | 'max_rate' | null;
  /** When the remembered rate was learnt (ISO 8601), if it was. */
  learnt_at: string | null;
  /** Items in flight at once (`--concurrency`). */
  concurrency: number;
  /** Seconds the jobs should take at that rate (two requests a job), or null without a rate. */
  seconds: number | null;
  /** `--max-duration` in seconds, if given. */
  max_duration_seconds: number | null;
  /** Whether {@link seconds} fits `--max-duration`; null without either. */
  fits: boolean | null;
}

/** What the estimate is made from. */
export interface EstimateInput {
  jobs: number;
  concurrency: number;
  remembered: RememberedRate | null;
  maxRate: number | null;
  maxDurationMs: number | null;
}

/**
 * The estimate, pure: the remembered rate (capped by `--max-rate`, as the run would be), else
 * `--max-rate`, else none. The rate is the bound a night's catalogue meets; processing time is not
 * counted, so with few jobs and little concurrency the run can take longer.
 */
export function estimatePlan(input: EstimateInput): PlanEstimate {
  const learnt = input.remembered?.rate_per_second ?? null;
  const rate =
    learnt !== null && input.maxRate !== null ? Math.min(learnt, input.maxRate) : (learnt ?? input.maxRate);
  const seconds = rate === null ? null : Math.ceil((REQUESTS_PER_JOB * input.jobs) / rate);
  const maxSeconds = input.maxDurationMs === null ? null : input.maxDurationMs / 1000;
  return {
    jobs: input.jobs,
    rate_per_second: rate,
    rate_source: learnt !== null ? 'learnt' : rate !== null ? 'max_rate' : null,
    learnt_at: input.remembered?.learnt_at ?? null,
    concurrency: input.concurrency,
    seconds,
    max_duration_seconds: maxSeconds,
    fits: seconds === null || maxSeconds === null ? null : seconds <= maxSeconds,
  };
}

/** The estimate for the service at `baseUrl` (none remembered without one). */
export async function planEstimate(
  baseUrl: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  input: Omit<EstimateInput, 'remembered'>,
): Promise<PlanEstimate> {
  const remembered = baseUrl ? await recallRate(baseUrl, env) : null;
  return estimatePlan({ ...input, remembered });
}

/** "1 h 05 min", "3 min 20 s", "42 s". */
function duration(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, '0')} s`;
  return `${Math.floor(seconds / 3600)} h ${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')} min`;
}

/** The estimate as the plan's last line(s) say it. */
export function describeEstimate(e: PlanEstimate): string {
  if (e.rate_per_second === null) {
    return (
      `estimate: ${e.jobs} jobs to submit; no rate is known for this service yet ` +
      '(a run that meets its rate limit remembers it; --max-rate gives one)'
    );
  }
  const source =
    e.rate_source === 'learnt' ? `the rate learnt ${e.learnt_at ?? ''}`.trim() : 'the rate --max-rate sets';
  let text =
    `estimate: ${e.jobs} jobs to submit at ${e.rate_per_second} requests/s (${source}), ` +
    `concurrency ${e.concurrency}: about ${duration(e.seconds ?? 0)} (two requests a job; processing time not counted)`;
  if (e.fits !== null && e.max_duration_seconds !== null) {
    text += e.fits
      ? `; fits --max-duration ${duration(e.max_duration_seconds)}`
      : `; does NOT fit --max-duration ${duration(e.max_duration_seconds)}: the rest would be left incomplete/max_duration`;
  }
  return text;
}
