/**
 * Engine benchmark: our `runBatch` beside a naive fetch client (bench/naive.ts) and the ideal bound,
 * each against a fresh in-process sandbox with the same settings, in one process run. One file per
 * scenario beside this one (rate-limited, overhead, budget, shared-key, workers), each returning a
 * machine-readable {@link ScenarioResult} (`npm run bench -- engine --json`; one scenario:
 * `npm run bench -- engine:budget` or `engine:3`).
 *
 * Scenario (issue 4): 200 jobs of ~100 KB drawn kitchens, processing 4 ± 1 s, rate limit 10 req/s
 * with a burst of 10 (429 + Retry-After in seconds), concurrency 16. Then a client-overhead
 * scenario: no rate limit, instant processing, the same 200 images, concurrency 16. Then the
 * request-budget scenario of issue 12: 60 jobs, 5 req/s with a burst of 5, 4 ± 1 s plus 250 ms
 * queued, concurrency 16: the rate limit, not the slots, bounds it. Then one key shared by four
 * `--shard` CLI processes (child processes, 30 items each, 8 req/s burst 8), and one process on the
 * same work: 429 share, the key's rate used, and each process's share (counted from the sandbox's
 * request log by job id). Then the worker mode of issue 13 on the same work: `enqueue`, four `worker
--until-drained` CLI processes sharing one Redis (redis-server on a free port) and one rate, beside
one `run` process. `BENCH_ENGINE_SCENARIOS=3,4` runs only those scenarios (default 1,2,3,4,5);
 * `BENCH_KEEP=1` keeps the temporary folder (run.log of each process). To see how shares behave
 * over a longer run, or with the key split by hand: `BENCH_SHARED_JOBS=600` (the work of scenarios
 * [4] and [5]; default 120, a multiple of 4) and `BENCH_SHARED_MAX_RATE=2` (each of scenario [4]'s
 * four processes gets `--max-rate 2`; its one-process run keeps the whole key).
 *
 * The ideal bound (see `idealBound` in common.ts) is what a perfect client could do with these settings:
 * every job slot busy from submit to the job's end, one poll landing exactly at the end, and the
 * service's token bucket never overrun. Beside it, the achievable bound adds the least mean delay
 * any client obeying the contract's 2 s poll floor needs to notice a job whose end it cannot know.
 */ import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { NaiveItem } from '../naive.js';
import { fmt, tempDir, writeKitchens } from '../util.js';
import { budgetScenario } from './budget.js';
import { CONCURRENCY, type EngineWork, JOBS, type ScenarioResult, STYLES } from './common.js';
import { overheadScenario } from './overhead.js';
import { rateLimitedScenario } from './rate-limited.js';
import { sharedKeyScenario } from './shared-key.js';
import { workersScenario } from './workers.js';

export type { ScenarioResult, TargetResult } from './common.js';

/** The scenarios in the order they run: number, name, and what runs it. */
export const SCENARIOS: ReadonlyArray<{
  number: number;
  name: string;
  run: (work: EngineWork) => Promise<ScenarioResult>;
}> = [
  { number: 1, name: 'rate-limited', run: rateLimitedScenario },
  { number: 2, name: 'overhead', run: overheadScenario },
  { number: 3, name: 'budget', run: budgetScenario },
  { number: 4, name: 'shared-key', run: sharedKeyScenario },
  { number: 5, name: 'workers', run: workersScenario },
];

/**
 * Prints the engine section and returns each scenario's result. `only`: scenarios by name or
 * number (default: `BENCH_ENGINE_SCENARIOS`, else all).
 */
export async function benchEngine(only: readonly string[] = []): Promise<ScenarioResult[]> {
  const wanted =
    only.length > 0
      ? only
      : (process.env.BENCH_ENGINE_SCENARIOS ?? '1,2,3,4,5').split(',').map((x) => x.trim());
  const chosen = SCENARIOS.filter((s) => wanted.includes(String(s.number)) || wanted.includes(s.name));
  const unknown = wanted.filter((w) => !SCENARIOS.some((s) => String(s.number) === w || s.name === w));
  if (unknown.length > 0) {
    const names = SCENARIOS.map((s) => `${s.number} ${s.name}`).join(', ');
    throw new Error(`unknown engine scenario: ${unknown.join(', ')}; scenarios are ${names}`);
  }
  const results: ScenarioResult[] = [];
  const { dir, cleanup } = await tempDir('kb-bench-engine-');
  try {
    const imageDir = path.join(dir, 'img');
    await mkdir(imageDir);
    const { files, meanBytes } = await writeKitchens(imageDir, JOBS);
    const manifest = path.join(dir, 'engine.jsonl');
    const naiveItems: NaiveItem[] = files.map((file, i) => ({
      id: `k${String(i).padStart(4, '0')}`,
      file,
      style: STYLES[i % STYLES.length] as string,
    }));
    await writeFile(
      manifest,
      `${naiveItems.map((it) => JSON.stringify({ id: it.id, image: path.relative(dir, it.file), style: it.style })).join('\n')}\n`,
    );
    console.log(
      `${JOBS} jobs, ${JOBS} distinct drawn kitchens (mean ${fmt(meanBytes / 1024, 0)} KiB JPEG), concurrency ${CONCURRENCY}, ` +
        'each client against a fresh sandbox',
    );

    for (const scenario of chosen) results.push(await scenario.run({ dir, manifest, naiveItems, meanBytes }));
  } finally {
    if (process.env.BENCH_KEEP) console.log(`kept ${dir}`);
    else await cleanup();
  }
  return results;
}
