/**
 * The review's in-process decoder of small JPEGs (`src/review/decode.ts`): it must read what it
 * takes exactly as sharp would, and leave everything else to sharp.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { similarity } from '../../src/review/compare.js';
import { decodeSmallJpeg, jpegHeader, SMALL_PIXELS } from '../../src/review/decode.js';
import { signature } from '../../src/review/signature.js';
import { kitchenImage, noise } from '../support/images.js';

/** Mean and largest absolute difference of two RGBA pixel buffers. */
function difference(a: Uint8Array, b: Uint8Array): { mean: number; max: number } {
  expect(a.length).toBe(b.length);
  let sum = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    sum += d;
    if (d > max) max = d;
  }
  return { mean: sum / a.length, max };
}

/** sharp's decode of the same bytes, upright, as RGBA. */
async function sharpPixels(bytes: Buffer) {
  const { data, info } = await sharp(bytes, { autoOrient: true })
    .toColourspace('srgb')
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** A detailed picture (a kitchen with noise over it), so that decoders' differences would show. */
async function photo(width: number, height: number): Promise<Buffer> {
  const grain = await noise(width, height, { seed: 7 }).png().toBuffer();
  return sharp(await kitchenImage({ look: 'mosaic', seed: 3, width, height }))
    .composite([{ input: grain, blend: 'soft-light' }])
    .png()
    .toBuffer();
}

/** The JPEG without its APP2 ICC_PROFILE segments. */
function withoutIccProfile(jpeg: Buffer): Buffer {
  const parts: Buffer[] = [jpeg.subarray(0, 2)];
  let at = 2;
  while (jpeg[at] === 0xff && jpeg[at + 1] !== 0xda) {
    const length = jpeg.readUInt16BE(at + 2);
    const segment = jpeg.subarray(at, at + 2 + length);
    if (!(jpeg[at + 1] === 0xe2 && segment.subarray(4, 15).toString('latin1') === 'ICC_PROFILE'))
      parts.push(segment);
    at += 2 + length;
  }
  parts.push(jpeg.subarray(at));
  return Buffer.concat(parts);
}

describe('small JPEGs decoded in the review process', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kb-decode-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('gives the pixels sharp gives: baseline, progressive, greyscale, 4:4:4', async () => {
    const source = await photo(240, 180);
    const variants: Record<string, Buffer> = {
      baseline: await sharp(source).jpeg({ quality: 85 }).toBuffer(),
      progressive: await sharp(source).jpeg({ quality: 85, progressive: true }).toBuffer(),
      greyscale: await sharp(source).greyscale().jpeg({ quality: 85 }).toBuffer(),
      '4:4:4': await sharp(source).jpeg({ quality: 95, chromaSubsampling: '4:4:4' }).toBuffer(),
    };
    for (const [name, bytes] of Object.entries(variants)) {
      const ours = await decodeSmallJpeg(bytes);
      expect(ours, name).not.toBeNull();
      const theirs = await sharpPixels(bytes);
      expect([ours!.width, ours!.height], name).toEqual([theirs.width, theirs.height]);
      const { mean, max } = difference(ours!.data, theirs.data);
      // Both are libjpeg-turbo's decoder (MozJPEG is a fork of it): the same pixels, give or take
      // a rounding step in the upsampling of chroma.
      expect(mean, name).toBeLessThan(0.5);
      expect(max, name).toBeLessThanOrEqual(4);
    }
  });

  it('applies the EXIF orientation, as sharp does', async () => {
    const plain = await sharp(await photo(240, 180))
      .jpeg({ quality: 90 })
      .toBuffer();
    for (const orientation of [2, 3, 6, 8]) {
      // sharp writes an orientation only with an ICC profile, which this decoder leaves to sharp.
      const turned = withoutIccProfile(
        await sharp(plain).withMetadata({ orientation }).jpeg({ quality: 90 }).toBuffer(),
      );
      const meta = await sharp(turned).metadata();
      expect([meta.orientation, meta.icc]).toEqual([orientation, undefined]);
      const ours = await decodeSmallJpeg(turned);
      expect(ours, `orientation ${orientation}`).not.toBeNull();
      const theirs = await sharpPixels(turned);
      expect([ours!.width, ours!.height]).toEqual(orientation >= 5 ? [180, 240] : [240, 180]);
      expect([ours!.width, ours!.height]).toEqual([theirs.width, theirs.height]);
      expect(difference(ours!.data, theirs.data).mean, `orientation ${orientation}`).toBeLessThan(0.5);
    }
  });

  it('leaves to sharp what it would not read as sharp does, and goes on after a failure', async () => {
    const small = await photo(240, 180);
    const good = await sharp(small).jpeg().toBuffer();
    // A Huffman table cut short: libjpeg gives up (the decoder's exit), not a warning.
    const brokenTable = Buffer.from(good);
    const dht = brokenTable.indexOf(Buffer.from([0xff, 0xc4]));
    brokenTable.fill(0xff, dht + 5, dht + 21);
    // Restart markers in data that declared none: libjpeg warns and decodes on.
    const corrupt = Buffer.from(good);
    for (let at = Math.floor(corrupt.length / 2); at < corrupt.length - 200; at += 97)
      corrupt.writeUInt16BE(0xffd3, at);
    const side = Math.ceil(Math.sqrt(SMALL_PIXELS)) + 1;
    const cases: Record<string, Buffer> = {
      png: await sharp(small).png().toBuffer(),
      webp: await sharp(small).webp().toBuffer(),
      cmyk: await sharp(small).toColourspace('cmyk').jpeg().toBuffer(),
      'with an ICC profile': await sharp(small).withIccProfile('p3').jpeg().toBuffer(),
      truncated: good.subarray(0, Math.floor(good.length * 0.6)),
      'header only': good.subarray(0, 600),
      'corrupt data': corrupt,
      'a broken Huffman table': brokenTable,
      [`over ${SMALL_PIXELS} pixels`]: await sharp(await photo(side, side))
        .jpeg()
        .toBuffer(),
      'not an image': Buffer.from('<html>not found</html>'),
    };
    for (const [name, bytes] of Object.entries(cases)) {
      expect(await decodeSmallJpeg(bytes), name).toBeNull();
      // The decoder still reads the next image (a fresh instance after libjpeg's exit).
      expect(await decodeSmallJpeg(good), `after ${name}`).not.toBeNull();
    }
    expect(jpegHeader(good)).toEqual({ width: 240, height: 180 });
  });

  it('gives a small JPEG read from its file the signature sharp gives the same pixels', async () => {
    for (const [width, height] of [
      [240, 180],
      [180, 240],
      [320, 240],
      [300, 300],
    ] as const) {
      const jpeg = await sharp(await photo(width, height))
        .jpeg({ quality: 85 })
        .toBuffer();
      const file = path.join(dir, `k-${width}x${height}.jpg`);
      await writeFile(file, jpeg);
      expect(await decodeSmallJpeg(jpeg)).not.toBeNull();
      const ours = await signature(file);
      // The same decoded pixels as a PNG: sharp's path (decode, shrink to the rendition).
      const theirs = await signature(await sharp(jpeg).png().toBuffer());
      expect(ours.aspect).toBeCloseTo(width / height, 5);
      expect(Math.abs(Math.log(ours.aspect / theirs.aspect))).toBeLessThan(0.02);
      expect(similarity(ours.edges, theirs.edges)).toBeGreaterThan(0.9);
      expect(Math.abs(ours.spread - theirs.spread)).toBeLessThan(2);
      expect(Math.abs(ours.entropy - theirs.entropy)).toBeLessThan(0.2);
      expect(ours.opacity).toBe(1);
    }
  });
});
