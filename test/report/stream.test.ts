import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { emptyTotals } from '../../src/report/build.js';
import { PAGE_FIRST, PAGE_PROBLEMS, writeReports } from '../../src/report/write.js';
import type { Report, ReportItem } from '../../src/types.js';
import { jsonElement, jsonHead, jsonTail } from '../../src/util/json-stream.js';
import { runWithHeap, srcUrl } from '../helpers/heap.js';
import { tempDirForTest } from '../helpers/tmp.js';

/** A row as a run of `n` items would have it: most succeeded, every seventh failed. */
function row(i: number): ReportItem {
  const failed = i % 7 === 3;
  const id = `kitchen-${String(i).padStart(7, '0')}__scandinavian`;
  return {
    id,
    image: `catalogue/kitchen-${i}.jpg`,
    module: 'change-style',
    style: 'scandinavian',
    status: failed ? 'failed' : 'succeeded',
    job_id: `job_${i.toString(16).padStart(24, '0')}`,
    output: failed ? null : `results/${id}.jpg`,
    sha256: failed ? null : 'ab'.repeat(32),
    processing_time_ms: 1000 + (i % 500),
    submissions: i % 1000 === 0 ? 2 : 1,
    error: failed
      ? { code: 'not_a_kitchen', message: 'The photo shows "a bathroom",\nnot a kitchen.' }
      : null,
    preflight: i % 3 === 0 ? ['rotated 90°', 'metadata removed'] : [],
    review: failed
      ? null
      : { score: i % 11 === 0 ? 0.2 : 0.95, flags: i % 11 === 0 ? ['layout_changed'] : [] },
    ambiguous_resends: i % 1000 === 0 ? 1 : 0,
  };
}

const run: Report['run'] = {
  manifest: 'catalogue.csv',
  base_url: 'https://api.example.com',
  started_at: '2026-11-22T01:00:00.000+00:00',
  finished_at: '2026-11-22T05:00:00.000+00:00',
  totals: emptyTotals(),
};

describe('report.json written as a stream', () => {
  it('is byte for byte what JSON.stringify(report, null, 2) gives, for no, one and many items', () => {
    for (const n of [0, 1, 3, 50]) {
      const items = Array.from({ length: n }, (_, i) => row(i));
      const streamed =
        jsonHead({ run, items: [] }) + items.map((item, i) => jsonElement(item, i)).join('') + jsonTail(n);
      expect(streamed, `${n} items`).toBe(`${JSON.stringify({ run, items }, null, 2)}\n`);
    }
  });

  it('a report larger than the heap is written whole under a 48 MB heap (JSON.stringify of it dies there)', async () => {
    const tmp = await tempDirForTest('kb-report-big-');
    const n = 300_000;
    const source = (whole: boolean) => `
      import { writeReports } from '${srcUrl('report/write.ts')}';
      ${row.toString()}
      const info = ${JSON.stringify({ ...run, totals: undefined })};
      if (${whole}) {
        const items = Array.from({ length: ${n} }, (_, i) => row(i));
        console.log(JSON.stringify({ run: info, items }, null, 2).length);
      } else {
        const written = await writeReports(${JSON.stringify(tmp.dir)}, { info, *rows() { for (let i = 0; i < ${n}; i++) yield row(i); } }, { html: false });
        console.log(JSON.stringify(written.run.totals));
      }`;
    const streamed = await runWithHeap(tmp.dir, source(false), 48, 120_000);
    expect(streamed.stderr).toBe('');
    expect(streamed.code).toBe(0);
    const failed = Math.floor((n - 4) / 7) + 1;
    expect(JSON.parse(streamed.stdout)).toEqual({
      items: n,
      succeeded: n - failed,
      failed,
      rejected: 0,
      incomplete: 0,
      possible_duplicates: n / 1000,
      needs_review: Array.from({ length: n }, (_, i) => i).filter((i) => i % 11 === 0 && i % 7 !== 3).length,
    });
    const bytes = (await stat(tmp.file('report.json'))).size;
    expect(bytes).toBeGreaterThan(2 * 48 * 1024 * 1024);
    // Whole and well-formed: it starts with the run, ends closed, and holds every item once.
    const head = (await readFile(tmp.file('report.json'), { encoding: 'utf8', flag: 'r' })).slice(0, 400);
    expect(head).toMatch(/^{\n {2}"run": {\n {4}"manifest": "catalogue.csv"/);
    let ids = 0;
    let last = '';
    for await (const line of createInterface({ input: createReadStream(tmp.file('report.json')) })) {
      if (line.startsWith('      "id": ')) ids++;
      last = line;
    }
    expect(ids).toBe(n);
    expect(last).toBe('}');
    let csvRows = -1;
    for await (const _ of createInterface({ input: createReadStream(tmp.file('report.csv')) })) csvRows++;
    expect(csvRows).toBeGreaterThanOrEqual(n); // messages with newlines are quoted over two lines

    const whole = await runWithHeap(tmp.dir, source(true), 48, 120_000);
    expect(whole.code).not.toBe(0);
  });
});

describe('report.html at catalogue scale', () => {
  it('lists the first items and every problem up to its cap, says so, and stays near 10 MB', async () => {
    const tmp = await tempDirForTest('kb-report-page-');
    const n = 200_000;
    await writeReports(
      tmp.dir,
      { info: { ...run }, rows: () => Array.from({ length: n }, (_, i) => row(i)) },
      { html: true },
    );
    const html = await readFile(tmp.file('report.html'), 'utf8');
    expect(html.length).toBeLessThan(12 * 1024 * 1024);
    const data = JSON.parse(
      /<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html)![1]!,
    ) as {
      items: Array<{ id: string; status: string; rv?: { flags: string[] } }>;
    };
    // After the first ones: the items that did not succeed and the results the review flagged.
    const afterFirst = data.items.slice(PAGE_FIRST);
    expect(data.items.slice(0, PAGE_FIRST).map((i) => i.id)).toEqual(
      Array.from({ length: PAGE_FIRST }, (_, i) => row(i).id),
    );
    expect(afterFirst).toHaveLength(PAGE_PROBLEMS);
    expect(afterFirst.every((i) => i.status === 'failed' || (i.rv?.flags.length ?? 0) > 0)).toBe(true);
    expect(afterFirst.some((i) => i.status === 'succeeded')).toBe(true);
    const expected = Array.from({ length: n }, (_, i) => row(i))
      .slice(PAGE_FIRST)
      .filter((i) => i.status !== 'succeeded' || (i.review?.flags.length ?? 0) > 0)
      .slice(0, PAGE_PROBLEMS)
      .map((i) => i.id);
    expect(afterFirst.map((i) => i.id)).toEqual(expected);
    expect(html).toContain(
      `This page lists ${(PAGE_FIRST + PAGE_PROBLEMS).toLocaleString('en-US')} of the 200,000 items`,
    );
    expect(html).toContain('The full list is in report.csv and report.json');
    // The totals are the whole run's, not the page's.
    expect(html).toMatch(/data-stat="items"><span class="label">Items<\/span><span class="value">200,000</);
  });

  it('a run that fits shows every item and no note', async () => {
    const tmp = await tempDirForTest('kb-report-small-');
    await writeReports(tmp.dir, { info: { ...run }, rows: () => [row(0), row(3)] }, { html: true });
    const html = await readFile(tmp.file('report.html'), 'utf8');
    expect(html).not.toContain('This page lists');
  });
});
