/**
 * `npm run bench -- takeover` (issue 34): four `worker` processes (children under tsx) on one Redis
 * and one rate-limited key, one of them killed -9 after 30 jobs were accepted; how long the run takes
 * against the ideal 2N/R (each job needs one POST and at least one poll), beside the same run without
 * the kill, and how many items were accepted twice (must be 0). Target: ≤ 1.4× the ideal with the kill.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox } from '../src/sandbox/index.js';
import { kitchenJpeg } from '../test/support/images.js';
import { HAS_REDIS, startRedis } from '../test/support/redis.js';
import { ROOT } from './cli-run.js';
import { describeService, limitedSandbox, printTargets, target } from './engine/common.js';
import { withSandbox } from './engine/measure.js';
import { fmt, printTable, tempDir } from './util.js';

const JOBS = 120;
const WORKERS = 4;
const KILL_AFTER = 30;
const SERVICE = { processingMs: 4000, jitterMs: 1000, queuedMs: 250, rps: 8, burst: 8 } as const;

/** One run's figures. */
interface TakeoverRun {
  name: string;
  /** First to last API request at the sandbox, seconds. */
  span: number;
  /** Workers started to the last one exited, seconds (includes tsx start-up). */
  wall: number;
  jobsCreated: number;
  acceptedTwice: number;
  /** Seconds from the kill to the last of the killed worker's items put back in the queue (`stalled`). */
  requeued: number | null;
  /** Seconds from the kill to the last of the killed worker's items taken over by another worker. */
  takeover: number | null;
  /** Seconds from the kill to the first poll of one of the killed worker's accepted jobs by another. */
  firstPoll: number | null;
  /** The worst event-loop delay a surviving worker's log reports (`worker_end`), ms. */
  loopDelayMaxMs: number | null;
}

/** Runs the takeover bench; its figures and targets. */
export async function benchTakeover(): Promise<unknown> {
  if (!HAS_REDIS) {
    console.log('skipped: redis-server is not installed (apt-get install redis-server)');
    return { skipped: 'redis-server missing' };
  }
  const { dir, cleanup } = await tempDir('kb-bench-takeover-');
  try {
    await mkdir(path.join(dir, 'images'));
    let text = 'id,image,module,style\n';
    for (let i = 0; i < JOBS; i++) {
      await writeFile(path.join(dir, `images/k${i}.jpg`), await kitchenJpeg(i + 1, 160, 120, 'tinted'));
      text += `k${i},images/k${i}.jpg,change-style,modern\n`;
    }
    const manifest = path.join(dir, 'catalogue.csv');
    await writeFile(manifest, text);
    const ideal = (2 * JOBS) / SERVICE.rps;
    console.log(
      `${WORKERS} \`worker --until-drained\` processes, ${JOBS} jobs, ${describeService(SERVICE)}; ` +
        `ideal 2N/R = ${fmt(ideal)} s; the kill comes after ${KILL_AFTER} accepted jobs`,
    );
    const runs: TakeoverRun[] = [];
    for (const kill of [true, false]) runs.push(await oneRun(dir, manifest, kill));
    printTable(
      [
        'run',
        'API span s',
        '× ideal',
        'wall s',
        'jobs created',
        'accepted twice',
        'back in queue s',
        'all taken over s',
        'first poll s',
        'loop delay max ms',
      ],
      runs.map((r) => [
        r.name,
        fmt(r.span),
        `${fmt(r.span / ideal, 2)}×`,
        fmt(r.wall),
        String(r.jobsCreated),
        String(r.acceptedTwice),
        r.requeued === null ? '–' : fmt(r.requeued),
        r.takeover === null ? '–' : fmt(r.takeover),
        r.firstPoll === null ? '–' : fmt(r.firstPoll),
        r.loopDelayMaxMs === null ? '–' : String(r.loopDelayMaxMs),
      ]),
    );
    const killed = runs[0]!;
    const targets = [
      target(
        '≤ 1.4× the ideal with one worker killed',
        killed.span / ideal,
        `${fmt(killed.span / ideal, 2)}×`,
        killed.span / ideal <= 1.4,
      ),
      target(
        "killed worker's items back in the queue within 15 s",
        killed.requeued ?? Infinity,
        killed.requeued === null ? '–' : `${fmt(killed.requeued)} s`,
        (killed.requeued ?? Infinity) <= 15,
      ),
      target(
        'no item accepted twice',
        killed.acceptedTwice,
        String(killed.acceptedTwice),
        runs.every((r) => r.acceptedTwice === 0),
      ),
    ];
    printTargets('target (issue 34)', targets);
    return { ideal, runs, targets };
  } finally {
    await cleanup();
  }
}

/** One run on a fresh Redis and sandbox; with `kill`, the first worker is killed -9 after {@link KILL_AFTER} jobs. */
async function oneRun(dir: string, manifest: string, kill: boolean): Promise<TakeoverRun> {
  const redis = await startRedis();
  try {
    return await withSandbox(limitedSandbox(SERVICE), async (sandbox) => {
      const env = {
        PATH: process.env.PATH ?? '',
        KITCHEN_API_KEY: sandbox.apiKey ?? 'bench-key',
        KITCHEN_API_BASE_URL: sandbox.url,
      };
      const out = path.join(dir, `out-${kill ? 'kill' : 'nokill'}`);
      await exited(cli(['enqueue', manifest, '--redis', redis.url, '--out', out], env));
      const started = performance.now();
      const workers = Array.from({ length: WORKERS }, (_, i) =>
        cli(
          ['worker', '--redis', redis.url, '--until-drained', '--concurrency', '16', '--name', `w${i + 1}`],
          env,
        ),
      );
      let killedAt: number | null = null;
      let killedAtWall = 0;
      if (kill) {
        while (sandbox.stats.jobs < KILL_AFTER) await new Promise((r) => setTimeout(r, 50));
        workers[0]!.kill('SIGKILL');
        killedAt = performance.now();
        killedAtWall = Date.now();
      }
      await Promise.all(workers.map((w, i) => exited(w, kill && i === 0)));
      const wall = (performance.now() - started) / 1000;
      const api = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
      const span = api.length > 1 ? (api[api.length - 1]!.at - api[0]!.at) / 1000 : 0;
      return {
        name: kill ? `${WORKERS} workers, one killed -9` : `${WORKERS} workers`,
        span,
        wall,
        jobsCreated: sandbox.stats.jobs,
        acceptedTwice: Math.max(0, sandbox.stats.jobs - JOBS),
        loopDelayMaxMs: await worstLoopDelay(out, kill ? 2 : 1),
        ...(killedAt === null
          ? { requeued: null, takeover: null, firstPoll: null }
          : await takeoverSeconds(out, sandbox, killedAt, killedAtWall, await acceptedBy(out, 'w1')).then(
              (t) => ({
                requeued: t.queued,
                takeover: t.taken,
                firstPoll: t.polled,
              }),
            )),
      };
    });
  } finally {
    await redis.stop();
  }
}

/** Job ids a worker's log says it had accepted (`workers/<name>.log`, event `accepted`). */
async function acceptedBy(out: string, name: string): Promise<Set<string>> {
  const text = await readFile(path.join(out, 'workers', `${name}.log`), 'utf8').catch(() => '');
  const ids = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line.includes('"accepted"')) continue;
    try {
      const record = JSON.parse(line) as { event?: string; job_id?: string };
      if (record.event === 'accepted' && record.job_id) ids.add(record.job_id);
    } catch {
      // A line torn by the kill.
    }
  }
  return ids;
}

/** The largest `loop_delay_max_ms` in the `worker_end` records of workers w<from>..w4. */
async function worstLoopDelay(out: string, from: number): Promise<number | null> {
  let worst: number | null = null;
  for (let i = from; i <= WORKERS; i++) {
    const text = await readFile(path.join(out, 'workers', `w${i}.log`), 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line.includes('"worker_end"')) continue;
      const delay = (JSON.parse(line) as { loop_delay_max_ms?: number }).loop_delay_max_ms;
      if (typeof delay === 'number') worst = Math.max(worst ?? 0, delay);
    }
  }
  return worst;
}

/**
 * Seconds from the kill to the last of the killed worker's items taken by another worker (the
 * survivors' `taken_over` log records), and to the first poll of one of its accepted jobs.
 */
async function takeoverSeconds(
  out: string,
  sandbox: Sandbox,
  killedAt: number,
  killedAtWall: number,
  victims: Set<string>,
): Promise<{ queued: number | null; taken: number | null; polled: number | null }> {
  let last: number | null = null;
  let queued: number | null = null;
  for (let i = 2; i <= WORKERS; i++) {
    const text = await readFile(path.join(out, 'workers', `w${i}.log`), 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      const taken = line.includes('"taken_over"');
      if (!taken && !line.includes('"event":"stalled"')) continue;
      const at = Date.parse(String((JSON.parse(line) as { time?: string }).time));
      if (!Number.isFinite(at)) continue;
      if (taken) last = Math.max(last ?? 0, at);
      else queued = Math.max(queued ?? 0, at);
    }
  }
  let polled: number | null = null;
  for (const r of sandbox.stats.requests) {
    const id = r.path.startsWith('/v1/jobs/') ? r.path.slice('/v1/jobs/'.length) : undefined;
    if (id && r.at > killedAt && victims.has(id)) {
      polled = (r.at - killedAt) / 1000;
      break;
    }
  }
  const since = (at: number | null) => (at === null ? null : (at - killedAtWall) / 1000);
  return { queued: since(queued), taken: since(last), polled };
}

/** The CLI (from source, under tsx) as a child, its stdout ignored and its stderr passed through. */
function cli(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), path.join(ROOT, 'src', 'bin.ts'), ...args],
    {
      env,
      stdio: ['ignore', 'ignore', 'ignore'],
    },
  );
}

/** Waits for a child; rejects on a non-zero exit unless it was `killed`. */
async function exited(child: ChildProcess, killed = false): Promise<void> {
  const [code] = (
    child.exitCode !== null || child.signalCode !== null ? [child.exitCode] : await once(child, 'exit')
  ) as [number | null];
  if (!killed && code !== 0) throw new Error(`kitchen-batch child exited with ${code}`);
}
