import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createPreflighter, describePreflight } from '../../src/preflight/index.js';
import { noise } from '../support/images.js';
import { exifHasGps, ok, photo, preflightEnv } from './helpers.js';

const env = preflightEnv();

describe('images over a limit', () => {
  it('re-encodes a ~12 MB noise PNG under 10,000,000 bytes', async () => {
    const source = await noise(2000, 2000).png().toBuffer();
    expect(source.length).toBeGreaterThan(10_000_000);
    const result = ok(await env.pre.prepare(await env.tmp.write('noise.png', source)));
    expect(result.action).toBe('resized');
    expect(result.prepared.format).toBe('jpeg');
    expect(result.prepared.bytes).toBeLessThanOrEqual(10_000_000);
    expect(result.prepared.width).toBeLessThanOrEqual(2000); // never upscaled
    const meta = await sharp(result.path).metadata();
    expect(meta).toMatchObject({
      format: 'jpeg',
      width: result.prepared.width,
      height: result.prepared.height,
    });
    expect(result.note).toMatch(/^resized from 2000×2000 \/ 12\.\d MB to .* \(PNG → JPEG\)$/);
  });

  it('fits a 6000×3000 JPEG inside 4096 px, keeping the aspect ratio', async () => {
    const file = await env.tmp.write('wide.jpg', await photo(6000, 3000).jpeg({ quality: 80 }).toBuffer());
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('resized');
    expect(result.original).toMatchObject({ width: 6000, height: 3000 });
    expect(result.prepared).toMatchObject({ format: 'jpeg', width: 4096, height: 2048 });
    expect(result.filename).toBe('wide.jpg');
    expect(describePreflight(result)).toMatch(/^resized 6000×3000 → 4096×2048: JPEG 4096×2048, /);
  });

  it('turns an EXIF-orientation-6 photo upright while shrinking it', async () => {
    // Stored 5000×1000 landscape, displayed rotated 90° as 1000×5000 portrait. The left column is
    // red, so upright it becomes the top row.
    const pixels = Buffer.alloc(5000 * 1000 * 3, 128);
    for (let y = 0; y < 1000; y++) {
      for (let x = 0; x < 500; x++) pixels.set([255, 0, 0], (y * 5000 + x) * 3);
    }
    const stored = await sharp(pixels, { raw: { width: 5000, height: 1000, channels: 3 } })
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const result = ok(await env.pre.prepare(await env.tmp.write('rotated.jpg', stored)));
    expect(result.action).toBe('resized');
    expect(result.original).toMatchObject({ width: 1000, height: 5000 });
    expect(result.prepared).toMatchObject({ width: 819, height: 4096 });
    const meta = await sharp(result.path).metadata();
    expect(meta.orientation).toBeUndefined();
    expect([meta.width, meta.height]).toEqual([819, 4096]);
    // stats() looks at the input, not the pipeline: cut the top rows out first.
    const topRows = await sharp(result.path)
      .extract({ left: 0, top: 0, width: 819, height: 300 })
      .png()
      .toBuffer();
    const top = await sharp(topRows).stats();
    expect(top.channels[0]?.mean).toBeGreaterThan(200);
    expect(top.channels[1]?.mean).toBeLessThan(60);
  });

  it('drops EXIF and GPS from re-encoded output', async () => {
    const source = await photo(4500, 3000)
      .jpeg()
      .withExif({ IFD0: { Copyright: 'me' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '48/1 51/1 0/1' } })
      .toBuffer();
    expect(exifHasGps((await sharp(source).metadata()).exif)).toBe(true);
    const result = ok(await env.pre.prepare(await env.tmp.write('gps-big.jpg', source)));
    expect(result.action).toBe('resized');
    const meta = await sharp(result.path).metadata();
    expect(exifHasGps(meta.exif)).toBe(false);
    expect(meta.exif).toBeUndefined();
    expect(meta.xmp).toBeUndefined();
  });

  it('refuses with too_large an image that cannot be brought under the byte limit', async () => {
    const tiny = createPreflighter({ cacheDir: env.tmp.file('cache-tiny'), maxBytes: 2_000 });
    const result = await tiny.prepare(
      await env.tmp.write('noise-small.png', await noise(400, 400).png().toBuffer()),
    );
    expect(result).toMatchObject({ ok: false, error: { code: 'too_large' } });
    if (!result.ok) {
      expect(result.sourceSha256).toMatch(/^[0-9a-f]{64}$/);
      expect(result.error.message).toMatch(/noise-small\.png: .*over the 2 kB limit/);
    }
  });

  it('steps quality and size down until the bytes fit', async () => {
    const small = createPreflighter({ cacheDir: env.tmp.file('cache-small'), maxBytes: 150_000 });
    const file = await env.tmp.write('noise-mid.png', await noise(600, 600).png().toBuffer());
    const result = ok(await small.prepare(file));
    expect(result.action).toBe('resized');
    expect(result.prepared.bytes).toBeLessThanOrEqual(150_000);
    expect(result.prepared.width).toBeLessThan(600);
  });
});
