/**
 * One client's run against a fresh sandbox, measured from outside: ours (`runBatch`, in process)
 * and the naive fetch client, with the sandbox's request and poll logs.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { GovernorOptions } from '../../src/api/governor.js';
import type { RunEvent } from '../../src/pipeline/events.js';
import { type RunResult, runBatch } from '../../src/pipeline/run.js';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.js';
import type { Report, ReportItem } from '../../src/types.js';
import { type NaiveItem, runNaive } from '../naive.js';
import { countRequests, mean } from '../util.js';
import { CONCURRENCY, type JobTrace, type Measured } from './common.js';

/** Runs `task` against a sandbox started with `options`, closed after. */
export async function withSandbox<T>(
  options: SandboxOptions,
  task: (sandbox: Sandbox) => Promise<T>,
): Promise<T> {
  const sandbox = await startSandbox(options);
  try {
    return await task(sandbox);
  } finally {
    await sandbox.close();
  }
}

/** Our `runBatch` on `manifest` against a fresh sandbox (`governor`: its rate settings). */
export async function measureOurs(
  options: SandboxOptions,
  manifest: string,
  out: string,
  queuedMs: number,
  governor?: GovernorOptions,
): Promise<Measured> {
  return withSandbox(options, async (sandbox) => {
    const accepted = new Map<string, number>();
    let decreases = 0;
    const onEvent = (event: RunEvent) => {
      if (event.type === 'item' && event.status === 'submitted') accepted.set(event.id, performance.now());
      if (event.type === 'rate' && event.pauseMs !== undefined) decreases++;
    };
    const cpu = process.cpuUsage();
    const started = performance.now();
    let result: RunResult | undefined;
    let failure: string | undefined;
    try {
      result = await runBatch({
        manifest,
        out,
        cwd: path.dirname(manifest),
        service: {
          baseUrl: sandbox.url,
          apiKey: sandbox.apiKey ?? 'bench-key',
          ...(governor ? { governor } : {}),
        },
        limits: { concurrency: CONCURRENCY },
        output: { html: false },
        onEvent,
      });
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
    }
    const seconds = (performance.now() - started) / 1000;
    const cpuUsed = process.cpuUsage(cpu);
    const traces: JobTrace[] = [];
    const report = result
      ? (JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report)
      : { items: [] as ReportItem[] };
    for (const item of report.items) {
      const at = accepted.get(item.id);
      if (at !== undefined && item.job_id)
        traces.push({ acceptedAt: at, jobId: item.job_id, processingTimeMs: item.processing_time_ms });
    }
    const succeeded = result?.run.totals.succeeded ?? 0;
    const notes = [
      failure ? `ours failed: ${failure}` : '',
      decreases > 0 ? `ours: the governor lowered its rate ${decreases}× on 429s` : '',
    ].filter(Boolean);
    return {
      seconds,
      succeeded,
      counts: countRequests(sandbox.stats.requests),
      ...timeline(traces, sandbox, queuedMs),
      cpuS: (cpuUsed.user + cpuUsed.system) / 1e6,
      ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
    };
  });
}

/** The naive client on `items` against a fresh sandbox. */
export async function measureNaive(
  options: SandboxOptions,
  items: NaiveItem[],
  out: string,
  queuedMs: number,
): Promise<Measured> {
  await mkdir(out, { recursive: true });
  return withSandbox(options, async (sandbox) => {
    const cpu = process.cpuUsage();
    const result = await runNaive({
      baseUrl: sandbox.url,
      apiKey: sandbox.apiKey ?? 'bench-key',
      items,
      concurrency: CONCURRENCY,
      outDir: out,
    });
    const cpuUsed = process.cpuUsage(cpu);
    const traces = result.jobs.map((j) => ({
      acceptedAt: j.acceptedAt,
      jobId: j.jobId,
      processingTimeMs: j.processingTimeMs,
    }));
    return {
      seconds: result.seconds,
      succeeded: result.jobs.filter((j) => j.status === 'succeeded').length,
      counts: countRequests(sandbox.stats.requests),
      ...timeline(traces, sandbox, queuedMs),
      cpuS: (cpuUsed.user + cpuUsed.system) / 1e6,
    };
  });
}

/**
 * First-poll delay and notice lag from the sandbox's poll log. The job's end is estimated as the
 * 202's arrival + queuedMs + processing_time_ms (the sandbox measures processing from the end of
 * the queued phase); the 202 is stamped at the client, so both figures carry a few ms of slack.
 */
function timeline(
  traces: readonly JobTrace[],
  sandbox: Sandbox,
  queuedMs: number,
): { firstPollS: number; noticeLagS: number; firstHit: number } {
  const first: number[] = [];
  const lag: number[] = [];
  let hits = 0;
  for (const t of traces) {
    const polls = sandbox.stats.polls.get(t.jobId);
    if (!polls || polls.length === 0) continue;
    first.push(((polls[0] as number) - t.acceptedAt) / 1000);
    if (polls.length === 1) hits++;
    if (t.processingTimeMs !== null) {
      const endedAt = t.acceptedAt + queuedMs + t.processingTimeMs;
      lag.push(((polls[polls.length - 1] as number) - endedAt) / 1000);
    }
  }
  return {
    firstPollS: mean(first),
    noticeLagS: mean(lag),
    firstHit: first.length > 0 ? hits / first.length : Number.NaN,
  };
}
