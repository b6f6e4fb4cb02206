/** Scenario [3] of the engine bench (issue 12): the request budget, not the slots, bounds the run. */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fmt, printTable } from '../util.js';
import {
  CONCURRENCY,
  describeService,
  type EngineWork,
  idealBound,
  limitedSandbox,
  type Measured,
  printTargets,
  type ScenarioResult,
  target,
} from './common.js';
import { measureNaive, measureOurs } from './measure.js';

/** The request-budget-bound scenario of issue 12: the rate limit, not the slots, bounds the run. */
const BUDGET = { jobs: 60, processingMs: 4000, jitterMs: 1000, queuedMs: 250, rps: 5, burst: 5 } as const;

/** Runs scenario [3]. */
export async function budgetScenario({ dir, manifest, naiveItems }: EngineWork): Promise<ScenarioResult> {
  const { jobs, ...service } = BUDGET;
  const lines = (await readFile(manifest, 'utf8')).split('\n').filter(Boolean).slice(0, jobs);
  const budgetManifest = path.join(dir, 'budget.jsonl');
  await writeFile(budgetManifest, `${lines.join('\n')}\n`);
  const options = limitedSandbox(service);
  const ideal = idealBound({ jobs, concurrency: CONCURRENCY, ...service });
  // The bound issue 12 states for this scenario, max(2N/R, N·T/C): its target is relative to it.
  // The table's ideal is tighter by the key's burst (the first `burst` requests cost no time).
  const issueBound = Math.max(
    (2 * jobs) / service.rps,
    (jobs * (service.processingMs + service.queuedMs)) / 1000 / CONCURRENCY,
  );
  console.log(`\n[3] request budget: ${jobs} jobs, ${describeService(service)}, concurrency ${CONCURRENCY}`);
  const ours = await measureOurs(
    options,
    budgetManifest,
    path.join(dir, 'out-ours-budget'),
    service.queuedMs,
  );
  const naive = await measureNaive(
    options,
    naiveItems.slice(0, jobs),
    path.join(dir, 'out-naive-budget'),
    service.queuedMs,
  );
  const share = (m: Measured) => (100 * m.counts.rateLimited) / Math.max(1, m.counts.service);
  const row = (name: string, m: Measured): string[] => [
    name,
    fmt(m.seconds),
    `${fmt(m.seconds / ideal.seconds, 2)}×`,
    fmt(m.counts.service / jobs, 2),
    fmt(m.counts.polls / jobs, 2),
    `${fmt(share(m), 1)}%`,
    `${m.succeeded}/${jobs}`,
  ];
  printTable(
    ['client', 'makespan s', '× ideal', 'API req/job', 'polls/job', '429 %', 'ok'],
    [
      ['ideal bound', fmt(ideal.seconds), '1.00×', '2.00', '1.00', '0.0%', '-'],
      row('ours (runBatch)', ours),
      row('naive (fetch)', naive),
    ],
  );
  console.log(
    `  ideal = max(slot bound ${fmt(ideal.slotBound)} s, rate bound (2 × ${jobs} − ${service.burst}) / ${service.rps} = ${fmt(ideal.rateBound)} s)\n` +
      `  issue 12's ideal = max(2N/R, N·T/C) = max(2 × ${jobs} / ${service.rps}, ${jobs} × ${fmt((service.processingMs + service.queuedMs) / 1000, 2)} s / ${CONCURRENCY}) = ${fmt(issueBound)} s (no burst): ours ${fmt(ours.seconds / issueBound, 2)}× of it`,
  );
  const targets = [
    target(
      `ours ≤ 1.20× the issue's ideal (${fmt(issueBound)} s)`,
      ours.seconds / issueBound,
      `${fmt(ours.seconds / issueBound, 2)}×`,
      ours.seconds <= 1.2 * issueBound,
    ),
    target(
      `(ours ≤ 1.20× the table's ideal, ${fmt(ideal.seconds)} s, for reference)`,
      ours.seconds / ideal.seconds,
      `${fmt(ours.seconds / ideal.seconds, 2)}×`,
      ours.seconds <= 1.2 * ideal.seconds,
    ),
    target('≤ 1.5% of API requests answered 429', share(ours), `${fmt(share(ours), 1)}%`, share(ours) <= 1.5),
    target(
      '≤ 2.2 API requests per item',
      ours.counts.service / jobs,
      fmt(ours.counts.service / jobs, 2),
      ours.counts.service / jobs <= 2.2,
    ),
  ];
  printTargets('target (issue 12)', targets);
  return {
    scenario: 'budget',
    number: 3,
    title: `request budget: ${jobs} jobs, ${describeService(service)}`,
    skipped: null,
    figures: { jobs, ideal, issueBound, ours, naive },
    targets,
  };
}
