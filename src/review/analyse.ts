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
/** Side of the colour renditions for the unchanged check. */
const COLOUR_SIDE = 24;

/** What the review knows of an image, computed once: small, about 5 KB. */
export interface Signature {
  width: number;
  height: number;
  /** Sobel edge magnitude of a SIDE×SIDE grey rendition, 0..255. */
  edges: Uint8ClampedArray;
  /** COLOUR_SIDE² RGB pixels. */
  colour: Uint8Array;
  /** Largest channel standard deviation (0: uniform). */
  spread: number;
  /** sharp's entropy of the grey image, bits. */
  entropy: number;
  /** Mean alpha 0..1 (1 without alpha). */
  opacity: number;
  /** Perceptual hash: a 64-bit difference hash of the grey image and the mean colour, as text. */
  hash: string;
}

/** Reads an image (file path or bytes) into its {@link Signature}, orientation applied. */
export async function signature(input: string | Buffer): Promise<Signature> {
  const image = sharp(input, { failOn: 'error' }).rotate();
  const meta = await image.metadata();
  const swap = (meta.orientation ?? 1) >= 5;
  const width = (swap ? meta.height : meta.width) ?? 0;
  const height = (swap ? meta.width : meta.height) ?? 0;
  // One small decode (shrink-on-load for JPEG/WebP), then every rendition from it.
  const small = await image
    .clone()
    .resize(128, 128, { fit: 'fill' })
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const rgba = { raw: { width: 128, height: 128, channels: 4 as const } };
  const [grey, colour, stats, hashGrid] = await Promise.all([
    sharp(small.data, rgba).removeAlpha().greyscale().resize(SIDE, SIDE, { fit: 'fill' }).raw().toBuffer(),
    sharp(small.data, rgba).removeAlpha().resize(COLOUR_SIDE, COLOUR_SIDE, { fit: 'fill' }).raw().toBuffer(),
    sharp(small.data, rgba).stats(),
    sharp(small.data, rgba).removeAlpha().greyscale().resize(9, 8, { fit: 'fill' }).raw().toBuffer(),
  ]);
  const channels = stats.channels;
  const alpha = channels[3];
  return {
    width,
    height,
    edges: sobel(grey, SIDE),
    colour: new Uint8Array(colour),
    spread: Math.max(...channels.slice(0, 3).map((c) => c.stdev)),
    entropy: stats.entropy,
    opacity: alpha ? alpha.mean / 255 : 1,
    // Structure (dHash of the grey image) and colour (the mean, 16 levels a channel): two styles of
    // one photo share their structure, not their colours.
    hash: `${differenceHash(hashGrid)}-${channels
      .slice(0, 3)
      .map((c) => Math.floor(c.mean / 16).toString(16))
      .join('')}`,
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
  return ssim(rgba(a), rgba(b), { ssim: 'weber', downsample: false, windowSize: 8 }).mssim;
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
function sobel(grey: Buffer, side: number): Uint8ClampedArray {
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

/** dHash: each of 8×8 cells brighter than its right neighbour is a 1 bit; 16 hex digits. */
function differenceHash(grid: Buffer): string {
  let bits = '';
  for (let y = 0; y < 8; y++)
    for (let x = 0; x < 8; x++) bits += grid[y * 9 + x]! > grid[y * 9 + x + 1]! ? '1' : '0';
  return BigInt(`0b${bits}`).toString(16).padStart(16, '0');
}
