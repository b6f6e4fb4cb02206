/** Scenario [4] of the engine bench (issue 12): four `--shard` processes on one key, and one process on the same work. */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { inShard } from '../../src/pipeline/shard.js';
import { countRequests, fmt, mean, printTable } from '../util.js';
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
import {
  attribute,
  type KeyRun,
  type ProcessShare,
  printKeyRuns,
  runProcess,
  SHARED,
  sharedMaxRate,
} from './key-runs.js';
import { withSandbox } from './measure.js';

/** Runs scenario [4]. */
export async function sharedKeyScenario({ dir, manifest }: EngineWork): Promise<ScenarioResult> {
  const { jobs, processes, ...service } = SHARED;
  // Ids picked so every shard has the same work: the shares then compare like with like. `--shard`
  // splits by item id, and a row with a style expands to the item `<id>__<style>`.
  const lines = (await readFile(manifest, 'utf8')).split('\n').filter(Boolean);
  const perShard = jobs / processes;
  const counts = new Array<number>(processes).fill(0);
  const rows: string[] = [];
  for (let n = 0; rows.length < jobs; n++) {
    const id = `s${String(n).padStart(4, '0')}`;
    const line = JSON.parse(lines[rows.length % lines.length] as string) as Record<string, unknown>;
    const itemId = typeof line.style === 'string' ? `${id}__${line.style}` : id;
    const k = counts.findIndex((_, i) => inShard(itemId, { index: i + 1, count: processes }));
    if ((counts[k] ?? perShard) >= perShard) continue;
    counts[k] = (counts[k] ?? 0) + 1;
    rows.push(JSON.stringify({ ...line, id }));
  }
  const sharedManifest = path.join(dir, 'shared.jsonl');
  await writeFile(sharedManifest, `${rows.join('\n')}\n`);
  const options = limitedSandbox(service);
  const idealFor = (count: number) => idealBound({ jobs, concurrency: CONCURRENCY * count, ...service });
  const ideal = idealFor(processes);
  console.log(
    `\n[4] one key, ${processes} processes (--shard k/${processes}, ${perShard} items each, concurrency ${CONCURRENCY} each): ` +
      `${jobs} jobs, ${describeService(service)}; then one process on the same work`,
  );
  const maxRate = sharedMaxRate();
  const runs: Array<KeyRun & { shares: ProcessShare[] }> = [];
  for (const count of [processes, 1]) {
    const split = count > 1 && maxRate !== null ? ['--max-rate', String(maxRate)] : [];
    const name =
      count === 1
        ? 'ours, 1 process'
        : `ours, ${count} processes${split.length > 0 ? ` (--max-rate ${maxRate})` : ''}`;
    const measured = await withSandbox(options, async (sandbox) => {
      const started = performance.now();
      const shares = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          runProcess(
            sandbox,
            sharedManifest,
            path.join(dir, `out-shared-${count}-${i + 1}`),
            count === 1 ? null : `${i + 1}/${count}`,
            split,
          ),
        ),
      );
      const seconds = (performance.now() - started) / 1000;
      const api = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
      const span = api.length > 1 ? (api[api.length - 1]!.at - api[0]!.at) / 1000 : 0;
      attribute(shares, sandbox);
      const bound = idealFor(count).seconds;
      const ok = shares.reduce((n, s) => n + s.succeeded, 0);
      return { name, ideal: bound, shares, seconds, counts: countRequests(sandbox.stats.requests), span, ok };
    });
    runs.push(measured);
  }
  const { used, share429 } = printKeyRuns(runs, jobs, service.rps);
  const four = runs[0]!;
  const meanRate = mean(four.shares.map((s) => s.rate));
  printTable(
    ['process', 'jobs', 'accepted requests', '429s', 'req/s while active', '÷ mean', 'exit'],
    four.shares.map((s) => [
      s.label,
      String(s.succeeded),
      String(s.accepted),
      String(s.rateLimited),
      fmt(s.rate, 2),
      `${fmt(s.rate / meanRate, 2)}×`,
      String(s.exitCode),
    ]),
  );
  const spread = Math.max(...four.shares.map((s) => Math.abs(s.rate / meanRate - 1)));
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
    target('each share within 20% of the mean', 100 * spread, `±${fmt(100 * spread, 0)}%`, spread <= 0.2),
  ];
  printTargets('target (issue 12)', targets);
  const one = idealFor(1);
  console.log(
    `  ideal = max(slot bound, rate bound): ${processes} processes max(${fmt(ideal.slotBound)}, ${fmt(ideal.rateBound)}) s, ` +
      `1 process max(${fmt(one.slotBound)}, ${fmt(one.rateBound)}) s (its ${CONCURRENCY} slots bind); ` +
      'key rate used = accepted API requests / (last − first API request) / the limit',
  );
  return {
    scenario: 'shared-key',
    number: 4,
    title: `one key, ${processes} processes (--shard), ${jobs} jobs, ${describeService(service)}`,
    skipped: null,
    figures: {
      jobs,
      runs: runs.map(({ shares, ...run }) => ({
        ...run,
        used: used(run),
        share429: share429(run),
        shares: shares.map(({ jobIds, ...share }) => share),
      })),
    },
    targets,
  };
}
