/**
 * Manifest throughput and memory: writes a 100,000-row CSV to a temp folder, reads it with
 * readManifest and prints rows/s with the peak RSS and heap growth seen while reading. The CSV
 * is streamed, so memory should grow with the items kept (small objects), not with the file.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { readManifest } from '../src/manifest/index.js';

const ROWS = 100_000;
const STYLES = ['modern', 'rustic', 'scandinavian', 'industrial'];

async function writeCsv(file: string, rows: number): Promise<void> {
  const out = createWriteStream(file);
  out.write('id,image,module,style,prompt\r\n');
  for (let i = 0; i < rows; i++) {
    // Every tenth row carries a quoted comma and newline, the case that costs the parser most.
    const prompt = i % 10 === 0 ? `"keep the window, ${i}\r\nand the floor"` : `plain prompt ${i}`;
    const line = `k${i},images/k${i}.jpg,change-style,${STYLES[i % STYLES.length]},${prompt}\r\n`;
    if (!out.write(line)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  out.end();
  await finished(out);
}

/** Runs the benchmark once and prints its figures to stdout. */
export async function benchManifest(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-manifest-'));
  try {
    const file = path.join(dir, 'big.csv');
    await writeCsv(file, ROWS);
    const size = (await stat(file)).size;

    globalThis.gc?.();
    const before = process.memoryUsage();
    let peakRss = before.rss;
    let peakHeap = before.heapUsed;
    const sampler = setInterval(() => {
      const now = process.memoryUsage();
      peakRss = Math.max(peakRss, now.rss);
      peakHeap = Math.max(peakHeap, now.heapUsed);
    }, 5);

    const start = process.hrtime.bigint();
    const result = await readManifest(file);
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    clearInterval(sampler);
    const after = process.memoryUsage();
    peakRss = Math.max(peakRss, after.rss);
    peakHeap = Math.max(peakHeap, after.heapUsed);

    const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
    console.log(
      [
        `manifest bench: ${result.rows} rows (${mb(size)} CSV) -> ${result.items.length} items in ${seconds.toFixed(2)} s`,
        `  throughput:      ${Math.round(result.rows / seconds).toLocaleString('en-US')} rows/s`,
        `  peak RSS:        ${mb(peakRss)} (start ${mb(before.rss)}, +${mb(peakRss - before.rss)})`,
        `  heap used delta: +${mb(peakHeap - before.heapUsed)} at peak, +${mb(after.heapUsed - before.heapUsed)} at end (items kept)`,
      ].join('\n'),
    );
    if (result.items.length !== ROWS) throw new Error(`expected ${ROWS} items, got ${result.items.length}`);
    const last = result.items[result.items.length - 1];
    // Header + 100,000 rows, every tenth spanning two lines: the last row starts on line 110,001.
    if (last?.source.line !== ROWS + ROWS / 10 + 1)
      throw new Error(`last row line ${last?.source.line} is wrong`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
