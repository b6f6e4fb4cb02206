/**
 * The review's signatures: what it knows of an image, measured once from a SIDE×SIDE rendition
 * (edge map, colours, spread, entropy, opacity, perceptual hash), compared by `compare.ts`.
 *
 * @module
 */
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { loadSharp } from '../image/sharp.js';
import { decodeSmallJpeg } from './decode.js';
import { SIDE, stretch } from './resample.js';

/** What the review knows of an image, computed once: small, about 16 KB. */
export interface Signature {
  /** The upright image's width:height, from its rendition (SIDE px on the short side: exact to about 1 %). */
  aspect: number;
  /** Sobel edge magnitude of a SIDE×SIDE grey rendition, 0..255. */
  edges: Uint8ClampedArray;
  /** SIDE² RGB pixels. */
  colour: Uint8Array;
  /** Largest channel standard deviation (0: uniform). */
  spread: number;
  /** Shannon entropy of the grey rendition's histogram, bits. */
  entropy: number;
  /** Mean alpha 0..1 (1 without alpha). */
  opacity: number;
  /** Perceptual hash: a 64-bit difference hash of the grey image and the mean colour, as text. */
  hash: string;
}

/**
 * Reads an image (file path or bytes) into its {@link Signature}, orientation applied. A small
 * JPEG is decoded whole in this process (`decode.ts`: sharp's fixed cost per call, about 1 ms
 * measured, is most of the cost of a small image); any other image in one sharp call, a decode to
 * SIDE px on the short side keeping the aspect (JPEG and WebP shrink on load). Every measure then
 * comes from those pixels, squeezed to SIDE×SIDE.
 */
export async function signature(input: string | Buffer): Promise<Signature> {
  const bytes = typeof input === 'string' ? smallFile(input) : input;
  const small = bytes ? await decodeSmallJpeg(bytes) : null;
  if (small) return signatureOfPixels(small);
  const sharp = await loadSharp();
  const { data, info } = await sharp(bytes ?? input, { failOn: 'error', autoOrient: true })
    .resize(SIDE, SIDE, { fit: 'outside' })
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  return signatureOfPixels({ data, width: info.width, height: info.height, channels: info.channels });
}

/**
 * Files up to this size are read whole, to see whether they are small JPEGs (a JPEG of
 * `decode.ts`'s largest size is well under it at any quality); sharp reads larger ones itself.
 */
const SMALL_FILE_BYTES = 1024 * 1024;

/**
 * The file's bytes if it is at most {@link SMALL_FILE_BYTES}, else null. Read synchronously: this
 * runs in the review's own process, whose thread has nothing else to do meanwhile, and a small
 * file read through the thread pool measured 0.19 ms of CPU against 0.014 ms read here.
 */
function smallFile(file: string): Buffer | null {
  const descriptor = openSync(file, 'r');
  try {
    return fstatSync(descriptor).size <= SMALL_FILE_BYTES ? readFileSync(descriptor) : null;
  } finally {
    closeSync(descriptor);
  }
}

/**
 * The {@link Signature} of a rendition already decoded (SIDE px on its short side, upright, 8-bit,
 * 1 to 4 channels): the preflight's check of an as-is upload makes one.
 */
export function signatureOfPixels(sample: {
  data: Uint8Array;
  width: number;
  height: number;
  channels: number;
}): Signature {
  const { data, width, height, channels } = sample;
  return measure(stretch(data, width, height, channels), width / height);
}

/**
 * Buffers that {@link measure} and {@link sobel} only need while they run (synchronous, so one set
 * serves every call): a signature allocates only what it keeps.
 */
const scratch = {
  grey: new Uint8Array(SIDE * SIDE),
  histogram: new Uint32Array(256),
  magnitude: new Float32Array(SIDE * SIDE),
};

/** Every measure of a SIDE×SIDE RGBA rendition, in one pass over its pixels. */
function measure(data: Uint8Array, aspect: number): Signature {
  const n = SIDE * SIDE;
  const half = SIDE / 2;
  const { grey, histogram } = scratch;
  histogram.fill(0);
  const colour = new Uint8Array(n * 3);
  // Each quarter's colour sums (for the hash) and the dHash's 9×8 block sums of grey: integers,
  // so the order they are added in does not change them.
  const quarters = new Float64Array(12);
  const cells = new Float64Array(9 * 8);
  let sumR = 0;
  let sumG = 0;
  let sumB = 0;
  let sumA = 0;
  let squaresR = 0;
  let squaresG = 0;
  let squaresB = 0;
  for (let y = 0; y < SIDE; y++) {
    const cellRow = Math.floor((y * 8) / SIDE) * 9;
    for (let x = 0; x < SIDE; x++) {
      const i = y * SIDE + x;
      const r = data[4 * i]!;
      const g = data[4 * i + 1]!;
      const b = data[4 * i + 2]!;
      colour[3 * i] = r;
      colour[3 * i + 1] = g;
      colour[3 * i + 2] = b;
      const q = 3 * ((y < half ? 0 : 2) + (x < half ? 0 : 1));
      quarters[q]! += r;
      quarters[q + 1]! += g;
      quarters[q + 2]! += b;
      const level = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
      grey[i] = level;
      histogram[level]!++;
      cells[cellRow + Math.floor((x * 9) / SIDE)]! += level;
      sumR += r;
      sumG += g;
      sumB += b;
      sumA += data[4 * i + 3]!;
      squaresR += r * r;
      squaresG += g * g;
      squaresB += b * b;
    }
  }
  const deviation = (sum: number, squares: number): number =>
    Math.sqrt(Math.max(0, squares / n - (sum / n) ** 2));
  const spread = Math.max(deviation(sumR, squaresR), deviation(sumG, squaresG), deviation(sumB, squaresB));
  let entropy = 0;
  for (const count of histogram) if (count > 0) entropy -= (count / n) * Math.log2(count / n);
  return {
    aspect,
    edges: sobel(grey, SIDE),
    colour,
    spread,
    entropy,
    opacity: sumA / n / 255,
    // Structure (difference hash of the grey image) and colour (each quarter's mean, 16 levels a
    // channel): two styles of one photo, or two tints of one layout, share their structure only.
    hash: `${differenceHash(cells)}-${quarterColours(quarters, half * half)}`,
  };
}

/** Sobel gradient magnitude, scaled to 0..255 by the image's own strongest edge. */
function sobel(grey: Uint8Array, side: number): Uint8ClampedArray {
  const magnitude = scratch.magnitude;
  let max = 1e-6;
  for (let y = 0; y < side; y++) {
    // Rows above and below, clamped at the border (the edge pixel repeats).
    const up = Math.max(0, y - 1) * side;
    const row = y * side;
    const down = Math.min(side - 1, y + 1) * side;
    for (let x = 0; x < side; x++) {
      const left = Math.max(0, x - 1);
      const right = Math.min(side - 1, x + 1);
      const gx =
        grey[up + right]! +
        2 * grey[row + right]! +
        grey[down + right]! -
        grey[up + left]! -
        2 * grey[row + left]! -
        grey[down + left]!;
      const gy =
        grey[down + left]! +
        2 * grey[down + x]! +
        grey[down + right]! -
        grey[up + left]! -
        2 * grey[up + x]! -
        grey[up + right]!;
      const m = Math.sqrt(gx * gx + gy * gy);
      magnitude[row + x] = m;
      if (m > max) max = m;
    }
  }
  const out = new Uint8ClampedArray(side * side);
  for (let i = 0; i < out.length; i++) out[i] = (magnitude[i]! / max) * 255;
  return out;
}

/** The mean colour of each quarter of the image (sums of `area` pixels), 4 bits a channel, as hex. */
function quarterColours(sums: Float64Array, area: number): string {
  let hex = '';
  for (const sum of sums) hex += Math.floor(sum / area / 16).toString(16);
  return hex;
}

/**
 * dHash from the grey image's 9×8 block sums: each block brighter than its right neighbour is a 1
 * bit, 64 bits as 16 hex digits, the first block the highest bit.
 */
function differenceHash(cells: Float64Array): string {
  let hex = '';
  for (let nibble = 0; nibble < 16; nibble++) {
    let value = 0;
    for (let bit = 0; bit < 4; bit++) {
      const k = nibble * 4 + bit;
      const at = Math.floor(k / 8) * 9 + (k % 8);
      value = value * 2 + (cells[at]! > cells[at + 1]! ? 1 : 0);
    }
    hex += value.toString(16);
  }
  return hex;
}
