/**
 * Result review (issue 15): does a result look like what the service promises (the same kitchen,
 * layout and camera angle, restyled)? Signals from small renditions of the uploaded source and the
 * result, made with sharp, compared with structural similarity (ssim.js):
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
import sharp from 'sharp';
import { ssim } from 'ssim.js';

/** Why a result is worth a look. */
export type ReviewFlag =
  | 'layout_changed'
  | 'rotated'
  | 'mirrored'
  | 'aspect_changed'
  | 'blank'
  | 'transparent'
  | 'unchanged'
  | 'duplicate';

/** Every flag, in a fixed order (the item table keeps them as bits in it). */
export const REVIEW_FLAGS: readonly ReviewFlag[] = [
  'layout_changed',
  'rotated',
  'mirrored',
  'aspect_changed',
  'blank',
  'transparent',
  'unchanged',
  'duplicate',
];

/** An item's review: report.json's `review` field. */
export interface Review {
  /** 0..1, the lowest of the signals' scores (1: nothing looks wrong). */
  score: number;
  flags: ReviewFlag[];
}

/** A signal under this score is a flag. */
export const DEFAULT_THRESHOLD = 0.5;

/** Side of the square renditions compared (both images are squeezed to it). */
const SIDE = 64;

/** What the review knows of an image, computed once: small, about 5 KB. */
export interface Signature {
  width: number;
  height: number;
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
 * Reads an image (file path or bytes) into its {@link Signature}, orientation applied: one decode
 * to 64×64 (shrink-on-load for JPEG/WebP), every measure from those pixels.
 */
export async function signature(input: string | Buffer): Promise<Signature> {
  const image = sharp(input, { failOn: 'error' });
  const meta = await image.metadata();
  const swap = (meta.orientation ?? 1) >= 5;
  const { data } = await image
    .rotate()
    .resize(SIDE, SIDE, { fit: 'fill' })
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const n = SIDE * SIDE;
  const grey = new Uint8Array(n);
  const colour = new Uint8Array(n * 3);
  const sum = [0, 0, 0, 0];
  const squares = [0, 0, 0];
  const histogram = new Uint32Array(256);
  for (let i = 0; i < n; i++) {
    const [r, g, b, a] = [data[4 * i]!, data[4 * i + 1]!, data[4 * i + 2]!, data[4 * i + 3]!];
    colour[3 * i] = r;
    colour[3 * i + 1] = g;
    colour[3 * i + 2] = b;
    const y = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
    grey[i] = y;
    histogram[y]!++;
    sum[0]! += r;
    sum[1]! += g;
    sum[2]! += b;
    sum[3]! += a;
    squares[0]! += r * r;
    squares[1]! += g * g;
    squares[2]! += b * b;
  }
  const mean = sum.map((v) => v / n);
  const spread = Math.max(...[0, 1, 2].map((c) => Math.sqrt(Math.max(0, squares[c]! / n - mean[c]! ** 2))));
  let entropy = 0;
  for (const count of histogram) if (count > 0) entropy -= (count / n) * Math.log2(count / n);
  return {
    width: (swap ? meta.height : meta.width) ?? SIDE,
    height: (swap ? meta.width : meta.height) ?? SIDE,
    edges: sobel(grey, SIDE),
    colour,
    spread,
    entropy,
    opacity: mean[3]! / 255,
    // Structure (difference hash of the grey image) and colour (each quarter's mean, 16 levels a
    // channel): two styles of one photo, or two tints of one layout, share their structure only.
    hash: `${differenceHash(grey)}-${quarterColours(colour)}`,
  };
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
        value: Math.max(...[1, 2, 3].map((q) => similarity(source.edges, rotate(result.edges, q)))),
      },
      { flag: 'mirrored' as const, value: similarity(source.edges, mirror(result.edges)) },
    ];
    const best = turned.reduce((a, b) => (b.value > a.value ? b : a));
    // Turned, it matches better than as it is: the result was turned (its layout is otherwise
    // there). A restyle keeps the edges where they were, so as it is it always matches best.
    const isTurned = best.value > plain + 0.05 && best.value > 0.35;
    scores.rotated = best.flag === 'rotated' && isTurned ? 0 : 1;
    scores.mirrored = best.flag === 'mirrored' && isTurned ? 0 : 1;
    scores.layout_changed = isTurned ? 1 : ramp(plain, 0.25, 0.55);
    const ratio = result.width / result.height / (source.width / source.height);
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

/** SSIM of two SIDE×SIDE grey maps. */
function similarity(a: Uint8ClampedArray, b: Uint8ClampedArray): number {
  return ssim(rgba(a), rgba(b), { ssim: 'bezkrovny', downsample: false, windowSize: 8 }).mssim;
}

function rgba(grey: Uint8ClampedArray): { data: Uint8ClampedArray; width: number; height: number } {
  const data = new Uint8ClampedArray(grey.length * 4);
  for (let i = 0; i < grey.length; i++) {
    data[4 * i] = data[4 * i + 1] = data[4 * i + 2] = grey[i]!;
    data[4 * i + 3] = 255;
  }
  return { data, width: SIDE, height: SIDE };
}

/** Sobel gradient magnitude, scaled to 0..255 by the image's own strongest edge. */
function sobel(grey: Uint8Array, side: number): Uint8ClampedArray {
  const magnitude = new Float32Array(side * side);
  let max = 1e-6;
  const at = (x: number, y: number) =>
    grey[Math.min(side - 1, Math.max(0, y)) * side + Math.min(side - 1, Math.max(0, x))]!;
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const gx =
        at(x + 1, y - 1) +
        2 * at(x + 1, y) +
        at(x + 1, y + 1) -
        at(x - 1, y - 1) -
        2 * at(x - 1, y) -
        at(x - 1, y + 1);
      const gy =
        at(x - 1, y + 1) +
        2 * at(x, y + 1) +
        at(x + 1, y + 1) -
        at(x - 1, y - 1) -
        2 * at(x, y - 1) -
        at(x + 1, y - 1);
      const m = Math.hypot(gx, gy);
      magnitude[y * side + x] = m;
      if (m > max) max = m;
    }
  }
  const out = new Uint8ClampedArray(side * side);
  for (let i = 0; i < out.length; i++) out[i] = (magnitude[i]! / max) * 255;
  return out;
}

/** The map turned `quarters` × 90° clockwise. */
function rotate(map: Uint8ClampedArray, quarters: number): Uint8ClampedArray {
  let current = map;
  for (let q = 0; q < quarters; q++) {
    const next = new Uint8ClampedArray(current.length);
    for (let y = 0; y < SIDE; y++)
      for (let x = 0; x < SIDE; x++) next[x * SIDE + (SIDE - 1 - y)] = current[y * SIDE + x]!;
    current = next;
  }
  return current;
}

/** The map mirrored left to right. */
function mirror(map: Uint8ClampedArray): Uint8ClampedArray {
  const out = new Uint8ClampedArray(map.length);
  for (let y = 0; y < SIDE; y++)
    for (let x = 0; x < SIDE; x++) out[y * SIDE + x] = map[y * SIDE + (SIDE - 1 - x)]!;
  return out;
}

/** Mean absolute difference of two RGB renditions, 0..255. */
function colourDistance(a: Uint8Array, b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
}

/** The mean colour of each quarter of the image, 4 bits a channel, as hex. */
function quarterColours(colour: Uint8Array): string {
  const sums = new Float64Array(12);
  const half = SIDE / 2;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      const q = (y < half ? 0 : 2) + (x < half ? 0 : 1);
      for (let c = 0; c < 3; c++) sums[q * 3 + c]! += colour[3 * (y * SIDE + x) + c]!;
    }
  }
  return [...sums].map((v) => Math.floor(v / (half * half) / 16).toString(16)).join('');
}

/** dHash: the grey image in 9×8 block means; each block brighter than its right neighbour is a 1 bit. */
function differenceHash(grey: Uint8Array): string {
  const cells = new Float64Array(9 * 8);
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++)
      cells[Math.floor((y * 8) / SIDE) * 9 + Math.floor((x * 9) / SIDE)]! += grey[y * SIDE + x]!;
  }
  let bits = '';
  for (let y = 0; y < 8; y++)
    for (let x = 0; x < 8; x++) bits += cells[y * 9 + x]! > cells[y * 9 + x + 1]! ? '1' : '0';
  return BigInt(`0b${bits}`).toString(16).padStart(16, '0');
}
