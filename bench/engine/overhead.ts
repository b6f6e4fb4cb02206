/** Scenario [2] of the engine bench: the client's own overhead (no rate limit, instant jobs). */
import path from 'node:path';
import type { SandboxOptions } from '../../src/sandbox/index.js';
import { fmt, printTable } from '../util.js';
import {
  CONCURRENCY,
  type EngineWork,
  JOBS,
  type Measured,
  POLL_FLOOR_S,
  PRESET_RATE,
  type ScenarioResult,
} from './common.js';
import { measureNaive, measureOurs } from './measure.js';

/** Scenario (2): the client's own overhead (no limit, instant jobs). */
export async function overheadScenario({
  dir,
  manifest,
  naiveItems,
  meanBytes,
}: EngineWork): Promise<ScenarioResult> {
  const instant: SandboxOptions = { processingMs: 0, jitterMs: 0, queuedMs: 0, maxJobs: 10_000 };
  console.log(
    `\n[2] client overhead: no rate limit, processing 0 s, ${JOBS} jobs of ~${fmt(meanBytes / 1024, 0)} KiB, concurrency ${CONCURRENCY}`,
  );
  const oursFast = await measureOurs(instant, manifest, path.join(dir, 'out-ours-fast'), 0);
  const oursPreset = await measureOurs(instant, manifest, path.join(dir, 'out-ours-preset'), 0, {
    initialRate: PRESET_RATE,
  });
  const naiveFast = await measureNaive(instant, naiveItems, path.join(dir, 'out-naive-fast'), 0);
  const floorRate = CONCURRENCY / POLL_FLOOR_S;
  const fastRow = (name: string, m: Measured): string[] => [
    name,
    fmt(m.seconds, 2),
    fmt(JOBS / m.seconds, 2),
    `${fmt(JOBS / m.seconds / floorRate, 2)}×`,
    fmt(m.counts.service / JOBS, 2),
    fmt(m.counts.polls / JOBS, 2),
    fmt(m.firstPollS, 2),
    fmt((1000 * m.cpuS) / JOBS, 1),
    `${m.succeeded}/${JOBS}`,
  ];
  printTable(
    [
      'client',
      'makespan s',
      'jobs/s',
      '× floor rate',
      'req/job',
      'polls/job',
      '1st poll s',
      'CPU ms/job',
      'ok',
    ],
    [
      [
        '2 s poll floor',
        fmt(JOBS / floorRate, 2),
        fmt(floorRate, 2),
        '1.00×',
        '2.00',
        '1.00',
        '2.00',
        '-',
        '-',
      ],
      fastRow('ours (runBatch, defaults)', oursFast),
      fastRow(`ours (governor from ${PRESET_RATE}/s)`, oursPreset),
      fastRow('naive (fetch)', naiveFast),
    ],
  );
  console.log(
    `  2 s poll floor: a client that counts the 202 as the job's first contact holds even an instant job's slot\n` +
      `  ≥ 2 s: at most concurrency / 2 s = ${fmt(floorRate, 0)} jobs/s (the naive client). The contract's floor binds polls of one\n` +
      '  job, not the submission, so ours places the first poll from the creation-to-end times seen so far\n' +
      '  (at once when they end at once) and collects quick jobs quickly. Its governor starts at 8 req/s and doubles while in use until\n' +
      `  a 429; the "governor from ${PRESET_RATE}/s" row (RunOptions.governor.initialRate) separates that ramp from the\n` +
      '  per-job cost. CPU ms/job is the whole process (client + in-process sandbox rendering results with sharp).',
  );
  for (const m of [oursFast, oursPreset, naiveFast]) if (m.note) console.log(`  note: ${m.note}`);
  // No target of its own: the figures say what the client costs (jobs/s against the floor rate).
  const throughput = (m: Measured) => ({
    ...m,
    jobsPerS: JOBS / m.seconds,
    xFloorRate: JOBS / m.seconds / floorRate,
  });
  return {
    scenario: 'overhead',
    number: 2,
    title: 'client overhead: no rate limit, processing 0 s',
    skipped: null,
    figures: {
      jobs: JOBS,
      floorRate,
      ours: throughput(oursFast),
      oursPreset: throughput(oursPreset),
      naive: throughput(naiveFast),
    },
    targets: [],
  };
}
