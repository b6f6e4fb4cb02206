import { readdir, readFile, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_JS } from '../../src/report/html/client.js';
import { formatDuration, inlineJson, percentile } from '../../src/report/html/format.js';
import { buildHeader, writeHtmlReport } from '../../src/report/html/index.js';
import type { Report } from '../../src/types.js';
import { tempDir, useTempDir } from '../helpers/tmp.js';
import { buildSyntheticFixture, EVIL_ID, type ReportFixture } from './fixture.js';

interface PageData {
  items: Array<{ id: string; src: string | null; out: string | null; href: string | null }>;
}

function pageData(html: string): PageData {
  const m = /<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html);
  if (!m?.[1]) throw new Error('no data block');
  return JSON.parse(m[1]) as PageData;
}

describe('writeHtmlReport', () => {
  const root = useTempDir('kb-html-', 'suite');
  let fx: ReportFixture;
  let html: string;
  let thumbnails: number;

  beforeAll(async () => {
    fx = await buildSyntheticFixture(root.dir);
    const result = await writeHtmlReport({ outDir: fx.outDir, report: fx.report, sourcePath: fx.sourcePath });
    expect(result.file).toBe(path.join(fx.outDir, 'report.html'));
    thumbnails = result.thumbnails;
    html = await readFile(result.file, 'utf8');
  });

  it('writes one self-contained page that references nothing on the network', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('<meta name="viewport"');
    const urls = html.match(/https?:\/\/[^\s"'<>)]+/g) ?? [];
    expect(new Set(urls)).toEqual(new Set([fx.report.run.base_url]));
    // No external stylesheet, script or font: every src/href is relative or absent.
    expect(html).not.toMatch(/<link\b/i);
    expect(html).not.toMatch(/<script[^>]*\ssrc=/i);
    expect(html).not.toMatch(/@import|@font-face|url\(/i);
    // The temp file of the atomic write is gone.
    return readdir(fx.outDir).then((names) => expect(names.filter((n) => n.endsWith('.tmp'))).toEqual([]));
  });

  it('shows the totals and base URL from the report', () => {
    expect(html).toContain('data-stat="items"><span class="label">Items</span><span class="value">13<');
    expect(html).toContain('data-stat="failed"><span class="label">Failed</span><span class="value">2<');
    expect(html).toContain('data-stat="retries"><span class="label">Retries</span><span class="value">4<');
    expect(html).toContain('>https://api.example.test</dd>');
  });

  it('makes decodable thumbnails, relative, at most thumbSize on the long side', async () => {
    const data = pageData(html);
    const urls = new Set(data.items.flatMap((i) => [i.src, i.out]).filter((u): u is string => u !== null));
    expect(urls.size).toBe(thumbnails);
    // 4 distinct decodable sources (k1..k4; broken and missing have none) + 4 results on disk.
    expect(thumbnails).toBe(8);
    for (const url of urls) {
      expect(url).toMatch(/^thumbs\/[^/]+\.webp$/);
      const meta = await sharp(path.join(fx.outDir, decodeURIComponent(url))).metadata();
      expect(meta.format).toBe('webp');
      expect(Math.max(meta.width ?? 0, meta.height ?? 0)).toBeLessThanOrEqual(320);
      expect(meta.width).toBeGreaterThan(0);
    }
    const k1 = data.items.filter((i) => i.id.startsWith('k1__'));
    expect(new Set(k1.map((i) => i.src)).size).toBe(1); // one source, shrunk once
    expect(data.items.find((i) => i.id === 'k1__scandinavian')).toMatchObject({
      out: 'thumbs/k1__scandinavian.out.webp',
      href: 'results/k1__scandinavian.jpg',
    });
  });

  it('survives missing and corrupt images with placeholders', () => {
    const byId = new Map(pageData(html).items.map((i) => [i.id, i]));
    expect(byId.get('missing__modern')?.src).toBeNull(); // sourcePath gave null
    expect(byId.get('broken__modern')?.src).toBeNull(); // not decodable
    expect(byId.get('k3__modern')?.out).toBeNull(); // result file deleted
    expect(byId.get('k3__modern')?.src).not.toBeNull();
  });

  it('escapes ids and messages so they cannot close the data script', () => {
    // Exactly the two real closing tags: the data block's and the script's.
    expect(html.match(/<\/script>/gi)).toHaveLength(2);
    expect(html).not.toContain('<img src=x');
    expect(html).toContain('evil\\u003c/script>\\u003cimg src=x onerror=alert(1)>__modern');
    expect(pageData(html).items.some((i) => i.id === EVIL_ID)).toBe(true);
  });

  it('reuses thumbnails on a second call, and remakes one whose source changed', async () => {
    const thumbsDir = path.join(fx.outDir, 'thumbs');
    const names = (await readdir(thumbsDir)).sort();
    const before = await Promise.all(names.map(async (n) => (await stat(path.join(thumbsDir, n))).mtimeMs));
    const again = await writeHtmlReport({ outDir: fx.outDir, report: fx.report, sourcePath: fx.sourcePath });
    expect(again.thumbnails).toBe(thumbnails);
    expect((await readdir(thumbsDir)).sort()).toEqual(names);
    const after = await Promise.all(names.map(async (n) => (await stat(path.join(thumbsDir, n))).mtimeMs));
    expect(after).toEqual(before);

    const future = new Date(Date.now() + 60_000);
    await utimes(path.join(fx.outDir, 'results', 'k2__modern.png'), future, future);
    await writeHtmlReport({
      outDir: fx.outDir,
      report: fx.report,
      sourcePath: fx.sourcePath,
      concurrency: 1,
    });
    const remade = await stat(path.join(thumbsDir, 'k2__modern.out.webp'));
    expect(remade.mtimeMs).toBeGreaterThan(before[names.indexOf('k2__modern.out.webp')]!);
  });

  it('rejects bad options with what was expected', async () => {
    await expect(
      writeHtmlReport({ outDir: fx.outDir, report: fx.report, sourcePath: fx.sourcePath, thumbSize: 0 }),
    ).rejects.toThrow(/thumbSize: expected a whole number from 16 to 4096, got 0/);
    await expect(
      writeHtmlReport({ outDir: fx.outDir, report: fx.report, sourcePath: fx.sourcePath, concurrency: 0 }),
    ).rejects.toThrow(/concurrency: expected a whole number of at least 1, got 0/);
  });

  it('links relative results (a merged report points into sibling shard folders) but never URLs or absolute paths', async () => {
    const report: Report = {
      ...fx.report,
      items: [
        { ...fx.report.items[0]!, id: 'a', output: '../images/k1.jpg' },
        { ...fx.report.items[0]!, id: 'b', output: 'javascript:alert(1)' },
        { ...fx.report.items[0]!, id: 'c', output: root.file('images/k1.jpg') },
      ],
    };
    const { file } = await writeHtmlReport({ outDir: fx.outDir, report, sourcePath: () => null });
    const items = pageData(await readFile(file, 'utf8')).items;
    expect(items[0]?.href).toBe('../images/k1.jpg');
    expect(items.slice(1).map((i) => [i.href, i.out])).toEqual([
      [null, null],
      [null, null],
    ]);
  });
});

describe('report header', () => {
  it('computes p50/p95 from the items and shows — without run.stats', async () => {
    const root = await tempDir('kb-html-');
    try {
      const fx = await buildSyntheticFixture(root.dir);
      const { stats: _stats, ...run } = fx.report.run;
      const header = buildHeader({ ...fx.report, run });
      const tile = (key: string) => header.tiles.find((t) => t.key === key)?.value;
      expect(tile('retries')).toBe('—');
      expect(tile('rate_limited')).toBe('—');
      // Processing times 4300, 8200, 9100, 10100, 12400, 15800 → p50 9.1 s, p95 15.8 s.
      expect(tile('p50')).toBe('9.1 s');
      expect(tile('p95')).toBe('15.8 s');
      expect(tile('success_rate')).toBe('38.5 %');
      expect(header.duration).toBe('7 min 43 s');
    } finally {
      await root.remove();
    }
  });
});

describe('format helpers', () => {
  it('percentile is nearest-rank', () => {
    expect(percentile([], 50)).toBeNull();
    expect(percentile([5], 95)).toBe(5);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(
      percentile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        95,
      ),
    ).toBe(95);
  });
  it('formatDuration reads well at every scale', () => {
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(12_340)).toBe('12.3 s');
    expect(formatDuration(184_000)).toBe('3 min 04 s');
    expect(formatDuration(3_720_000)).toBe('1 h 02 min');
  });
  it('inlineJson escapes < and line separators', () => {
    expect(inlineJson({ a: '</script><!--\u2028' })).toBe('{"a":"\\u003c/script>\\u003c!--\\u2028"}');
  });
  it('the page script parses', () => {
    expect(() => new Function(CLIENT_JS)).not.toThrow();
  });
});
