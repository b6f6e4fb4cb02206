/**
 * Runs the built CLI (`dist/bin.js`) as a child process, as users run it, against the emulator in a
 * process of its own (bench/emulator.ts), and measures it from /proc: peak RSS, CPU, wall time, the
 * request counts the emulator saw. Shared by the scale and the sources sections.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createReadStream, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { RequestCounts } from './util.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Jobs in flight of a measured run unless a section says otherwise. */
export const CONCURRENCY = 64;

/** Options of {@link measureCli}. */
export interface MeasureOptions {
  /** `--concurrency`. @default {@link CONCURRENCY} */
  concurrency?: number;
  /** Environment added to the child's (which otherwise has only PATH and the API key). */
  env?: Record<string, string>;
  /** Called once the child is started (to sample what it writes, say). */
  onStart?: (child: ChildProcess) => void;
  /** The folder of the run's run.log (an `s3://` output's cache). @default the output folder */
  logDir?: string;
  /** Node options for the child (V8 heap flags, say), before the script. */
  nodeArgs?: string[];
  /** Another Node binary and built CLI (an older commit's, on an older Node). @default this one's */
  node?: string;
  bin?: string;
}

/**
 * The runtime settings of the container image (the last `ENV` line of the Dockerfile:
 * `MALLOC_ARENA_MAX`, `NODE_OPTIONS`), given to every measured CLI run so the figures are those of
 * the CLI as shipped, and cannot drift from the image. The probe environment's own variables win.
 */
export const IMAGE_ENV: Record<string, string> = Object.fromEntries(
  (
    readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')
      .match(/^ENV (.+)$/gm)
      ?.at(-1) ?? ''
  )
    .slice(4)
    .split(/\s+/)
    .filter((pair) => pair.includes('=') && !pair.startsWith('NODE_ENV='))
    .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);

/** Builds dist/ (the CLI runs as a child process, as users run it). */
export function buildDist(): void {
  execFileSync(
    process.execPath,
    [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    { cwd: ROOT, stdio: 'inherit' },
  );
}

/** What one CLI run measured. */
export interface CliFigures {
  exitCode: number | null;
  wallS: number;
  peakRssMb: number;
  /** The peak of the tree's plain VmRSS sum (pages shared by its processes counted in each). */
  naiveRssMb: number;
  /** Largest JavaScript heap left after a full (mark-compact) GC: the live heap, from `--trace-gc`. */
  liveHeapMb: number | null;
  succeeded: number;
  /** Items per second from the first POST to the last download (null on a run that sent nothing). */
  rate: number | null;
  /** Seconds from the last download to the exit. */
  tailS: number | null;
  /** Of which: from the last download to the reports written (`run_end` in run.log). */
  reportsS: number | null;
  /** run.log's `review_end` figures (null with `--no-review`). */
  reviewEnd: { reviewed: number; sources_decoded: number } | null;
  requests: RequestCounts;
  /** CPU seconds (user + system, every thread) of the CLI, and of the emulator during the run. */
  cpuS: number;
  /** Of it, the CPU seconds of the processes the CLI started (the review's). */
  childrenCpuS: number;
  emulatorCpuS: number;
}

/** The emulator process: its URL, and its request counts on demand. */
export async function startEmulator(maxJobs: number) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'bench', 'emulator.ts'), String(maxJobs)],
    {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const url = String((await lines.next()).value);
  return {
    url,
    async command(name: 'stats' | 'reset'): Promise<unknown> {
      child.stdin!.write(`${name}\n`);
      return JSON.parse(String((await lines.next()).value));
    },
    stop: () => child.stdin!.end(),
    cpuS: () => cpuTicks(child.pid!) / CLOCK_TICKS,
  };
}

/** Runs `kitchen-batch run` as a child process and measures it. */
export async function measureCli(
  cwd: string,
  manifest: string,
  out: string,
  emulator: Awaited<ReturnType<typeof startEmulator>>,
  extra: string[] = [],
  options: MeasureOptions = {},
): Promise<CliFigures> {
  await emulator.command('reset');
  // The previous run's files written back to disk now, not during this one (ext4 converts the
  // extents of files written earlier in kernel threads that would take this run's CPU).
  execFileSync('sync');
  const emulatorCpu = emulator.cpuS();
  const started = performance.now();
  const child = spawn(
    options.node ?? process.execPath,
    [
      '--trace-gc',
      ...(options.nodeArgs ?? []),
      options.bin ?? path.join(ROOT, 'dist', 'bin.js'),
      'run',
      manifest,
      '--base-url',
      emulator.url,
      '--out',
      out,
      '--concurrency',
      String(options.concurrency ?? CONCURRENCY),
      '--no-progress',
      '--json',
      ...extra,
    ],
    {
      cwd,
      env: { PATH: process.env.PATH ?? '', KITCHEN_API_KEY: 'bench', ...IMAGE_ENV, ...options.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const peak = sampleProcess(child);
  options.onStart?.(child);
  // stdout: the GC trace (one line per collection) and the CLI's JSON summary, read line by line.
  let summaryLine = '{}';
  let liveHeapMb: number | null = null;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.startsWith('{')) summaryLine = line;
    const full = /Mark-Compact [\d.]+ \([\d.]+\) -> ([\d.]+) \(/.exec(line);
    if (full) liveHeapMb = Math.max(liveHeapMb ?? 0, Number(full[1]));
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  const exitedAt = Date.now();
  const wallS = (performance.now() - started) / 1000;
  const summary = JSON.parse(summaryLine) as { totals?: { succeeded?: number } };
  const { firstPost, lastDownload, runEnd, reviewEnd } = await runTimes(options.logDir ?? out);
  const requests = (await emulator.command('stats')) as RequestCounts;
  const sent = firstPost !== null && lastDownload !== null && requests.creates > 0;
  return {
    exitCode: code,
    wallS,
    peakRssMb: peak.stop(),
    naiveRssMb: peak.naiveSumMb(),
    cpuS: peak.cpuS(),
    childrenCpuS: peak.childrenCpuS(),
    emulatorCpuS: emulator.cpuS() - emulatorCpu,
    liveHeapMb,
    succeeded: summary.totals?.succeeded ?? 0,
    rate: sent ? requests.creates / ((lastDownload - firstPost) / 1000) : null,
    tailS: sent ? (exitedAt - lastDownload) / 1000 : null,
    reportsS: sent && runEnd !== null ? (runEnd - lastDownload) / 1000 : null,
    reviewEnd,
    requests,
  };
}

/** Runs the built CLI with `args` in `cwd` (stdout dropped, stderr shown): its time, peak RSS and exit code. */
export async function measureCommand(
  cwd: string,
  args: string[],
): Promise<{ seconds: number; peakRssMb: number; exitCode: number | null }> {
  const started = performance.now();
  const child = spawn(process.execPath, [path.join(ROOT, 'dist', 'bin.js'), ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...IMAGE_ENV },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const peak = sampleProcess(child);
  const [exitCode] = (await once(child, 'exit')) as [number | null];
  return { seconds: (performance.now() - started) / 1000, peakRssMb: peak.stop(), exitCode };
}

/**
 * Peak resident memory and CPU time of a child and of the processes it starts (the review's),
 * sampled from /proc every 100 ms. The peak is the child's own (VmHWM: the kernel's peak) or the
 * largest sum over the tree, whichever is higher; the CPU time of each process is its last sample.
 *
 * In the sum, a process the child started counts its private pages only (smaps_rollup's
 * Private_Clean + Private_Dirty): its shared pages are the Node.js binary's and libvips' (measured
 * for the review's process: 50 of its 100 MB, all shared clean), which the child maps and has
 * resident too, so adding its whole RSS counted them twice; memory of the machine (or of a
 * container's cgroup) holds them once. `naiveSum` is the peak of the plain VmRSS sum, for comparison.
 */
export function sampleProcess(child: ChildProcess): {
  stop(): number;
  naiveSumMb(): number;
  cpuS(): number;
  childrenCpuS(): number;
} {
  let peakKb = 0;
  let naivePeakKb = 0;
  const ticks = new Map<number, number>();
  const read = () => {
    let sumKb = 0;
    let naiveKb = 0;
    for (const pid of processTree(child.pid!)) {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        naiveKb += rssKb;
        if (pid === child.pid) {
          peakKb = Math.max(peakKb, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
          sumKb += rssKb;
        } else {
          sumKb += privateKb(pid);
        }
        ticks.set(pid, cpuTicks(pid));
      } catch {}
    }
    peakKb = Math.max(peakKb, sumKb);
    naivePeakKb = Math.max(naivePeakKb, naiveKb);
  };
  const timer = setInterval(read, 100);
  return {
    stop() {
      clearInterval(timer);
      return peakKb / 1024;
    },
    naiveSumMb: () => naivePeakKb / 1024,
    // The last samples (within 100 ms of each exit): close enough for a run of tens of seconds.
    cpuS: () => [...ticks.values()].reduce((sum, n) => sum + n, 0) / CLOCK_TICKS,
    childrenCpuS: () =>
      [...ticks].reduce((sum, [pid, n]) => (pid === child.pid ? sum : sum + n), 0) / CLOCK_TICKS,
  };
}

/** A process's private resident memory (pages no other process maps), kB. */
function privateKb(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0);
  return field('Private_Clean') + field('Private_Dirty');
}

/** A process and its descendants (from /proc/<pid>/task/<tid>/children), or none once it has exited. */
function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    try {
      for (const tid of readdirSync(`/proc/${tree[i]}/task`)) {
        const children = readFileSync(`/proc/${tree[i]}/task/${tid}/children`, 'utf8');
        tree.push(...children.split(' ').filter(Boolean).map(Number));
      }
    } catch {}
  }
  return tree;
}

/** Clock ticks a second of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = 100;

/** CPU time (user + system, all threads) a process has used so far, in clock ticks. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (in parentheses, which may hold spaces): utime is the 14th field.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** The wall-clock times of this run's first POST (journal `submitting`) and last download (run.log). */
async function runTimes(out: string): Promise<{
  firstPost: number | null;
  lastDownload: number | null;
  runEnd: number | null;
  /** run.log's `review_end` line (results reviewed, sources the review decoded itself), if any. */
  reviewEnd: { reviewed: number; sources_decoded: number } | null;
}> {
  let firstPost: number | null = null;
  let runStart = 0;
  for await (const line of createInterface({ input: createReadStream(path.join(out, 'journal.jsonl')) })) {
    if (line.startsWith('{"t":"run"')) {
      runStart = Date.parse((JSON.parse(line) as { at: string }).at);
      firstPost = null;
    } else if (firstPost === null && line.startsWith('{"t":"submitting"')) {
      const at = Date.parse((JSON.parse(line) as { at: string }).at);
      if (at >= runStart) firstPost = at;
    }
  }
  let lastDownload: number | null = null;
  let runEnd: number | null = null;
  let reviewEnd = null;
  for await (const line of createInterface({ input: createReadStream(path.join(out, 'run.log')) })) {
    if (line.includes('"event":"review_end"')) reviewEnd = JSON.parse(line);
    const end = line.includes('"event":"run_end"');
    if (!end && !line.includes('"event":"downloaded"')) continue;
    const at = Date.parse((JSON.parse(line) as { time: string }).time);
    if (at < runStart) continue;
    if (end) runEnd = at;
    else lastDownload = at;
  }
  return { firstPost, lastDownload, runEnd, reviewEnd };
}
