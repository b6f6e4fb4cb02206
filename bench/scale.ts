/**
 * Catalogue scale (issue 10): the CLI's peak memory, throughput and tail on a catalogue of 10^4 to
 * 10^5 items, against a minimal client (bench/minimal.ts) in the same run; the rerun of the finished
 * catalogue; and `report` rebuilt from a synthetic journal of 10^6 items.
 *
 * The emulator runs in a process of its own (bench/emulator.ts: the sandbox with instant jobs and no
 * faults), and so does the CLI (the built `dist/bin.js`), whose RSS is sampled from /proc every
 * 100 ms. Its results are restyles of each upload (`render-once`), rendered in a warm-up run before
 * the measured ones and kept, so its own sharp work eats no CPU of the client it measures, and the
 * review sees results like a real service's: they pass it, as echo results (the upload itself,
 * all "unchanged" and five in six duplicates) did not, which put every item on report.html.
 *
 * Sizes: `BENCH_SCALE_ITEMS` (comma-separated; default 10200, about 1,700 images × 6 styles: heap
 * growth per item is reported between the first and the last size; empty skips the runs),
 * `BENCH_SCALE_REPORT_ITEMS` (default 1,000,000; 0 skips the rebuild), `BENCH_SCALE_PLAN_ROWS`
 * (`plan` over a manifest of that many rows; default 1,000,000; 0 skips it),
 * `BENCH_SCALE_REVIEW_PAIRS` (pairs of runs without and with the review whose median cost is the
 * verdict; default 5).
 */
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildDist, CONCURRENCY, measureCli, measureCommand, startEmulator } from './cli-run.js';
import { type MinimalItem, runMinimal } from './minimal.js';
import { fmt, printTable, quantile, tempDir, verdict, writeKitchens } from './util.js';

const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal'];
/** Distinct drawings; bigger catalogues copy them to more files (preflight still reads and hashes each). */
const DRAWINGS = 1700;

/** Prints the scale section. */
export async function benchScale(): Promise<void> {
  const sizes = (process.env.BENCH_SCALE_ITEMS ?? '10200').split(',').filter(Boolean).map(Number);
  const reportItems = Number(process.env.BENCH_SCALE_REPORT_ITEMS ?? 1_000_000);
  const planRows = (process.env.BENCH_SCALE_PLAN_ROWS ?? '100000,1000000')
    .split(',')
    .filter(Boolean)
    .map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 6))
    throw new Error('BENCH_SCALE_ITEMS: whole numbers ≥ 6');
  // Pairs of runs without and with the review: on a busy machine one pair says little (one review
  // costs 9 % and the next 46 %, measured; −1 % to 15 % in five pairs of one run), so the verdict
  // takes the median of the pairs' figures.
  const reviewPairs = Number(process.env.BENCH_SCALE_REVIEW_PAIRS ?? 5);
  if (!Number.isInteger(reviewPairs) || reviewPairs < 1)
    throw new Error('BENCH_SCALE_REVIEW_PAIRS: a whole number ≥ 1');
  console.log('building dist/ (the CLI runs as a child process, as users run it)');
  buildDist();
  const rows: string[][] = [];
  const peaks: Array<{ items: number; rss: number; heap: number | null }> = [];
  for (const items of sizes) {
    const { dir, cleanup } = await tempDir('kb-bench-scale-');
    const emulator = await startEmulator(items + 1000);
    try {
      const catalogue = await writeCatalogue(dir, items);
      // The warm-up: the emulator renders each result once here (see the module comment).
      const warmUp = await measureCli(dir, catalogue.warmUp, path.join(dir, 'out-warm-up'), emulator, [
        '--no-review',
      ]);
      const minimalOut = path.join(dir, 'minimal');
      await mkdir(minimalOut);
      const minimal = await runMinimal(emulator.url, catalogue.items, minimalOut, CONCURRENCY);
      await emulator.command('reset');
      const out = path.join(dir, 'out');
      // The pipeline alone (`--no-review`): the figures of issue 10, and the review's baseline.
      const cold = await measureCli(dir, catalogue.manifest, out, emulator, ['--no-review']);
      const rerun = await measureCli(dir, catalogue.manifest, out, emulator, ['--no-review']);
      // The same run as users run it, with the result review (issue 15: it may add at most 10 %).
      const reviewed = await measureCli(dir, catalogue.manifest, path.join(dir, 'out-review'), emulator);
      const costs = [reviewed.wallS / cold.wallS - 1];
      for (let pair = 2; pair <= reviewPairs; pair++) {
        const plain = await measureCli(dir, catalogue.manifest, path.join(dir, `out-${pair}`), emulator, [
          '--no-review',
        ]);
        const again = await measureCli(
          dir,
          catalogue.manifest,
          path.join(dir, `out-review-${pair}`),
          emulator,
        );
        costs.push(again.wallS / plain.wallS - 1);
        console.log(
          `  pair ${pair}: wall ${fmt(plain.wallS)} s without the review, ${fmt(again.wallS)} s with it (${costs.at(-1)! >= 0 ? '+' : ''}${fmt(100 * costs.at(-1)!, 1)} %, the review's process ${fmt(again.childrenCpuS)} s of CPU)`,
        );
      }
      // The median (of an even count, the lower middle one).
      const reviewCost = quantile(costs, 0.5);
      peaks.push({ items, rss: cold.peakRssMb, heap: cold.liveHeapMb });
      const ratio = cold.rate && minimal.rate ? cold.rate / minimal.rate : Number.NaN;
      console.log(
        `${items.toLocaleString('en-US')} items (${catalogue.images.toLocaleString('en-US')} images × ${STYLES.length} styles, ~${fmt(catalogue.meanBytes / 1024, 0)} KiB JPEGs), concurrency ${CONCURRENCY}, emulator: instant jobs, restyled results rendered in a warm-up run (${fmt(warmUp.wallS)} s, exit ${warmUp.exitCode})\n` +
          `  minimal client: ${fmt(minimal.rate, 0)} items/s (${minimal.succeeded} in ${fmt(minimal.seconds)} s)\n` +
          `  kitchen-batch: exit ${cold.exitCode}, ${cold.succeeded} succeeded, wall ${fmt(cold.wallS)} s, peak RSS ${fmt(cold.peakRssMb, 0)} MB, live heap ${fmt(cold.liveHeapMb ?? Number.NaN, 0)} MB, ` +
          `${fmt(cold.rate ?? Number.NaN, 0)} items/s = ${fmt(ratio, 2)}× minimal, exit ${fmt(cold.tailS ?? Number.NaN)} s after the last download (reports written after ${fmt(cold.reportsS ?? Number.NaN)} s); ` +
          `requests: ${cold.requests.creates} POST, ${cold.requests.polls} polls, ${cold.requests.storage} downloads; ` +
          `CPU ${fmt(cold.cpuS)} s (${fmt((1000 * cold.cpuS) / items, 2)} ms per item; the emulator ${fmt(cold.emulatorCpuS)} s)\n` +
          `  rerun of the finished run: exit ${rerun.exitCode}, ${fmt(rerun.wallS)} s, peak RSS ${fmt(rerun.peakRssMb, 0)} MB, ` +
          `${rerun.requests.creates} POST and ${rerun.requests.polls} polls\n` +
          `  the same run with the review (the default): wall ${fmt(reviewed.wallS)} s, peak RSS ${fmt(reviewed.peakRssMb, 0)} MB (the review's process by its private pages; ${fmt(reviewed.naiveRssMb, 0)} MB adding its whole RSS), ` +
          `exit ${fmt(reviewed.tailS ?? Number.NaN)} s after the last download, CPU ${fmt(reviewed.cpuS)} s (${fmt((1000 * (reviewed.cpuS - cold.cpuS)) / items, 2)} ms per item more; the review's process ${fmt(reviewed.childrenCpuS)} s of it, at the lowest priority; ${reviewed.reviewEnd?.reviewed ?? 0} reviewed, ${reviewed.reviewEnd?.sources_decoded ?? 0} sources decoded by the review itself, the others handed over by the preflight): the review adds ${fmt(100 * costs[0]!, 1)} % ` +
          `(every result reviewed against its source: ${needsReview(path.join(dir, 'out-review'))} flagged)`,
      );
      const rssTarget = items <= 20_000 ? 300 : 400;
      rows.push(
        [
          `${items} items: peak RSS ≤ ${rssTarget} MB`,
          fmt(cold.peakRssMb, 0),
          verdict(cold.peakRssMb <= rssTarget),
        ],
        [
          `${items} items with the review: peak RSS ≤ ${rssTarget} MB (the review's process's own pages included)`,
          fmt(reviewed.peakRssMb, 0),
          verdict(reviewed.peakRssMb <= rssTarget),
        ],
        [`${items} items: throughput ≥ 0.5× minimal`, `${fmt(ratio, 2)}×`, verdict(ratio >= 0.5)],
        [
          `${items} items: the review adds ≤ 10 % wall time (median of ${costs.length} pairs: ${costs.map((c) => fmt(100 * c, 1)).join(', ')} %)`,
          `${fmt(100 * reviewCost, 1)} %`,
          verdict(reviewCost <= 0.1),
        ],
        [
          `${items} items: exit ≤ 10 s after the last download`,
          `${fmt(cold.tailS ?? Number.NaN)} s`,
          verdict((cold.tailS ?? 99) <= 10),
        ],
        [
          `${items} items: rerun sends no job request`,
          `${rerun.requests.creates + rerun.requests.polls}`,
          verdict(rerun.requests.creates + rerun.requests.polls === 0 && rerun.exitCode === 0),
        ],
      );
    } finally {
      emulator.stop();
      await cleanup();
    }
  }
  if (peaks.length >= 2) {
    const [a, b] = [peaks[0]!, peaks[peaks.length - 1]!];
    const per = (x: number, y: number) => ((y - x) * 1024 * 1024) / (b.items - a.items);
    const heapPerItem = a.heap !== null && b.heap !== null ? per(a.heap, b.heap) : Number.NaN;
    const rssPerItem = per(a.rss, b.rss);
    console.log(
      `live heap ${fmt(a.heap ?? Number.NaN, 0)} MB at ${a.items} items, ${fmt(b.heap ?? Number.NaN, 0)} MB at ${b.items}: ${fmt(heapPerItem, 0)} B per item; ` +
        `peak RSS ${fmt(a.rss, 0)} MB → ${fmt(b.rss, 0)} MB: ${fmt(rssPerItem, 0)} B per item`,
    );
    rows.push([
      `heap growth per item (${a.items} → ${b.items}) ≤ 1 KB`,
      `${fmt(heapPerItem, 0)} B (RSS: ${fmt(rssPerItem, 0)} B)`,
      verdict(heapPerItem <= 1024),
    ]);
  }
  if (reportItems > 0) {
    const rebuilt = await measureReport(reportItems);
    rows.push([
      `report rebuilt from ${reportItems} items: RSS ≤ 500 MB`,
      `${fmt(rebuilt.peakRssMb, 0)} MB, ${fmt(rebuilt.seconds)} s`,
      verdict(rebuilt.exitCode !== null && rebuilt.exitCode <= 1 && rebuilt.peakRssMb <= 500),
    ]);
  }
  if (planRows.length > 0) {
    // Bounded: what grows with the rows is the duplicate-id index (a few tens of bytes a row).
    const planned = [];
    for (const n of planRows) planned.push({ rows: n, ...(await measurePlan(n)) });
    const [a, b] = [planned[0]!, planned[planned.length - 1]!];
    const perRow =
      b.rows > a.rows ? ((b.peakRssMb - a.peakRssMb) * 1024 * 1024) / (b.rows - a.rows) : Number.NaN;
    rows.push([
      `plan of ${planRows.join(' and ')} rows: grows ≤ 100 B a row`,
      `${planned.map((p) => `${fmt(p.peakRssMb, 0)} MB/${fmt(p.seconds, 0)} s`).join(', ')}; ${fmt(perRow, 0)} B/row`,
      verdict(planned.every((p) => p.exitCode === 0) && perRow <= 100),
    ]);
  }
  printTable(['target', 'ours', 'verdict'], rows);
}

/**
 * `kitchen-batch plan --json` over a manifest of `rows` rows (explicit ids, 50 images), its output
 * thrown away: every row is read twice, checked for duplicates, decided and written out.
 */
async function measurePlan(
  rows: number,
): Promise<{ seconds: number; peakRssMb: number; exitCode: number | null }> {
  const { dir, cleanup } = await tempDir('kb-bench-plan-');
  try {
    await mkdir(path.join(dir, 'img'));
    const { files } = await writeKitchens(path.join(dir, 'img'), 50, {
      width: 240,
      height: 180,
      grain: 12,
      seed: 5,
    });
    const out = createWriteStream(path.join(dir, 'catalogue.csv'));
    const write = async (text: string) => {
      if (!out.write(text)) await once(out, 'drain');
    };
    await write('id,image,style\n');
    for (let i = 0; i < rows; i++) {
      await write(`row${i},${path.relative(dir, files[i % files.length]!)},${STYLES[i % STYLES.length]}\n`);
    }
    out.end();
    await once(out, 'finish');
    const measured = await measureCommand(dir, ['plan', 'catalogue.csv', '--json']);
    console.log(
      `plan of ${rows.toLocaleString('en-US')} rows: exit ${measured.exitCode}, ${fmt(measured.seconds)} s, peak RSS ${fmt(measured.peakRssMb, 0)} MB`,
    );
    return measured;
  } finally {
    await cleanup();
  }
}

/** A CSV catalogue of `items` items: one row per image with six styles, images copied from drawings. */
async function writeCatalogue(dir: string, items: number) {
  const images = Math.ceil(items / STYLES.length);
  const imageDir = path.join(dir, 'img');
  await mkdir(imageDir);
  const drawn = await writeKitchens(imageDir, Math.min(DRAWINGS, images), {
    width: 240,
    height: 180,
    grain: 12,
    prefix: 'd',
    seed: 11,
  });
  const rows = ['id,image,style'];
  const work: MinimalItem[] = [];
  for (let i = 0; i < images; i++) {
    const id = `k${String(i).padStart(6, '0')}`;
    const file = path.join(imageDir, `${id}.jpg`);
    await copyFile(drawn.files[i % drawn.files.length]!, file);
    const styles = STYLES.slice(0, Math.min(STYLES.length, items - i * STYLES.length));
    rows.push(`${id},img/${id}.jpg,${styles.join('|')}`);
    for (const style of styles) work.push({ id: `${id}__${style}`, file, style });
  }
  const manifest = path.join(dir, 'catalogue.csv');
  await writeFile(manifest, `${rows.join('\n')}\n`);
  // Every distinct upload once (a bigger catalogue repeats the drawings): the warm-up's manifest.
  const warmUp = path.join(dir, 'warm-up.csv');
  await writeFile(warmUp, `${rows.slice(0, 1 + Math.min(images, DRAWINGS)).join('\n')}\n`);
  return { manifest, warmUp, images, items: work, meanBytes: drawn.meanBytes };
}

/** report.json's `totals.needs_review` of a finished run. */
function needsReview(out: string): number | string {
  const report = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8')) as {
    run?: { totals?: { needs_review?: number } };
  };
  return report.run?.totals?.needs_review ?? 'none';
}

/** `kitchen-batch report` over a synthetic finished journal of `items` items. */
async function measureReport(
  items: number,
): Promise<{ seconds: number; peakRssMb: number; exitCode: number | null }> {
  const { dir, cleanup } = await tempDir('kb-bench-report-');
  try {
    await mkdir(path.join(dir, 'results'));
    console.log(`writing a synthetic journal of ${items.toLocaleString('en-US')} finished items`);
    await writeSyntheticJournal(dir, items);
    const measured = await measureCommand(dir, ['report', dir, '--no-html', '--json']);
    console.log(
      `report of ${items.toLocaleString('en-US')} items rebuilt: exit ${measured.exitCode}, ${fmt(measured.seconds)} s, peak RSS ${fmt(measured.peakRssMb, 0)} MB`,
    );
    return measured;
  } finally {
    await cleanup();
  }
}

/** A compacted-style journal (run, plan, then per item: item, submitting, accepted, ended, downloaded). */
async function writeSyntheticJournal(dir: string, items: number): Promise<void> {
  const journal = createWriteStream(path.join(dir, 'journal.jsonl'));
  const ids = createWriteStream(path.join(dir, 'plan.ids'));
  const write = async (stream: NodeJS.WritableStream, text: string) => {
    if (!stream.write(text)) await once(stream, 'drain');
  };
  const hex = (n: number, len: number) =>
    n
      .toString(16)
      .padStart(len, '0')
      .slice(-len)
      .repeat(Math.ceil(len / 8))
      .slice(0, len);
  await write(
    journal,
    `${JSON.stringify({ t: 'run', at: new Date().toISOString(), v: 1, manifest: 'catalogue.csv', base_url: 'http://127.0.0.1:1', pid: 1 })}\n`,
  );
  await write(
    journal,
    `${JSON.stringify({ t: 'plan', ids_file: 'plan.ids', count: items, manifest_dir: dir })}\n`,
  );
  for (let i = 0; i < items; i++) {
    const image = `k${String(Math.floor(i / 6)).padStart(7, '0')}`;
    const id = `${image}__${STYLES[i % 6]}`;
    const fp = hex(i * 2654435761, 32);
    const job = `job_${hex(i * 40503, 24)}`;
    await write(ids, `${id}\n`);
    await write(
      journal,
      `${JSON.stringify({ t: 'item', id, fp, image: `img/${image}.jpg`, module: 'change-style', style: STYLES[i % 6], src: { path: `${dir}/img/${image}.jpg`, size: 7000, mtime_ms: 1.7e12, sha256: hex(Math.floor(i / 6), 64) } })}\n` +
        `${JSON.stringify({ t: 'submitting', id, fp, at: '' })}\n` +
        `${JSON.stringify({ t: 'accepted', id, fp, job_id: job, at: '' })}\n` +
        `${JSON.stringify({ t: 'ended', id, fp, job_id: job, status: 'succeeded', image_url: `http://127.0.0.1:1/storage/${hex(i, 32)}/${job}.jpg`, processing_time_ms: 1000 + (i % 997), error: null })}\n` +
        `${JSON.stringify({ t: 'downloaded', id, fp, job_id: job, output: `results/${id}.jpg`, sha256: hex(i * 7, 64), bytes: 7000, mtime_ms: 1.7e12 })}\n`,
    );
  }
  journal.end();
  ids.end();
  await Promise.all([once(journal, 'finish'), once(ids, 'finish')]);
}
