/**
 * What scenarios [4] and [5] share: one key used by several CLI processes (children under tsx),
 * their work's size, and the table that sets their runs side by side.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sandbox } from '../../src/sandbox/index.js';
import type { Report } from '../../src/types.js';
import { fmt, printTable, type RequestCounts } from '../util.js';
import { CONCURRENCY } from './common.js';

/** The shared-key scenario of issue 12: four `--shard` processes on one key, and one process on the same work. */
export const SHARED = {
  jobs: sharedJobs(),
  processes: 4,
  processingMs: 4000,
  jitterMs: 1000,
  queuedMs: 250,
  rps: 8,
  burst: 8,
} as const;

/** The work of scenarios [4] and [5]: `BENCH_SHARED_JOBS` jobs, a positive multiple of four (default 120, issue 12's figure). */
function sharedJobs(): number {
  const value = process.env.BENCH_SHARED_JOBS;
  if (value === undefined || value === '') return 120;
  const jobs = Number(value);
  if (!Number.isInteger(jobs) || jobs <= 0 || jobs % 4 !== 0) {
    throw new Error(`BENCH_SHARED_JOBS must be a positive multiple of 4, got ${JSON.stringify(value)}`);
  }
  return jobs;
}

/** `--max-rate` for each of scenario [4]'s sharing processes (`BENCH_SHARED_MAX_RATE`), or null. */
export function sharedMaxRate(): number | null {
  const value = process.env.BENCH_SHARED_MAX_RATE;
  if (value === undefined || value === '') return null;
  const rate = Number(value);
  if (!Number.isFinite(rate) || rate <= 0) {
    throw new Error(`BENCH_SHARED_MAX_RATE must be a positive number, got ${JSON.stringify(value)}`);
  }
  return rate;
}

/** What one CLI process did, attributed by the job ids in its report. */
export interface ProcessShare {
  label: string;
  exitCode: number | null;
  succeeded: number;
  /** Requests the service accepted for this process's jobs (submissions and polls). */
  accepted: number;
  rateLimited: number;
  apiRequests: number;
  /** Its accepted requests per second between its first and last job request. */
  rate: number;
  /** The jobs its report lists. */
  jobIds: ReadonlySet<string>;
}

/** The repository's root (bench/engine/ is two folders down). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** One client's run on a shared key, as scenarios [4] and [5] print it. */
export interface KeyRun {
  name: string;
  ideal: number;
  /** First to last API request, s. */
  span: number;
  seconds: number;
  counts: RequestCounts;
  ok: number;
  /** Items each worker finished ([5]). */
  items?: string;
}

/** Prints the runs side by side; returns how each run's key rate used and 429 share are figured. */
export function printKeyRuns(runs: KeyRun[], jobs: number, rps: number) {
  const used = (r: KeyRun) => (r.counts.service - r.counts.rateLimited) / Math.max(r.span, 1e-9) / rps;
  const share429 = (r: KeyRun) => (100 * r.counts.rateLimited) / Math.max(1, r.counts.service);
  const perWorker = runs.some((r) => r.items);
  printTable(
    [
      'client',
      'first→last API request s',
      'ideal s',
      '× ideal',
      'wall s',
      'API req/job',
      '429 %',
      'key rate used',
      'ok',
      ...(perWorker ? ['items per worker'] : []),
    ],
    runs.map((r) => [
      r.name,
      fmt(r.span),
      fmt(r.ideal),
      `${fmt(r.span / r.ideal, 2)}×`,
      fmt(r.seconds),
      fmt(r.counts.service / jobs, 2),
      `${fmt(share429(r), 1)}%`,
      `${fmt(100 * used(r), 0)}%`,
      `${r.ok}/${jobs}`,
      ...(perWorker ? [r.items || '–'] : []),
    ]),
  );
  return { used, share429 };
}

/** Runs the CLI (from source, under tsx) as a child; resolves with its stdout, rejects on a non-zero exit. */
export async function cliChild(args: string[], env: Record<string, string>): Promise<string> {
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), path.join(ROOT, 'src', 'bin.ts'), ...args],
    {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let stdout = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`kitchen-batch ${args[0]} exited with ${code}`);
  return stdout;
}

/** Runs the CLI (from source) as a child process against the sandbox; its report says what it did. */
export async function runProcess(
  sandbox: Sandbox,
  manifest: string,
  out: string,
  shard: string | null,
  extra: string[] = [],
): Promise<ProcessShare> {
  const args = [
    '--import',
    import.meta.resolve('tsx'),
    path.join(ROOT, 'src', 'bin.ts'),
    'run',
    manifest,
    '--out',
    out,
    '--concurrency',
    String(CONCURRENCY),
    '--no-progress',
    ...(shard ? ['--shard', shard] : []),
    ...extra,
  ];
  const child = spawn(process.execPath, args, {
    cwd: path.dirname(manifest),
    env: {
      PATH: process.env.PATH ?? '',
      KITCHEN_API_KEY: sandbox.apiKey ?? 'bench-key',
      KITCHEN_API_BASE_URL: sandbox.url,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const [exitCode] = (await once(child, 'exit')) as [number | null];
  const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
  return {
    label: shard ?? 'all',
    exitCode,
    succeeded: report.run.totals.succeeded,
    accepted: 0,
    rateLimited: report.run.stats?.rate_limited ?? 0,
    apiRequests: report.run.stats?.api_requests ?? 0,
    rate: 0,
    jobIds: new Set(report.items.map((item) => item.job_id).filter((id): id is string => Boolean(id))),
  };
}

/** Counts each process's accepted job requests and its rate while active, from the sandbox's log. */
export function attribute(shares: ProcessShare[], sandbox: Sandbox): void {
  for (const share of shares) {
    const ids = share.jobIds;
    let first = Number.POSITIVE_INFINITY;
    let last = Number.NEGATIVE_INFINITY;
    for (const r of sandbox.stats.requests) {
      if (r.status === 429 || !r.path.startsWith('/v1/')) continue;
      const id = r.jobId ?? (r.path.startsWith('/v1/jobs/') ? r.path.slice('/v1/jobs/'.length) : undefined);
      if (id === undefined || !ids.has(id)) continue;
      share.accepted++;
      first = Math.min(first, r.at);
      last = Math.max(last, r.at);
    }
    share.rate = share.accepted / Math.max((last - first) / 1000, 1e-9);
  }
}
