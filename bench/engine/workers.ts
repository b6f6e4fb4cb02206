/** Scenario [5] of the engine bench (issue 13): four workers on one Redis and one rate, beside one `run`. */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Report } from '../../src/types.js';
import { HAS_REDIS, startRedis } from '../../test/support/redis.js';
import { countRequests, fmt } from '../util.js';
import {
  CONCURRENCY,
  describeService,
  type EngineWork,
  idealBound,
  limitedSandbox,
  printTargets,
  type ScenarioResult,
  target,
} from './common.js';
import { cliChild, type KeyRun, printKeyRuns, SHARED } from './key-runs.js';
import { withSandbox } from './measure.js';

/** The worker mode (issue 13) on the shared-key work: four workers on one Redis and one rate, beside one `run`. */
export async function workersScenario({ dir, manifest }: EngineWork): Promise<ScenarioResult> {
  const { jobs, processes, ...service } = SHARED;
  const title = `one key, worker mode: ${processes} workers on one Redis, ${jobs} jobs, ${describeService(service)}`;
  if (!HAS_REDIS) {
    const skipped = 'redis-server is not installed (apt-get install redis-server)';
    console.log(`\n[5] skipped: ${skipped}`);
    return { scenario: 'workers', number: 5, title, skipped, figures: {}, targets: [] };
  }
  const lines = (await readFile(manifest, 'utf8')).split('\n').filter(Boolean);
  const rows = Array.from({ length: jobs }, (_, n) => {
    const line = JSON.parse(lines[n % lines.length] as string) as Record<string, unknown>;
    return JSON.stringify({ ...line, id: `w${String(n).padStart(4, '0')}` });
  });
  const workManifest = path.join(dir, 'workers.jsonl');
  await writeFile(workManifest, `${rows.join('\n')}\n`);
  console.log(
    `\n[5] one key, worker mode: ${processes} \`worker --until-drained --concurrency ${CONCURRENCY}\` processes on one Redis, ` +
      `${jobs} jobs, ${describeService(service)}; then one \`run\` process on the same work`,
  );
  const results: KeyRun[] = [];
  for (const count of [processes, 1]) {
    const redis = count > 1 ? await startRedis() : null;
    try {
      const measured = await withSandbox(limitedSandbox(service), async (sandbox) => {
        const env = {
          PATH: process.env.PATH ?? '',
          KITCHEN_API_KEY: sandbox.apiKey ?? 'bench-key',
          KITCHEN_API_BASE_URL: sandbox.url,
        };
        const out = path.join(dir, `out-workers-${count}`);
        let items = '';
        let ok: number;
        const started = performance.now();
        if (redis) {
          await cliChild(['enqueue', workManifest, '--redis', redis.url, '--out', out], env);
          const summaries = await Promise.all(
            Array.from({ length: count }, (_, i) =>
              cliChild(
                [
                  'worker',
                  '--redis',
                  redis.url,
                  '--until-drained',
                  '--concurrency',
                  String(CONCURRENCY),
                  '--name',
                  `w${i + 1}`,
                  '--json',
                ],
                env,
              ),
            ),
          );
          const done = summaries.map(
            (text) => (JSON.parse(text) as { counts: { succeeded: number } }).counts.succeeded,
          );
          items = done.join('/');
          ok = done.reduce((a, b) => a + b, 0);
        } else {
          await cliChild(
            ['run', workManifest, '--out', out, '--concurrency', String(CONCURRENCY), '--no-progress'],
            env,
          );
          const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
          ok = report.run.totals.succeeded;
        }
        const seconds = (performance.now() - started) / 1000;
        const api = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
        const span = api.length > 1 ? (api[api.length - 1]!.at - api[0]!.at) / 1000 : 0;
        const ideal = idealBound({ jobs, concurrency: CONCURRENCY * count, ...service }).seconds;
        const name = redis ? `ours, ${count} workers` : 'ours, 1 run process';
        return { name, ideal, span, seconds, counts: countRequests(sandbox.stats.requests), ok, items };
      });
      results.push(measured);
    } finally {
      await redis?.stop();
    }
  }
  const { used, share429 } = printKeyRuns(results, jobs, service.rps);
  const four = results[0]!;
  const targets = [
    target(
      '≤ 3% of API requests answered 429',
      share429(four),
      `${fmt(share429(four), 1)}%`,
      share429(four) <= 3,
    ),
    target(
      "≥ 85% of the key's rate used",
      100 * used(four),
      `${fmt(100 * used(four), 0)}%`,
      used(four) >= 0.85,
    ),
    target('every item succeeded once', four.ok, `${four.ok}/${jobs}`, four.ok === jobs),
  ];
  printTargets('target (issue 13)', targets);
  console.log('  wall s includes enqueue (reads every image once) and the processes starting under tsx');
  return {
    scenario: 'workers',
    number: 5,
    title,
    skipped: null,
    figures: { jobs, runs: results.map((run) => ({ ...run, used: used(run), share429: share429(run) })) },
    targets,
  };
}
