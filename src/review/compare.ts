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
import { DEFAULT_THRESHOLD, type Review, type ReviewFlag } from './flags.js';
import { SIDE } from './resample.js';
import type { Signature } from './signature.js';

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
