/**
 * The result review (issue 15), two measures in one run:
 *
 * 1. Acceptance: a sandbox run of `BENCH_REVIEW_ITEMS` (default 240) distinct kitchens with 10 % bad
 *    results of each of the six kinds injected (the sandbox picks 60 % of the jobs and one kind for
 *    each): the share of each kind flagged with its reason, and the share of good results flagged.
 *    Once at each of {@link SIZES}: their results are decoded by sharp (480×360) and in the review's
 *    process (240×180: `src/review/decode.ts`), and the verdicts must hold on either path.
 * 2. Cost where runs spend their time, on a service that takes its time (jobs 1.5 ± 0.5 s,
 *    concurrency 16, 300 items): the wall time with the review (the default) beside `--no-review`.
 *    The instant-service cost at 10,200 items is in the `scale` section.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type RunOptions, runBatch } from '../src/pipeline/run.js';
import { type BadResult, type SandboxOptions, startSandbox } from '../src/sandbox/index.js';
import type { Report } from '../src/types.js';
import { EXPECTED_FLAG as EXPECTED } from '../test/support/bad-result-flags.js';
import { kitchenJpeg } from '../test/support/images.js';
import { fmt, printTable, tempDir, verdict } from './util.js';

const KINDS = Object.keys(EXPECTED) as BadResult[];

/** The kitchens' sizes the acceptance runs at: one over the review's small-JPEG limit, one under. */
const SIZES: ReadonlyArray<readonly [number, number]> = [
  [480, 360],
  [240, 180],
];

export async function benchReview(): Promise<void> {
  const items = Number(process.env.BENCH_REVIEW_ITEMS ?? 240);
  if (!Number.isInteger(items) || items < 20) throw new Error('BENCH_REVIEW_ITEMS: a whole number ≥ 20');
  const { dir, cleanup } = await tempDir('kb-bench-review-');
  try {
    const acceptance: string[][] = [];
    for (const [width, height] of SIZES)
      acceptance.push(...(await measureAcceptance(dir, items, width, height)));
    const cost = await measureCost(dir, 300);
    printTable(['target', 'ours', 'verdict'], [...acceptance, ...cost]);
  } finally {
    await cleanup();
  }
}

/** Writes `n` distinct kitchens (one style each) and a manifest; returns the manifest's path. */
async function catalogue(dir: string, name: string, n: number, seed: number, [width, height] = SIZES[0]!) {
  const images = path.join(dir, name);
  await mkdir(images, { recursive: true });
  const rows = ['id,image,style'];
  for (let i = 0; i < n; i++) {
    await writeFile(path.join(images, `k${i}.jpg`), await kitchenJpeg(seed + i, width, height));
    rows.push(`k${i},${name}/k${i}.jpg,${['scandinavian', 'industrial', 'japandi', 'modern'][i % 4]}`);
  }
  const manifest = path.join(dir, `${name}.csv`);
  await writeFile(manifest, `${rows.join('\n')}\n`);
  return manifest;
}

/** One run through a fresh sandbox; its seconds, its report and what the sandbox handed out. */
async function measureRun(
  manifest: string,
  out: string,
  sandboxOptions: SandboxOptions,
  extra: Partial<RunOptions> = {},
) {
  const sandbox = await startSandbox({ apiKey: 'bench-key', ...sandboxOptions });
  try {
    const started = performance.now();
    await runBatch({
      manifest,
      out,
      cwd: path.dirname(manifest),
      service: { baseUrl: sandbox.url, apiKey: 'bench-key' },
      limits: { concurrency: 16 },
      output: { html: false },
      ...extra,
    });
    const seconds = (performance.now() - started) / 1000;
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
    return { seconds, report, bad: new Map(sandbox.stats.badResults) };
  } finally {
    await sandbox.close();
  }
}

async function measureAcceptance(dir: string, items: number, width: number, height: number) {
  const name = `acceptance-${width}`;
  const manifest = await catalogue(dir, name, items, 1000, [width, height]);
  const { seconds, report, bad } = await measureRun(manifest, path.join(dir, `out-${name}`), {
    processingMs: 50,
    jitterMs: 20,
    seed: 15,
    faults: { badResultRate: 0.6, badResults: KINDS },
  });
  const rows: string[][] = [];
  const perKind = KINDS.map((kind) => ({ kind, n: 0, flagged: 0, missed: [] as string[] }));
  let good = 0;
  const falseAlarms: string[] = [];
  for (const item of report.items) {
    const kind = item.job_id ? bad.get(item.job_id) : undefined;
    const flags = item.review?.flags ?? [];
    if (!kind) {
      good++;
      if (flags.length > 0) falseAlarms.push(`${item.id} ${flags.join('+')} (${item.review?.score})`);
      continue;
    }
    const entry = perKind.find((k) => k.kind === kind)!;
    entry.n++;
    if (flags.includes(EXPECTED[kind])) entry.flagged++;
    else entry.missed.push(`${item.id} ${JSON.stringify(item.review)}`);
  }
  const badTotal = perKind.reduce((sum, k) => sum + k.n, 0);
  const flaggedTotal = perKind.reduce((sum, k) => sum + k.flagged, 0);
  console.log(
    `${items} items (${items} distinct ${width}×${height} kitchens), ${badTotal} bad results injected, ${good} good; ` +
      `run ${fmt(seconds)} s, ${report.run.totals.needs_review} need review`,
  );
  printTable(
    ['kind', 'injected', 'flagged with its reason', 'share'],
    [
      ...perKind.map((k) => [
        `${k.kind} → ${EXPECTED[k.kind]}`,
        String(k.n),
        String(k.flagged),
        `${fmt((100 * k.flagged) / Math.max(1, k.n), 1)} %`,
      ]),
      [
        'good results (no flag expected)',
        String(good),
        `${falseAlarms.length} flagged`,
        `${fmt((100 * falseAlarms.length) / Math.max(1, good), 1)} %`,
      ],
    ],
  );
  for (const k of perKind) for (const line of k.missed) console.log(`  missed ${k.kind}: ${line}`);
  for (const line of falseAlarms) console.log(`  false alarm: ${line}`);
  const badShare = flaggedTotal / Math.max(1, badTotal);
  const goodShare = falseAlarms.length / Math.max(1, good);
  rows.push(
    [
      `${width}×${height}: ≥ 95 % of ${badTotal} bad results flagged with their reason`,
      `${fmt(100 * badShare, 1)} %`,
      verdict(badShare >= 0.95),
    ],
    [
      `${width}×${height}: ≤ 3 % of ${good} good results flagged`,
      `${fmt(100 * goodShare, 1)} %`,
      verdict(goodShare <= 0.03),
    ],
  );
  return rows;
}

async function measureCost(dir: string, items: number): Promise<string[][]> {
  const manifest = await catalogue(dir, 'cost', items, 5000);
  const service: SandboxOptions = { processingMs: 1500, jitterMs: 500, seed: 3 };
  const plain = await measureRun(manifest, path.join(dir, 'out-plain'), service, {
    review: { enabled: false },
  });
  const reviewed = await measureRun(manifest, path.join(dir, 'out-reviewed'), service);
  const cost = reviewed.seconds / plain.seconds - 1;
  console.log(
    `${items} items on a service with 1.5 ± 0.5 s jobs, concurrency 16: --no-review ${fmt(plain.seconds)} s, ` +
      `with the review (the default) ${fmt(reviewed.seconds)} s (${reviewed.report.run.totals.needs_review} flagged)`,
  );
  return [
    [
      `${items} items, jobs of 1.5 s: the review adds ≤ 10 % wall time`,
      `${fmt(100 * cost, 1)} %`,
      verdict(cost <= 0.1),
    ],
  ];
}
