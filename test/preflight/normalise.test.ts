/**
 * Normalised uploads (issue 11), end to end: a corpus of real-world photo kinds made with sharp, one
 * glob row over their folder, a run against the sandbox in echo mode (its result is the upload
 * itself), and assertions on the bytes the sandbox received: orientation tag, dimensions, colour
 * space, bit depth, profile, EXIF/GPS, frames. A clean image still goes up byte for byte.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp, { type Metadata, type Sharp } from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readIcc } from '../../src/image/icc.js';
import { ensureThumbnail } from '../../src/report/thumbs.js';
import type { Report, ReportItem } from '../../src/types.js';
import { closeWorkspaces, type Workspace, workspace } from '../helpers/batch.js';
import { runWithHeap, srcUrl } from '../helpers/heap.js';
import { exifHasGps } from './helpers.js';

/** An upright test picture: a red block top left on grey, so a turn or a mirror shows. */
function upright(width: number, height: number) {
  const block = Buffer.alloc(Math.floor(width / 3) * Math.floor(height / 3) * 3);
  for (let i = 0; i < block.length; i += 3) block[i] = 230;
  return sharp({ create: { width, height, channels: 3, background: { r: 128, g: 128, b: 128 } } }).composite([
    {
      input: block,
      raw: { width: Math.floor(width / 3), height: Math.floor(height / 3), channels: 3 },
      left: 0,
      top: 0,
    },
  ]);
}

/** The stored pixels that a viewer honouring EXIF orientation `n` shows as {@link upright}. */
async function storedFor(n: number, width: number, height: number): Promise<Buffer> {
  const base = await upright(width, height).png().toBuffer();
  // Inverse of each orientation's display transform.
  const inverse: Record<number, (s: Sharp) => Sharp> = {
    1: (s) => s,
    2: (s) => s.flop(),
    3: (s) => s.rotate(180),
    4: (s) => s.flip(),
    5: (s) => s.rotate(90).flip(),
    6: (s) => s.rotate(270),
    7: (s) => s.rotate(270).flip(),
    8: (s) => s.rotate(90),
  };
  const turned = await inverse[n]!(sharp(base)).png().toBuffer();
  return sharp(turned).jpeg({ quality: 95 }).withMetadata({ orientation: n }).toBuffer();
}

/** Whether the top-left of an image is the red block (and the bottom-right is not). */
async function redTopLeft(file: Buffer): Promise<boolean> {
  const { data, info } = await sharp(file)
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const at = (x: number, y: number) => (y * info.width + x) * info.channels;
  const tl = at(Math.floor(info.width / 10), Math.floor(info.height / 10));
  const br = at(Math.floor(info.width * 0.9), Math.floor(info.height * 0.9));
  return data[tl]! > 180 && data[tl + 1]! < 100 && data[br]! < 180;
}

/**
 * A 16-bit CIELab TIFF of {@link upright} (sharp writes TIFF as sRGB, so it is written by hand):
 * uncompressed, one strip, PhotometricInterpretation 8; L* scaled to 0..65535, a* and b* signed ×256.
 */
async function labTiff(width: number, height: number): Promise<Buffer> {
  const flat = await upright(width, height).png().toBuffer();
  const { data } = await sharp(flat)
    .removeAlpha()
    .toColourspace('lab')
    .raw({ depth: 'float' })
    .toBuffer({ resolveWithObject: true });
  const lab = new Float32Array(data.buffer, data.byteOffset, width * height * 3);
  const pixels = Buffer.alloc(width * height * 6);
  const signed = (v: number) => Math.max(-32768, Math.min(32767, Math.round(v * 256)));
  for (let i = 0; i < width * height; i++) {
    pixels.writeUInt16LE(Math.max(0, Math.min(65535, Math.round((lab[i * 3]! * 65535) / 100))), i * 6);
    pixels.writeInt16LE(signed(lab[i * 3 + 1]!), i * 6 + 2);
    pixels.writeInt16LE(signed(lab[i * 3 + 2]!), i * 6 + 4);
  }
  const tags: Array<[number, number, number, number]> = [
    // [tag, type (3 SHORT, 4 LONG), count, value or offset]
    [256, 4, 1, width],
    [257, 4, 1, height],
    [258, 3, 3, 0], // BitsPerSample: offset filled below
    [259, 3, 1, 1],
    [262, 3, 1, 8],
    [273, 4, 1, 0], // StripOffsets: filled below
    [277, 3, 1, 3],
    [278, 4, 1, height],
    [279, 4, 1, pixels.length],
    [284, 3, 1, 1],
  ];
  const ifdAt = 8;
  const ifdBytes = 2 + tags.length * 12 + 4;
  const bitsAt = ifdAt + ifdBytes;
  const pixelsAt = bitsAt + 6;
  tags[2]![3] = bitsAt;
  tags[5]![3] = pixelsAt;
  const head = Buffer.alloc(pixelsAt);
  head.write('II', 0, 'latin1');
  head.writeUInt16LE(42, 2);
  head.writeUInt32LE(ifdAt, 4);
  head.writeUInt16LE(tags.length, ifdAt);
  tags.forEach(([tag, type, count, value], i) => {
    const at = ifdAt + 2 + i * 12;
    head.writeUInt16LE(tag, at);
    head.writeUInt16LE(type, at + 2);
    head.writeUInt32LE(count, at + 4);
    if (type === 3 && count === 1) head.writeUInt16LE(value, at + 8);
    else head.writeUInt32LE(value, at + 8);
  });
  for (let i = 0; i < 3; i++) head.writeUInt16LE(16, bitsAt + i * 2);
  return Buffer.concat([head, pixels]);
}

let ws: Workspace;
let report: Report;
let byId: Map<string, ReportItem>;
const uploaded = async (id: string): Promise<{ bytes: Buffer; meta: Metadata }> => {
  const item = byId.get(id);
  if (!item?.output) throw new Error(`${id} has no result: ${JSON.stringify(item)}`);
  const bytes = await readFile(path.join(ws.out, item.output));
  return { bytes, meta: await sharp(bytes).metadata() };
};
const sources = new Map<string, Buffer>();

beforeAll(async () => {
  ws = await workspace({
    items: 0,
    sandbox: { results: 'echo' },
    extraRows: [',photos/*,change-style,japandi,,'],
  });
  const dir = path.join(ws.dir, 'photos');
  await mkdir(dir, { recursive: true });
  const put = async (name: string, data: Buffer) => {
    sources.set(name, data);
    await writeFile(path.join(dir, name), data);
  };
  for (let n = 1; n <= 8; n++) {
    await put(`land-o${n}.jpg`, await storedFor(n, 300, 200));
    await put(`port-o${n}.jpg`, await storedFor(n, 200, 300));
  }
  await put(
    'cmyk-swop.jpg',
    await upright(300, 200).toColourspace('cmyk').withIccProfile('cmyk').jpeg().toBuffer(),
  );
  await put('cmyk-bare.jpg', await upright(300, 200).toColourspace('cmyk').jpeg().toBuffer());
  await put('lab.tif', await labTiff(300, 200));
  await put('p3.png', await upright(300, 200).withIccProfile('p3').png().toBuffer());
  await put('deep.png', await upright(300, 200).toColourspace('rgb16').png().toBuffer());
  await put(
    'gps.jpg',
    await upright(300, 200)
      .jpeg()
      .withExif({ IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '48/1 51/1 0/1' } })
      .toBuffer(),
  );
  // Two frames stacked: an animation of two 300×200 pages.
  const frames = await upright(300, 400).raw().toBuffer();
  const raw = { width: 300, height: 400, channels: 3 as const, pageHeight: 200 };
  await put('loop.gif', await sharp(frames, { raw }).gif({ loop: 0 }).toBuffer());
  await put('loop.webp', await sharp(frames, { raw }).webp({ loop: 0 }).toBuffer());
  await put('clean.jpg', await upright(300, 200).jpeg().toBuffer());
  await put('clean.png', await upright(300, 200).png().toBuffer());
  // Shares its stem with clean.jpg and clean.png: all three take the extension into their ids.
  await put('clean.webp', await upright(300, 200).webp().toBuffer());
  const result = await ws.run({ limits: { concurrency: 8 }, output: { html: true } });
  expect(result.exitCode, JSON.stringify(result.problems)).toBe(0);
  report = await ws.report();
  byId = new Map(report.items.map((item) => [item.id, item]));
}, 120_000);

afterAll(closeWorkspaces);

describe('uploads as the service receives them', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    'EXIF orientation %i: upright pixels, no tag, displayed size',
    async (n) => {
      for (const [kind, w, h] of [
        ['land', 300, 200],
        ['port', 200, 300],
      ] as const) {
        const { bytes, meta } = await uploaded(`${kind}-o${n}__japandi`);
        expect(meta.orientation ?? 1, `${kind} ${n}`).toBe(1);
        expect([meta.width, meta.height], `${kind} ${n}`).toEqual([w, h]);
        expect(await redTopLeft(bytes), `${kind} ${n}`).toBe(true);
      }
      // Orientation 1 is written as an EXIF block too: only its metadata goes.
      const item = byId.get(`land-o${n}__japandi`)!;
      if (n === 1) expect(item.preflight).toEqual(['metadata removed']);
      else expect(item.preflight[0]).toMatch(/rotated|mirrored|flipped/);
    },
  );

  it.each([
    ['cmyk-swop', /^CMYK \(.+\) → sRGB$/],
    ['cmyk-bare', /^CMYK → sRGB$/],
    ['lab', /^Lab → sRGB/],
    ['p3', /^.*P3.* → sRGB$/],
    ['deep', /^16-bit → 8-bit$/],
  ])('%s: 8-bit sRGB, colour converted, no foreign profile', async (name, step) => {
    const { bytes, meta } = await uploaded(`${name}__japandi`);
    expect(meta.space).toBe('srgb');
    expect(meta.depth).toBe('uchar');
    if (meta.icc) expect(readIcc(meta.icc)?.description ?? '').toMatch(/sRGB/);
    expect(await redTopLeft(bytes)).toBe(true);
    const steps = byId.get(`${name}__japandi`)!.preflight;
    expect(
      steps.some((s) => step.test(s)),
      steps.join(' | '),
    ).toBe(true);
  });

  it('GPS and other EXIF are removed', async () => {
    const { meta } = await uploaded('gps__japandi');
    expect(meta.exif === undefined || !exifHasGps(meta.exif)).toBe(true);
    expect(byId.get('gps__japandi')!.preflight).toEqual(['metadata removed']);
  });

  it('animations go up as their first frame', async () => {
    for (const id of ['loop-gif__japandi', 'loop-webp__japandi']) {
      const { meta } = await uploaded(id);
      expect(meta.pages ?? 1, id).toBe(1);
      expect([meta.width, meta.height], id).toEqual([300, 200]);
      expect(byId.get(id)!.preflight, id).toContain('first frame of 2');
    }
  });

  it('clean JPEG, PNG and WebP go up byte-identical, with nothing in `preflight`', async () => {
    for (const ext of ['jpg', 'png', 'webp']) {
      const { bytes } = await uploaded(`clean-${ext}__japandi`);
      expect(bytes.equals(sources.get(`clean.${ext}`)!), ext).toBe(true);
      expect(byId.get(`clean-${ext}__japandi`)!.preflight, ext).toEqual([]);
    }
  });

  it('report.json says what preflight did, item by item; report.html shows it on the card, report.csv in its column', async () => {
    expect(report.items.every((item) => Array.isArray(item.preflight))).toBe(true);
    const html = await readFile(path.join(ws.out, 'report.html'), 'utf8');
    expect(html).toContain('CMYK');
    const csv = (await readFile(path.join(ws.out, 'report.csv'), 'utf8')).split('\r\n');
    expect(
      csv[0]!.endsWith(',error_code,error_message,preflight,review_score,review_flags,ambiguous_resends'),
    ).toBe(true);
    // The review's columns follow (reviewed by default: a score, then the flags, here echo results'.)
    expect(csv.find((line) => line.startsWith('gps__japandi,'))).toMatch(
      /,metadata removed,[\d.]+,[a-z_; ]*,0$/,
    );
  });
});

describe('report.html’s before thumbnail shows the image as uploaded', () => {
  it('a small tagged, CMYK or 16-bit source is drawn upright in sRGB, not copied as it is', async () => {
    for (const name of ['land-o6.jpg', 'port-o8.jpg', 'cmyk-bare.jpg', 'deep.png']) {
      const dest = path.join(ws.dir, `thumb-${name}.webp`);
      const outcome = await ensureThumbnail({ source: path.join(ws.dir, 'photos', name), dest }, 320);
      expect(outcome, name).toEqual({ state: 'created', file: dest });
      const bytes = await readFile(dest);
      const meta = await sharp(bytes).metadata();
      expect(meta.orientation ?? 1, name).toBe(1);
      expect(meta.space, name).toBe('srgb');
      expect(await redTopLeft(bytes), name).toBe(true);
    }
    // A clean small image still serves as its own thumbnail.
    const clean = await ensureThumbnail(
      { source: path.join(ws.dir, 'photos', 'clean.jpg'), dest: path.join(ws.dir, 'thumb-clean.webp') },
      320,
    );
    expect(clean.file.endsWith('.jpg')).toBe(true);
  });
});

describe('a JPEG over sharp’s pixel limit (16500×16500, 272 megapixels)', () => {
  it('is resized with shrink-on-load instead of refused, in bounded memory (peak RSS of the preflight measured)', async () => {
    const file = path.join(ws.dir, 'huge.jpg');
    await sharp({
      create: { width: 16_500, height: 16_500, channels: 3, background: { r: 90, g: 120, b: 150 } },
      limitInputPixels: false,
    })
      .jpeg({ quality: 60 })
      .toFile(file);
    const run = await runWithHeap(
      ws.dir,
      `import { createPreflighter } from ${JSON.stringify(srcUrl('preflight/index.ts'))};
       import { readFileSync } from 'node:fs';
       const pre = createPreflighter({ cacheDir: ${JSON.stringify(path.join(ws.dir, 'cache-huge'))} });
       const result = await pre.prepare(${JSON.stringify(file)});
       const peak = Number(/VmHWM:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
       console.log(JSON.stringify({ ok: result.ok, action: result.action, prepared: result.prepared, steps: result.steps, peak }));`,
      256,
    );
    expect(run.code, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout.trim().split('\n').pop()!) as {
      ok: boolean;
      action: string;
      prepared: { width: number; height: number };
      steps: string[];
      peak: number;
    };
    expect(out).toMatchObject({ ok: true, action: 'resized', prepared: { width: 4096, height: 4096 } });
    expect(out.steps).toContain('resized 16500×16500 → 4096×4096');
    // Decoded whole it would be 817 MB of pixels; shrink-on-load decodes at 1/4 scale.
    console.log(`preflight of a 272 MP JPEG: peak RSS ${out.peak.toFixed(0)} MB`);
    expect(out.peak).toBeLessThan(400);
  }, 120_000);
});
