/**
 * Result review (issue 15): does a result look like what the service promises (the same kitchen,
 * layout and camera angle, restyled)? Signals from small renditions of the uploaded source and the
 * result (decoded by sharp, or by `decode.ts` for a small JPEG), compared with structural
 * similarity (ssim.js):
 *
 * - layout: SSIM of Sobel edge maps (a restyle changes colours and materials, not where the
 *   cabinets, window and worktop are);
 * - orientation: the result's edge map turned a quarter, upside down or mirrored matches the
 *   source's clearly better than as it is;
 * - aspect: the result's width:height differs from the source's;
 * - degenerate: near-uniform (tiny spread), very low entropy, or mostly transparent;
 * - unchanged (change-style only): colours nearly identical to the source's;
 * - duplicate: two items whose results have the same perceptual hash ({@link DuplicateIndex}).
 *
 * Every signal scores 0..1 (1 = fine); an item's score is the lowest, and a signal under the
 * threshold (default {@link DEFAULT_THRESHOLD}) is a flag.
 */
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import sharp from 'sharp';
import { decodeSmallJpeg } from './decode.js';
import { DEFAULT_THRESHOLD, type Review, type ReviewFlag } from './flags.js';

/** Side of the square renditions compared (both images are squeezed to it). */
const SIDE = 64;

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
 * Buffers that {@link signatureOfPixels} only needs while it runs (it is synchronous, so one set
 * serves every call): a signature allocates only what it keeps.
 */
const scratch = {
  rgba: new Uint8Array(SIDE * SIDE * 4),
  grey: new Uint8Array(SIDE * SIDE),
  histogram: new Uint32Array(256),
  magnitude: new Float32Array(SIDE * SIDE),
  /** The column pass's SIDE×h floats, grown to the tallest rendition up to {@link ROWS_KEPT}. */
  rows: new Float32Array(SIDE * SIDE * 4),
};

/** Floats of the column pass kept between calls (1 MB); a taller rendition gets its own, once. */
const ROWS_KEPT = SIDE * 1024 * 4;

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

/**
 * A w×h rendition of 1 to 4 channels (grey, grey+alpha, RGB, RGBA) resampled to SIDE×SIDE RGBA by
 * area averaging: both images are compared on one grid whatever their aspect. Each output pixel
 * is the mean of the input area it covers, so a rendition at least SIDE px on its short side
 * (sharp's `fit: 'outside'`) is only ever shrunk, as a box filter would, never blurred by
 * upsampling (which measurably lowers the edge maps' similarity of good restyles).
 * Returns {@link scratch}'s `rgba`, overwritten by the next call.
 */
function stretch(data: Uint8Array, w: number, h: number, channels: number): Uint8Array {
  const xs = areaSpans(w);
  const ys = areaSpans(h);
  // Offsets of green, blue and alpha in a pixel: grey ones read the one channel three times; one
  // without alpha reads any channel for it and is made opaque at the end (no branch in the loops).
  const green = channels < 3 ? 0 : 1;
  const blue = channels < 3 ? 0 : 2;
  const opaque = channels === 1 || channels === 3;
  const alpha = opaque ? 0 : channels - 1;
  // Columns first: w×h → SIDE×h, one float per channel. The two passes are written out, not
  // shared: a generic pass (with an RGBA copy of the input) measured 2.4 ms slower per
  // signature, and this runs for every result.
  const size = SIDE * h * 4;
  if (size > scratch.rows.length && size <= ROWS_KEPT) scratch.rows = new Float32Array(size);
  const rows = size <= scratch.rows.length ? scratch.rows : new Float32Array(size);
  const { head, headWeight, from, to, tail, tailWeight, scale } = xs;
  for (let y = 0; y < h; y++) {
    const line = y * w;
    for (let x = 0; x < SIDE; x++) {
      let i = (line + head[x]!) * channels;
      let weight = headWeight[x]!;
      let r = data[i]! * weight;
      let g = data[i + green]! * weight;
      let b = data[i + blue]! * weight;
      let a = data[i + alpha]! * weight;
      const end = (line + to[x]!) * channels;
      for (i = (line + from[x]!) * channels; i < end; i += channels) {
        r += data[i]!;
        g += data[i + green]!;
        b += data[i + blue]!;
        a += data[i + alpha]!;
      }
      i = (line + tail[x]!) * channels;
      weight = tailWeight[x]!;
      const o = 4 * (y * SIDE + x);
      rows[o] = (r + data[i]! * weight) * scale;
      rows[o + 1] = (g + data[i + green]! * weight) * scale;
      rows[o + 2] = (b + data[i + blue]! * weight) * scale;
      rows[o + 3] = opaque ? 255 : (a + data[i + alpha]! * weight) * scale;
    }
  }
  // Then rows: SIDE×h → SIDE×SIDE, each of a row's SIDE×4 floats down the rows its cell covers.
  const out = scratch.rgba;
  const stride = SIDE * 4;
  for (let y = 0; y < SIDE; y++) {
    const top = ys.head[y]! * stride;
    const bottom = ys.tail[y]! * stride;
    const topWeight = ys.headWeight[y]!;
    const bottomWeight = ys.tailWeight[y]!;
    const first = ys.from[y]! * stride;
    const last = ys.to[y]! * stride;
    for (let c = 0; c < stride; c++) {
      let value = rows[top + c]! * topWeight + rows[bottom + c]! * bottomWeight;
      for (let i = first + c; i < last; i += stride) value += rows[i]!;
      out[y * stride + c] = Math.round(value * ys.scale);
    }
  }
  return out;
}

/**
 * One axis's area averaging ({@link stretch}): output cell i of SIDE covers input
 * pixels `from[i]` to `to[i]` (excluded) whole, plus a part (`headWeight`, `tailWeight`, in
 * pixels) of the pixels `head[i]` and `tail[i]` at its two ends; the sum times `scale` is its mean.
 */
interface AreaSpans {
  head: Int32Array;
  headWeight: Float64Array;
  from: Int32Array;
  to: Int32Array;
  tail: Int32Array;
  tailWeight: Float64Array;
  scale: number;
}

/** Area spans by axis length: results of a catalogue come in a few sizes. */
const spansBySize = new Map<number, AreaSpans>();

/** Sizes whose spans are kept (about 2 KB each). */
const SPANS_KEPT = 64;

/**
 * For each of SIDE output cells along an axis of `size` input pixels, the input it covers: the
 * pixels wholly inside it are summed as they are (most of the work, no multiplication), the two
 * at its ends by the part of them it covers.
 */
function areaSpans(size: number): AreaSpans {
  const known = spansBySize.get(size);
  if (known) return known;
  const step = size / SIDE;
  const spans: AreaSpans = {
    head: new Int32Array(SIDE),
    headWeight: new Float64Array(SIDE),
    from: new Int32Array(SIDE),
    to: new Int32Array(SIDE),
    tail: new Int32Array(SIDE),
    tailWeight: new Float64Array(SIDE),
    scale: 1 / step,
  };
  for (let i = 0; i < SIDE; i++) {
    const start = i * step;
    const end = Math.min(size, start + step);
    const whole = Math.ceil(start);
    const past = Math.floor(end);
    if (past < whole) {
      // Inside one pixel (an axis shorter than SIDE): that pixel's part, nothing whole.
      spans.head[i] = Math.floor(start);
      spans.headWeight[i] = end - start;
      continue;
    }
    spans.head[i] = Math.max(0, whole - 1);
    spans.headWeight[i] = whole - start;
    spans.from[i] = whole;
    spans.to[i] = past;
    spans.tail[i] = Math.min(size - 1, past);
    spans.tailWeight[i] = past < size ? end - past : 0;
  }
  if (spansBySize.size >= SPANS_KEPT) spansBySize.clear();
  spansBySize.set(size, spans);
  return spans;
}

/** Options of {@link reviewResult}. */
export interface ReviewOptions {
  /** change-style results must differ from their source; configurator ones need not. */
  module: string;
  /** @default DEFAULT_THRESHOLD */
  threshold?: number;
}

/** The signals' scores, by the flag each raises. */
export type SignalScores = Partial<Record<ReviewFlag, number>>;

/** Compares a result with its source; `duplicate` is added by {@link DuplicateIndex}. */
export function reviewResult(
  source: Signature,
  result: Signature,
  options: ReviewOptions,
): Review & { scores: SignalScores } {
  const threshold = options.threshold ?? DEFAULT_THRESHOLD;
  const scores: SignalScores = {};
  // Degenerate results first: nothing else can be judged on a blank image.
  scores.blank = Math.min(ramp(result.spread, 1.5, 6), ramp(result.entropy, 0.3, 1.2));
  scores.transparent = ramp(result.opacity, 0.5, 0.9);
  if (scores.blank >= threshold && scores.transparent >= threshold) {
    const plain = similarity(source.edges, result.edges);
    const turned = [
      {
        flag: 'rotated' as const,
        value: Math.max(...([1, 2, 3] as const).map((q) => similarity(source.edges, turn(result.edges, q)))),
      },
      { flag: 'mirrored' as const, value: similarity(source.edges, turn(result.edges, 'mirror')) },
    ];
    const best = turned.reduce((a, b) => (b.value > a.value ? b : a));
    // Turned, it matches better than as it is: the result was turned (its layout is otherwise
    // there). A restyle keeps the edges where they were, so as it is it always matches best.
    const isTurned = best.value > plain + 0.05 && best.value > 0.35;
    scores.rotated = best.flag === 'rotated' && isTurned ? 0 : 1;
    scores.mirrored = best.flag === 'mirrored' && isTurned ? 0 : 1;
    scores.layout_changed = isTurned ? 1 : ramp(plain, 0.25, 0.55);
    const ratio = result.aspect / source.aspect;
    // A quarter turn swaps the sides: that is the rotation's flag, not the aspect's.
    scores.aspect_changed = isTurned ? 1 : ramp(Math.abs(Math.log(ratio)), 0.08, 0.03);
    if (options.module === 'change-style')
      scores.unchanged = ramp(colourDistance(source.colour, result.colour), 2, 8);
  }
  const flags = (Object.entries(scores) as Array<[ReviewFlag, number]>)
    .filter(([, value]) => value < threshold)
    .map(([flag]) => flag);
  const score = Math.min(1, ...Object.values(scores));
  return { score: Number(score.toFixed(3)), flags, scores };
}

/**
 * Results of different items with the same perceptual hash: the second and later are flagged
 * `duplicate`. Keeps one short string per distinct hash (a catalogue of 10^6 results: tens of MB).
 */
export class DuplicateIndex {
  readonly #first = new Map<string, string>();

  /** The id of an earlier item with the same result hash, or null (and `id` is remembered). */
  check(id: string, hash: string): string | null {
    const earlier = this.#first.get(hash);
    if (earlier !== undefined && earlier !== id) return earlier;
    this.#first.set(hash, id);
    return null;
  }
}

/** 0 at `bad`, 1 at `good`, linear between (either order). */
function ramp(value: number, bad: number, good: number): number {
  const t = (value - bad) / (good - bad);
  return Math.max(0, Math.min(1, t));
}

/** SSIM's window side: non-overlapping 8×8 windows, as ssim.js's Bezkrovny variant with `windowSize: 8`. */
const WINDOW = 8;

/** SSIM's stabilising constants for 8-bit maps, ssim.js's defaults: (k1·L)², (k2·L)², L = 255. */
const C1 = (0.01 * 255) ** 2;
const C2 = (0.03 * 255) ** 2;

/**
 * Mean SSIM of two SIDE×SIDE grey maps, by ssim.js's Bezkrovny variant (8×8 non-overlapping
 * windows, population variances; see `bezkrovnySsim.js`), written out over the maps in place:
 * ssim.js copies every window into two new arrays, and these five comparisons a result ran at
 * 0.4 ms, most of it allocation. The arithmetic is ssim.js's own, in its order (sums forwards,
 * variances backwards), so the figures are the same to the last bit; a test holds it to ssim.js.
 */
export function similarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = WINDOW * WINDOW;
  let total = 0;
  for (let wy = 0; wy < SIDE; wy += WINDOW) {
    for (let wx = 0; wx < SIDE; wx += WINDOW) {
      let sum1 = 0;
      let sum2 = 0;
      for (let k = 0; k < n; k++) {
        const i = (wy + (k >> 3)) * SIDE + wx + (k & 7);
        sum1 += a[i]!;
        sum2 += b[i]!;
      }
      const average1 = sum1 / n;
      const average2 = sum2 / n;
      let variance1 = 0;
      let variance2 = 0;
      let covariance = 0;
      for (let k = n - 1; k >= 0; k--) {
        const i = (wy + (k >> 3)) * SIDE + wx + (k & 7);
        const d1 = a[i]! - average1;
        const d2 = b[i]! - average2;
        variance1 += d1 * d1;
        variance2 += d2 * d2;
        covariance += d1 * d2;
      }
      const numerator = (2 * average1 * average2 + C1) * (2 * (covariance / n) + C2);
      const denominator1 = average1 * average1 + average2 * average2 + C1;
      const denominator2 = variance1 / n + variance2 / n + C2;
      total += numerator / (denominator1 * denominator2);
    }
  }
  return total / ((SIDE / WINDOW) * (SIDE / WINDOW));
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

/** A turned copy of a map, for the comparisons of one review (overwritten by the next {@link turn}). */
const turned = new Uint8ClampedArray(SIDE * SIDE);

/**
 * The map turned `quarters` × 90° clockwise (1 to 3), or mirrored left to right (`'mirror'`):
 * {@link turned}, overwritten by the next call. One loop for each: a single loop choosing the
 * target per pixel measured three times slower, called with each of the four.
 */
function turn(map: Uint8ClampedArray, how: 1 | 2 | 3 | 'mirror'): Uint8ClampedArray {
  const last = SIDE - 1;
  if (how === 1) {
    for (let y = 0; y < SIDE; y++)
      for (let x = 0; x < SIDE; x++) turned[x * SIDE + last - y] = map[y * SIDE + x]!;
  } else if (how === 2) {
    for (let y = 0; y < SIDE; y++)
      for (let x = 0; x < SIDE; x++) turned[(last - y) * SIDE + last - x] = map[y * SIDE + x]!;
  } else if (how === 3) {
    for (let y = 0; y < SIDE; y++)
      for (let x = 0; x < SIDE; x++) turned[(last - x) * SIDE + y] = map[y * SIDE + x]!;
  } else {
    for (let y = 0; y < SIDE; y++)
      for (let x = 0; x < SIDE; x++) turned[y * SIDE + last - x] = map[y * SIDE + x]!;
  }
  return turned;
}

/** Mean absolute difference of two RGB renditions, 0..255. */
function colourDistance(a: Uint8Array, b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
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
