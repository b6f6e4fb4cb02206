/**
 * `npm run bench [-- section ...] [--json]`: runs the benchmark sections in order, each under a
 * heading, and ends with how long each took. Naming sections (`npm run bench -- engine resume`) runs
 * only those; `section:part` runs part of one (`engine:budget`, `engine:3`: one engine scenario).
 * With `--json` the tables go to stderr and stdout gets one JSON document: each section's wall time,
 * outcome and result (the engine's: a result per scenario with its figures and targets).
 */
import { IMAGE_ENV } from './cli-run.js';
import { benchEngine } from './engine/index.js';
import { benchManifest } from './manifest.js';
import { benchPreflight } from './preflight.js';
import { benchResume } from './resume.js';
import { benchReview } from './review.js';
import { benchS3Out } from './s3-out.js';
import { benchScale } from './scale.js';
import { benchSources } from './sources.js';
import { benchTakeover } from './takeover.js';
import { fmt, printTable } from './util.js';

/** A section: `run` gets the parts named on the command line and returns its machine-readable result, if any. */
const SECTIONS: ReadonlyArray<{ name: string; title: string; run: (parts: string[]) => Promise<unknown> }> = [
  { name: 'manifest', title: 'Manifest: reading a 100,000-row CSV', run: benchManifest },
  { name: 'preflight', title: 'Preflight: sharp throughput against raw sharp', run: benchPreflight },
  { name: 'engine', title: 'Engine: runBatch vs a naive client vs the ideal bound', run: benchEngine },
  { name: 'resume', title: 'Resume: rerun of a finished run', run: benchResume },
  { name: 'review', title: 'Result review: bad results flagged, and what it costs', run: benchReview },
  {
    name: 'sources',
    title: 'Remote sources: http and S3 on loopback vs local files, and the rerun',
    run: benchSources,
  },
  {
    name: 's3-out',
    title: 'Outputs in object storage: --out s3:// on loopback vs a local folder, and the rerun',
    run: benchS3Out,
  },
  {
    name: 'scale',
    title: 'Catalogue scale: memory, throughput and tail vs a minimal client',
    run: benchScale,
  },
  {
    name: 'takeover',
    title: 'Worker takeover: one of four workers killed -9 mid-run vs the ideal 2N/R',
    run: benchTakeover,
  },
];

async function main(argv: readonly string[]): Promise<number> {
  const args = argv.filter((arg) => arg !== '--');
  const json = args.includes('--json');
  const named = args.filter((arg) => arg !== '--json');
  // `engine:budget` names the section and one of its parts.
  const wanted = [...new Set(named.map((arg) => arg.split(':')[0] ?? arg))];
  const parts = (name: string) =>
    named.filter((arg) => arg.startsWith(`${name}:`)).map((arg) => arg.slice(name.length + 1));
  const unknown = wanted.filter((name) => !SECTIONS.some((s) => s.name === name));
  if (unknown.length > 0) {
    console.error(
      `unknown bench section: ${unknown.join(', ')}; sections are ${SECTIONS.map((s) => s.name).join(', ')}`,
    );
    return 2;
  }
  // The human output stays as it is, on stderr when stdout carries the JSON.
  const log = console.log;
  if (json) console.log = console.error;
  const chosen = wanted.length === 0 ? SECTIONS : SECTIONS.filter((s) => wanted.includes(s.name));
  const timings: string[][] = [];
  const results: Array<{ section: string; wall_s: number; outcome: string; result: unknown }> = [];
  let failed = false;
  const imageEnv = Object.entries(IMAGE_ENV).map(([name, value]) => `${name}=${value}`);
  console.log(`Node ${process.version}; the CLI runs with the container image's ${imageEnv.join(' ')}`);
  for (const section of chosen) {
    console.log(`\n=== ${section.name}: ${section.title} ===`);
    const started = performance.now();
    let outcome = 'done';
    let result: unknown = null;
    try {
      result = (await section.run(parts(section.name))) ?? null;
    } catch (error) {
      failed = true;
      outcome = 'FAILED';
      console.error(`section ${section.name} failed:`, error);
    }
    const wallS = (performance.now() - started) / 1000;
    timings.push([section.name, fmt(wallS), outcome]);
    results.push({ section: section.name, wall_s: wallS, outcome, result });
  }
  console.log('\n=== bench sections ===');
  printTable(['section', 'wall s', 'outcome'], timings);
  console.log = log;
  if (json) process.stdout.write(`${JSON.stringify({ sections: results }, null, 2)}\n`);
  return failed ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
