/**
 * `npm run bench [-- section ...]`: runs the benchmark sections in order, each under a heading, and
 * ends with how long each took. Naming sections (`npm run bench -- engine resume`) runs only those.
 */
import { benchEngine } from './engine.js';
import { benchManifest } from './manifest.js';
import { benchPreflight } from './preflight.js';
import { benchResume } from './resume.js';
import { benchReview } from './review.js';
import { benchScale } from './scale.js';
import { fmt, printTable } from './util.js';

const SECTIONS: ReadonlyArray<{ name: string; title: string; run: () => Promise<void> }> = [
  { name: 'manifest', title: 'Manifest: reading a 100,000-row CSV', run: benchManifest },
  { name: 'preflight', title: 'Preflight: sharp throughput against raw sharp', run: benchPreflight },
  { name: 'engine', title: 'Engine: runBatch vs a naive client vs the ideal bound', run: benchEngine },
  { name: 'resume', title: 'Resume: rerun of a finished run', run: benchResume },
  { name: 'review', title: 'Result review: bad results flagged, and what it costs', run: benchReview },
  {
    name: 'scale',
    title: 'Catalogue scale: memory, throughput and tail vs a minimal client',
    run: benchScale,
  },
];

async function main(argv: readonly string[]): Promise<number> {
  const wanted = argv.filter((arg) => arg !== '--');
  const unknown = wanted.filter((name) => !SECTIONS.some((s) => s.name === name));
  if (unknown.length > 0) {
    console.error(
      `unknown bench section: ${unknown.join(', ')}; sections are ${SECTIONS.map((s) => s.name).join(', ')}`,
    );
    return 2;
  }
  const chosen = wanted.length === 0 ? SECTIONS : SECTIONS.filter((s) => wanted.includes(s.name));
  const timings: string[][] = [];
  let failed = false;
  for (const section of chosen) {
    console.log(`\n=== ${section.name}: ${section.title} ===`);
    const started = performance.now();
    let outcome = 'done';
    try {
      await section.run();
    } catch (error) {
      failed = true;
      outcome = 'FAILED';
      console.error(`section ${section.name} failed:`, error);
    }
    timings.push([section.name, fmt((performance.now() - started) / 1000), outcome]);
  }
  console.log('\n=== bench sections ===');
  printTable(['section', 'wall s', 'outcome'], timings);
  return failed ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
