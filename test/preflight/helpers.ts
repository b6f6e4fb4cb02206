/** Real images for the preflight tests, made with sharp, and one temp folder and preflighter per test file. */
import { createDeflate } from 'node:zlib';
import sharp, { type Sharp } from 'sharp';
import { afterAll, beforeAll } from 'vitest';
import { createPreflighter, type Preflighter, type PreflightResult } from '../../src/preflight/index.js';
import { type TempDir, useTempDir } from '../helpers/tmp.js';

/**
 * A photo-like image: colour gradients with mild noise, so JPEG sizes are realistic. Built in JS
 * because sharp's own gaussian `create.noise` is slow at 18 megapixels.
 */
export function photo(width: number, height: number): Sharp {
  const data = Buffer.alloc(width * height * 3);
  let seed = 12345;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      const jitter = (seed >>> 16) & 31;
      const at = (y * width + x) * 3;
      data[at] = ((x * 200) / width + jitter) | 0;
      data[at + 1] = ((y * 200) / height + jitter) | 0;
      data[at + 2] = (((x + y) * 100) / (width + height) + 80 + jitter) | 0;
    }
  }
  return sharp(data, { raw: { width, height, channels: 3 } });
}

/** A half-transparent RGBA image. */
export function withAlpha(width: number, height: number): Sharp {
  return sharp({ create: { width, height, channels: 4, background: { r: 20, g: 120, b: 200, alpha: 0.5 } } });
}

/**
 * A real, valid 30000×30000 greyscale PNG of zeros, the classic decompression bomb. sharp cannot
 * write it (its own pixel limit and 900 MB of pixels), so the IDAT is deflated here. Level 1 takes
 * 0.6 s for 3.9 MB; level 9 makes the 875 kB file of docs/faults.md F.29 but takes 3.5 s.
 */
export async function pngBomb(width = 30_000, height = 30_000, level = 1): Promise<Buffer> {
  const deflate = createDeflate({ level });
  const chunks: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
  });
  const rows = 100;
  const block = Buffer.alloc((width + 1) * rows); // filter byte 0 + zero pixels per row
  for (let y = 0; y < height; y += rows) {
    if (!deflate.write(block)) await new Promise((resolve) => deflate.once('drain', resolve));
  }
  deflate.end();
  await ended;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale, deflate, no filter method variant, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', Buffer.concat(chunks)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** One PNG chunk: length, type, data and CRC. */
function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** The CRC-32 that PNG chunks carry. */
function crc32(data: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** An ISO-BMFF header claiming to be HEIC, with no real content (what docs/faults.md F.31 measured). */
export function craftedHeic(): Buffer {
  const ftyp = Buffer.concat([
    Buffer.from([0, 0, 0, 0x18]),
    Buffer.from('ftypheic', 'latin1'),
    Buffer.from([0, 0, 0, 0]),
    Buffer.from('mif1heic', 'latin1'),
  ]);
  return Buffer.concat([ftyp, Buffer.alloc(200)]);
}

/** True when a raw EXIF block has a GPS IFD pointer (tag 0x8825) in IFD0. */
export function exifHasGps(exif: Buffer | undefined): boolean {
  if (!exif) return false;
  const tiff = exif.subarray(exif.indexOf('Exif\0\0', 0, 'latin1') + 6);
  const little = tiff.toString('latin1', 0, 2) === 'II';
  const u16 = (at: number) => (little ? tiff.readUInt16LE(at) : tiff.readUInt16BE(at));
  const u32 = (at: number) => (little ? tiff.readUInt32LE(at) : tiff.readUInt32BE(at));
  const ifd0 = u32(4);
  const count = u16(ifd0);
  for (let i = 0; i < count; i++) if (u16(ifd0 + 2 + i * 12) === 0x8825) return true;
  return false;
}

/**
 * One temp folder and one preflighter (caching into it) for a whole test file: made before the
 * first test, closed and removed after the last. Read `env.tmp` / `env.pre` inside tests.
 */
export function preflightEnv(): { readonly tmp: TempDir; readonly pre: Preflighter } {
  const tmp = useTempDir('preflight-test-', 'suite');
  let pre: Preflighter | undefined;
  beforeAll(() => {
    pre = createPreflighter({ cacheDir: tmp.file('cache') });
  });
  afterAll(async () => {
    await pre?.close();
  });
  return {
    tmp,
    get pre() {
      return pre!;
    },
  };
}

/** The result, which must be a pass. */
export function ok(result: PreflightResult): Extract<PreflightResult, { ok: true }> {
  if (!result.ok) throw new Error(`expected ok, got ${result.error.code}: ${result.error.message}`);
  return result;
}

/** The result, which must be a refusal. */
export function refused(result: PreflightResult): Extract<PreflightResult, { ok: false }> {
  if (result.ok) throw new Error(`expected a refusal, got ${result.action}`);
  return result;
}
