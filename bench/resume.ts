/**
 * Resume benchmark (issue 5): the rerun of a finished run must take seconds and send no request to
 * the job endpoints.
 *
 * The finished state is made by a real cold run: a JSONL manifest of N items (distinct ids) over 20
 * small drawn kitchens, run through `runBatch` against a sandbox with instant processing and no rate
 * limit. The same command then runs again on the same output folder; its wall time and the requests
 * the sandbox saw (`/v1/modules`, `/v1/jobs` must be 0) are printed beside the cold figures.
 *
 * N defaults to {@link DEFAULT_ITEMS}, the size; `BENCH_RESUME_ITEMS=2000` makes a quicker run.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runBatch } from '../src/pipeline/run.js';
import { startSandbox } from '../src/sandbox/index.js';
import {
  countRequests,
  fmt,
  printTable,
  type RequestCounts,
  tempDir,
  timed,
  verdict,
  writeKitchens,
} from './util.js';

/** Items of the cold run: a cold run at instant processing goes at ~65 items/s on 2 cores. */
const DEFAULT_ITEMS = 10_000;
const SOURCES = 20;
/** Jobs in flight in the cold run: the 2 s poll floor caps throughput at concurrency / 2 s. */
const COLD_CONCURRENCY = 256;
/**
 * The cold run only builds the finished state, against a sandbox without a rate limit, so the rate
 * governor starts high instead of creeping up from its default 8 req/s by 0.5 req/s per second
 * (with the default it took 113 s instead of ~65 s for 2,000 items on 2 cores). The rerun uses the
 * same options; it sends no job requests, so the governor does not matter there.
 */
const COLD_GOVERNOR = { initialRate: 200 } as const;
const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal', 'minimalist'];

/** One run's figures. */
interface RunFigures {
  seconds: number;
  counts: RequestCounts;
  succeeded: number;
  skipped: number;
  exitCode: number;
}

/** Prints the resume section. */
export async function benchResume(): Promise<void> {
  const items = Number(process.env.BENCH_RESUME_ITEMS ?? DEFAULT_ITEMS);
  if (!Number.isInteger(items) || items < 1)
    throw new Error(`BENCH_RESUME_ITEMS must be a whole number ≥ 1, got ${process.env.BENCH_RESUME_ITEMS}`);
  const { dir, cleanup } = await tempDir('kb-bench-resume-');
  const sandbox = await startSandbox({
    processingMs: 0,
    jitterMs: 0,
    queuedMs: 0,
    // Keep every job: the default (1000) forgets old jobs, whose polls would then answer 404.
    maxJobs: items + 1000,
  });
  try {
    const imageDir = path.join(dir, 'img');
    await mkdir(imageDir);
    const { files, meanBytes } = await writeKitchens(imageDir, SOURCES, {
      width: 240,
      height: 180,
      grain: 12,
      prefix: 's',
      seed: 7,
    });
    const manifest = path.join(dir, 'nightly.jsonl');
    const lines: string[] = [];
    for (let i = 0; i < items; i++) {
      const image = path.relative(dir, files[i % files.length] as string);
      lines.push(
        JSON.stringify({ id: `r${String(i).padStart(5, '0')}`, image, style: STYLES[i % STYLES.length] }),
      );
    }
    await writeFile(manifest, `${lines.join('\n')}\n`);
    const out = path.join(dir, 'out');
    console.log(
      `${items.toLocaleString('en-US')} items (JSONL, distinct ids) over ${SOURCES} drawn kitchens of ~${fmt(meanBytes / 1024, 0)} KiB; ` +
        `sandbox: processing 0 s, no rate limit; runBatch at concurrency ${COLD_CONCURRENCY}, governor initialRate ${COLD_GOVERNOR.initialRate} req/s` +
        (items < 10_000 ? `\n  (${items} items, not the issue's 10,000: BENCH_RESUME_ITEMS is set)` : ''),
    );

    const run = async (): Promise<RunFigures> => {
      sandbox.reset();
      let skipped = 0;
      const { seconds, value } = await timed(() =>
        runBatch({
          manifest,
          out,
          cwd: dir,
          service: { baseUrl: sandbox.url, apiKey: sandbox.apiKey ?? 'bench-key', governor: COLD_GOVERNOR },
          limits: { concurrency: COLD_CONCURRENCY },
          output: { html: false },
          onEvent: (event) => {
            if (event.type === 'item' && event.status === 'skipped') skipped++;
          },
        }),
      );
      return {
        seconds,
        counts: countRequests(sandbox.stats.requests),
        succeeded: value.run.totals.succeeded,
        skipped,
        exitCode: value.exitCode,
      };
    };
    const cold = await run();
    const warm = await run();
    const row = (name: string, f: RunFigures): string[] => [
      name,
      fmt(f.seconds, 2),
      fmt(items / f.seconds, 0),
      String(f.counts.creates),
      String(f.counts.polls),
      String(f.counts.styles),
      String(f.counts.storage),
      `${f.succeeded}/${items}`,
      String(f.skipped),
      String(f.exitCode),
    ];
    printTable(
      [
        'run',
        'wall s',
        'items/s',
        '/v1/modules',
        '/v1/jobs',
        '/v1/styles',
        'downloads',
        'succeeded',
        'skipped',
        'exit',
      ],
      [row('cold (real jobs)', cold), row('rerun (finished)', warm)],
    );
    const jobRequests = warm.counts.creates + warm.counts.polls;
    printTable(
      ['target', 'figure', 'verdict'],
      [
        [
          'rerun sends 0 requests to /v1/modules and /v1/jobs',
          String(jobRequests),
          verdict(jobRequests === 0),
        ],
        ['rerun takes seconds (≤ 10 s)', `${fmt(warm.seconds, 2)} s`, verdict(warm.seconds <= 10)],
        ['rerun skips every item', `${warm.skipped}/${items}`, verdict(warm.skipped === items)],
      ],
    );
  } finally {
    await sandbox.close();
    await cleanup();
  }
}
