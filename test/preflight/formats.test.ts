import { readFile } from 'node:fs/promises';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createPreflighter, describePreflight } from '../../src/preflight/index.js';
import { sha256 } from '../../src/util/fs.js';
import { ok, photo, preflightEnv, withAlpha } from './helpers.js';

const env = preflightEnv();

describe('passthrough', () => {
  it.each([
    ['jpeg', 'k1.jpg', 'image/jpeg'],
    ['png', 'k1.png', 'image/png'],
    ['webp', 'k1.webp', 'image/webp'],
  ] as const)('sends a valid %s unchanged', async (format, name, contentType) => {
    const data = await photo(800, 600).toFormat(format).toBuffer();
    const file = await env.tmp.write(`pass-${name}`, data);
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('as-is');
    expect(result.path).toBe(file);
    expect(result.contentType).toBe(contentType);
    expect(result.filename).toBe(`pass-${name}`);
    expect(result.sourceSha256).toBe(sha256(data));
    expect(result.original).toEqual({ format, width: 800, height: 600, bytes: data.length });
    expect(result.prepared).toEqual(result.original);
    expect((await readFile(result.path)).equals(data)).toBe(true); // toEqual on MB buffers is slow
    expect(describePreflight(result)).toMatch(/^as-is: .* 800×600/);
  });

  it('judges by content, not by the extension (a PNG named .jpg)', async () => {
    const file = await env.tmp.write('really-png.jpg', await photo(100, 80).png().toBuffer());
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('as-is');
    expect(result.contentType).toBe('image/png');
    expect(result.filename).toBe('really-png.png');
  });
});

describe('conversion of formats the service does not accept', () => {
  it('TIFF → JPEG', async () => {
    const file = await env.tmp.write('t.tiff', await photo(640, 480).tiff().toBuffer());
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('converted');
    expect(result.original.format).toBe('tiff');
    expect(result.prepared).toMatchObject({ format: 'jpeg', width: 640, height: 480 });
    expect(result.filename).toBe('t.jpg');
    expect(result.path).not.toBe(file);
    const meta = await sharp(result.path).metadata();
    expect(meta.format).toBe('jpeg');
    expect(meta.size ?? (await readFile(result.path)).length).toBe(result.prepared.bytes);
    expect(describePreflight(result)).toMatch(/^TIFF → JPEG: JPEG 640×480, /);
  });

  it('animated GIF → its first frame', async () => {
    // Three 120×80 frames: red, green, blue.
    const frame = (r: number, g: number, b: number) =>
      Buffer.alloc(120 * 80 * 3).map((_, i) => [r, g, b][i % 3] ?? 0);
    const strip = Buffer.concat([frame(255, 0, 0), frame(0, 255, 0), frame(0, 0, 255)]);
    const gif = await sharp(strip, { raw: { width: 120, height: 240, channels: 3, pageHeight: 80 } })
      .gif()
      .toBuffer();
    expect((await sharp(gif).metadata()).pages).toBe(3);
    const file = await env.tmp.write('anim.gif', gif);
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('converted');
    expect(result.prepared).toMatchObject({ format: 'jpeg', width: 120, height: 80 });
    const { channels } = await sharp(result.path).stats();
    expect(channels[0]?.mean).toBeGreaterThan(200); // red
    expect(channels[2]?.mean).toBeLessThan(50);
  });

  it('PNG with alpha that must be re-encoded stays PNG (transparency kept)', async () => {
    const file = await env.tmp.write('alpha.png', await withAlpha(5000, 300).png().toBuffer());
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('resized');
    expect(result.prepared.format).toBe('png');
    expect(result.contentType).toBe('image/png');
    expect((await sharp(result.path).metadata()).hasAlpha).toBe(true);
  });

  it('TIFF with alpha → PNG', async () => {
    const file = await env.tmp.write(
      'alpha.tif',
      await withAlpha(300, 200).tiff({ compression: 'lzw' }).toBuffer(),
    );
    expect((await sharp(file).metadata()).hasAlpha).toBe(true);
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('converted');
    expect(result.prepared).toMatchObject({ format: 'png', width: 300, height: 200 });
    expect((await sharp(result.path).metadata()).hasAlpha).toBe(true);
  });

  it('AVIF → JPEG', async () => {
    const file = await env.tmp.write('a.avif', await photo(320, 240).avif().toBuffer());
    const result = ok(await env.pre.prepare(file));
    expect(result.action).toBe('converted');
    expect(result.original.format).toBe('avif');
    expect(result.prepared).toMatchObject({ format: 'jpeg', width: 320, height: 240 });
  });
});

describe('metadata on images that could pass as they are: removed by default, kept with keepMetadata', () => {
  it('re-encodes a JPEG carrying GPS without it, and leaves a clean one as-is', async () => {
    const strip = env.pre;
    const keep = createPreflighter({ cacheDir: env.tmp.file('cache-keep'), keepMetadata: true });
    const dirty = await env.tmp.write(
      'gps.jpg',
      await photo(400, 300)
        .jpeg()
        .withExif({ IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '48/1 51/1 0/1' } })
        .toBuffer(),
    );
    const clean = await env.tmp.write('clean.jpg', await photo(400, 300).jpeg().toBuffer());
    const dirtyResult = ok(await strip.prepare(dirty));
    expect(dirtyResult.action).toBe('converted');
    expect(dirtyResult.path).not.toBe(dirty);
    expect(dirtyResult.steps).toEqual(['metadata removed']);
    const meta = await sharp(dirtyResult.path).metadata();
    expect(meta.exif).toBeUndefined();
    expect(meta).toMatchObject({ format: 'jpeg', width: 400, height: 300 });
    expect(ok(await strip.prepare(clean))).toMatchObject({ action: 'as-is', path: clean });
    // keepMetadata sends the same GPS-carrying file as it is.
    expect(ok(await keep.prepare(dirty))).toMatchObject({ action: 'as-is', path: dirty, steps: [] });
  });

  it('re-encodes a PNG with text chunks losslessly', async () => {
    const strip = env.pre;
    const source = await photo(200, 100)
      .png()
      .withExif({ IFD0: { Copyright: 'someone' } })
      .toBuffer();
    expect((await sharp(source).metadata()).exif).toBeDefined();
    const result = ok(await strip.prepare(await env.tmp.write('meta.png', source)));
    expect(result.action).toBe('converted');
    expect(result.prepared.format).toBe('png');
    expect((await sharp(result.path).metadata()).exif).toBeUndefined();
    const [a, b] = await Promise.all([sharp(source).raw().toBuffer(), sharp(result.path).raw().toBuffer()]);
    expect(b.equals(a)).toBe(true);
  });
});
