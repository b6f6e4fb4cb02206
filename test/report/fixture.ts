/**
 * Report fixtures for the HTML report tests. The browser test takes a {@link ReportFixture} from
 * {@link loadReportFixture}; to test against a real sandbox run instead, make that function return
 * `fixtureFromRun(outDir, manifestDir)` for the run's folder; nothing else has to change.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import type { Report, ReportItem, ReportTotals } from '../../src/types.js';

/** Everything writeHtmlReport needs, plus where the sources are. */
export interface ReportFixture {
  outDir: string;
  report: Report;
  sourcePath: (item: ReportItem) => string | null;
}

/** The id that tries to close the inline JSON script and inject markup; the page must show it as text. */
export const EVIL_ID = 'evil</script><img src=x onerror=alert(1)>__modern';

/** The fixture the browser test uses. Swap the body for `fixtureFromRun(...)` to use a real run. */
export async function loadReportFixture(root: string): Promise<ReportFixture> {
  return buildSyntheticFixture(root);
}

/**
 * A report from a finished run: reads `<outDir>/report.json`; sources resolve against the manifest's
 * folder as the contract says (absolute `image` paths stay as they are).
 */
export async function fixtureFromRun(outDir: string, manifestDir: string): Promise<ReportFixture> {
  const report = JSON.parse(await readFile(path.join(outDir, 'report.json'), 'utf8')) as Report;
  return {
    outDir,
    report,
    sourcePath: (item) => (item.image ? path.resolve(manifestDir, item.image) : null),
  };
}

/** A kitchen drawn in SVG, so sources and results are real, distinct, decodable photos-to-be. */
function kitchenSvg(
  width: number,
  height: number,
  p: { wall: string; cab: string; top: string; accent: string },
): string {
  const w = width;
  const h = height;
  const doors = Array.from({ length: 5 }, (_, i) => {
    const x = w * 0.06 + i * w * 0.176;
    return (
      `<rect x="${x}" y="${h * 0.62}" width="${w * 0.16}" height="${h * 0.3}" rx="6" fill="${p.cab}" stroke="rgba(0,0,0,.18)"/>` +
      `<rect x="${x + w * 0.065}" y="${h * 0.66}" width="${w * 0.03}" height="6" rx="3" fill="${p.accent}"/>` +
      `<rect x="${x}" y="${h * 0.08}" width="${w * 0.16}" height="${h * 0.22}" rx="6" fill="${p.cab}" stroke="rgba(0,0,0,.18)"/>`
    );
  }).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">
<defs><linearGradient id="g" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="${p.wall}"/><stop offset="1" stop-color="#ffffff" stop-opacity=".6"/></linearGradient></defs>
<rect width="${w}" height="${h}" fill="${p.wall}"/><rect width="${w}" height="${h * 0.6}" fill="url(#g)" opacity=".5"/>
<rect x="${w * 0.38}" y="${h * 0.33}" width="${w * 0.24}" height="${h * 0.2}" rx="4" fill="#cfe6f7" stroke="${p.accent}" stroke-width="6"/>
<rect x="0" y="${h * 0.58}" width="${w}" height="${h * 0.05}" fill="${p.top}"/>
${doors}
<rect x="0" y="${h * 0.93}" width="${w}" height="${h * 0.07}" fill="#8a7a68"/>
</svg>`;
}

const PALETTES = {
  before: { wall: '#e9e4da', cab: '#b9a995', top: '#6f6a63', accent: '#55504a' },
  scandinavian: { wall: '#f3f1ec', cab: '#fbfaf7', top: '#c9a77c', accent: '#2f2f2f' },
  industrial: { wall: '#8d8f91', cab: '#3b3f44', top: '#a9a9a9', accent: '#c07a3c' },
  modern: { wall: '#eef2f5', cab: '#28435e', top: '#f5f5f5', accent: '#d4af37' },
  configurator: { wall: '#f6efe6', cab: '#6b8f71', top: '#e9e2d5', accent: '#333333' },
} as const;

/** Writes a kitchen in `palette` to `file`, encoded by its extension (png, webp, else JPEG). */
async function writeKitchen(
  file: string,
  palette: keyof typeof PALETTES,
  width = 1200,
  height = 900,
): Promise<void> {
  const svg = Buffer.from(kitchenSvg(width, height, PALETTES[palette]));
  const image = sharp(svg);
  if (file.endsWith('.png')) await image.png().toFile(file);
  else if (file.endsWith('.webp')) await image.webp({ quality: 80 }).toFile(file);
  else await image.jpeg({ quality: 82 }).toFile(file);
}

/** Totals as report.json computes them. */
export function totalsOf(items: readonly ReportItem[]): ReportTotals {
  const count = (s: ReportItem['status']) => items.filter((i) => i.status === s).length;
  return {
    items: items.length,
    succeeded: count('succeeded'),
    failed: count('failed'),
    rejected: count('rejected'),
    incomplete: count('incomplete'),
    possible_duplicates: items.filter((i) => i.ambiguous_resends > 0).length,
    needs_review: items.filter((i) => (i.review?.flags.length ?? 0) > 0).length,
  };
}

/** A report item: the given fields over those of an item never submitted. */
function item(partial: Partial<ReportItem> & Pick<ReportItem, 'id' | 'image' | 'status'>): ReportItem {
  return {
    module: 'change-style',
    style: null,
    job_id: null,
    output: null,
    sha256: null,
    processing_time_ms: null,
    submissions: 0,
    error: null,
    preflight: [],
    review: null,
    ambiguous_resends: 0,
    ...partial,
  };
}

/**
 * A run folder under `root` with real images: `images/` (sources, one of them corrupt) and
 * `out/results/`, and a report with every status, several error codes, a possible duplicate,
 * a missing source, a missing result file and a hostile id.
 */
export async function buildSyntheticFixture(root: string): Promise<ReportFixture> {
  const images = path.join(root, 'images');
  const outDir = path.join(root, 'out');
  await mkdir(images, { recursive: true });
  await mkdir(path.join(outDir, 'results'), { recursive: true });
  await writeKitchen(path.join(images, 'k1.jpg'), 'before');
  await writeKitchen(path.join(images, 'k2.png'), 'before', 800, 1000);
  await writeKitchen(path.join(images, 'k3.webp'), 'before', 1000, 750);
  await writeKitchen(path.join(images, 'k4.jpg'), 'before');
  await writeFile(path.join(images, 'broken.jpg'), Buffer.from('this is not a jpeg at all'));
  await writeKitchen(path.join(outDir, 'results', 'k1__scandinavian.jpg'), 'scandinavian');
  await writeKitchen(path.join(outDir, 'results', 'k1__industrial.jpg'), 'industrial');
  await writeKitchen(path.join(outDir, 'results', 'k2__modern.png'), 'modern', 800, 1000);
  await writeKitchen(path.join(outDir, 'results', 'k4.webp'), 'configurator');

  const ok = (
    id: string,
    image: string,
    style: string | null,
    ext: string,
    ms: number,
    extra: Partial<ReportItem> = {},
  ) =>
    item({
      id,
      image,
      style,
      status: 'succeeded',
      job_id: `job_${id}`,
      output: `results/${id}.${ext}`,
      sha256: 'ab'.repeat(32),
      processing_time_ms: ms,
      submissions: 1,
      ...extra,
    });
  const items: ReportItem[] = [
    ok('k1__scandinavian', 'images/k1.jpg', 'scandinavian', 'jpg', 8200),
    ok('k1__industrial', 'images/k1.jpg', 'industrial', 'jpg', 9100, {
      submissions: 2,
      ambiguous_resends: 1,
    }),
    ok('k2__modern', 'images/k2.png', 'modern', 'png', 12400),
    ok('k4', 'images/k4.jpg', null, 'webp', 15800, { module: 'kitchen-configurator' }),
    // Result file gone from disk (deleted by hand): placeholder, link still points where it was.
    ok('k3__modern', 'images/k3.webp', 'modern', 'jpg', 10100),
    item({
      id: 'k3__rustic',
      image: 'images/k3.webp',
      style: 'rustic',
      status: 'failed',
      job_id: 'job_k3_rustic',
      processing_time_ms: 4300,
      submissions: 1,
      error: { code: 'generation_failed', message: 'The model could not produce an image for this input.' },
    }),
    item({
      id: EVIL_ID,
      image: 'images/<evil>.jpg',
      style: 'modern',
      status: 'failed',
      job_id: 'job_evil',
      submissions: 1,
      error: { code: 'generation_failed', message: 'Message with </script> and <b>markup</b> & "quotes".' },
    }),
    item({
      id: 'broken__modern',
      image: 'images/broken.jpg',
      style: 'modern',
      status: 'rejected',
      error: { code: 'corrupt_image', message: 'images/broken.jpg cannot be decoded as an image.' },
    }),
    item({
      id: 'missing__modern',
      image: 'images/missing.jpg',
      style: 'modern',
      status: 'rejected',
      error: { code: 'file_not_found', message: 'images/missing.jpg does not exist.' },
    }),
    item({
      id: 'k4__boho',
      image: 'images/k4.jpg',
      style: 'boho',
      status: 'rejected',
      error: { code: 'unknown_style', message: 'Style "boho" is not offered by the service.' },
    }),
    item({
      id: 'k2__industrial',
      image: 'images/k2.png',
      style: 'industrial',
      status: 'incomplete',
      submissions: 2,
      ambiguous_resends: 1,
      error: {
        code: 'submit_unknown',
        message: 'Connection reset after the request was sent; the job may exist.',
      },
    }),
    item({
      id: 'k2__scandinavian',
      image: 'images/k2.png',
      style: 'scandinavian',
      status: 'incomplete',
      job_id: 'job_k2_scandi',
      submissions: 1,
      error: { code: 'job_timeout', message: 'The job did not finish within 600 s.' },
    }),
    item({
      id: 'k1__modern',
      image: 'images/k1.jpg',
      style: 'modern',
      status: 'incomplete',
      error: { code: 'max_submissions', message: 'Not submitted: --max-submissions 5 reached.' },
    }),
  ];
  const report: Report = {
    run: {
      manifest: 'manifests/kitchens.csv',
      base_url: 'https://api.example.test',
      started_at: '2026-03-14T09:12:05.120+01:00',
      finished_at: '2026-03-14T09:19:47.884+01:00',
      totals: totalsOf(items),
      stats: {
        duration_ms: 462_764,
        requests: 57,
        retries: 4,
        rate_limited: 2,
        processing_time_p50_ms: 10_100,
        processing_time_p95_ms: 15_800,
      },
    },
    items,
  };
  return {
    outDir,
    report,
    // Like the run command: the manifest's folder is `root`, and a source the run never found is null.
    sourcePath: (i) => (i.image.includes('missing') ? null : path.resolve(root, i.image)),
  };
}

/**
 * A big report from a small fixture: `n` items cycling through the fixture's items with unique ids,
 * sharing their sources and results so the thumbnails stay few.
 */
export function scaleReport(base: ReportFixture, n: number): ReportFixture {
  const byId = new Map(base.report.items.map((i) => [i.id, i] as const));
  const items = Array.from({ length: n }, (_, k) => {
    const proto = base.report.items[k % base.report.items.length]!;
    return { ...proto, id: `bulk-${String(k).padStart(5, '0')}__${proto.style ?? 'cfg'}`, proto: proto.id };
  });
  const protoOf = new Map(items.map((i) => [i.id, i.proto] as const));
  const plain: ReportItem[] = items.map(({ proto: _proto, ...rest }) => rest);
  return {
    outDir: base.outDir,
    report: { run: { ...base.report.run, totals: totalsOf(plain) }, items: plain },
    sourcePath: (i) => {
      const proto = byId.get(protoOf.get(i.id) ?? '');
      return proto ? base.sourcePath(proto) : null;
    },
  };
}
