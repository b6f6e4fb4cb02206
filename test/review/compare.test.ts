/**
 * The review's signals (issue 15) against the sandbox's own results: good restyles of every style
 * pass, and each kind of bad result the sandbox makes on purpose is flagged with its reason. The
 * sandbox-run acceptance figures (≥ 95 % of bad flagged, ≤ 3 % of good) are measured the same way.
 */
import { bezkrovnySsim } from 'ssim.js/dist/bezkrovnySsim.js';
import { describe, expect, it } from 'vitest';
import { DuplicateIndex, reviewResult, similarity } from '../../src/review/compare.js';
import { signature, signatureOfPixels } from '../../src/review/signature.js';
import { BAD_RESULTS, createRng } from '../../src/sandbox/faults.js';
import { badResult, renderResult } from '../../src/sandbox/images.js';
import { EXPECTED_FLAG } from '../support/bad-result-flags.js';
import { type KitchenLook, kitchenImage } from '../support/images.js';

const STYLES = [
  'scandinavian',
  'industrial',
  'japandi',
  'farmhouse',
  'modern',
  'coastal',
  'mediterranean',
  'minimalist',
];

/** Sources over the size the review decodes in its own process (sharp decodes their results). */
const LARGE: Array<[number, number]> = [
  [640, 480],
  [480, 640],
  [800, 450],
  [600, 600],
];

/** Sources under it (`src/review/decode.ts` decodes their results). */
const SMALL: Array<[number, number]> = [
  [320, 240],
  [240, 320],
  [320, 180],
  [300, 300],
];

async function source(i: number, sizes = LARGE): Promise<Buffer> {
  const looks: KitchenLook[] = ['classic', 'tinted', 'mosaic'];
  const [width, height] = sizes[i % 4]!;
  return kitchenImage({ look: looks[i % 3]!, seed: i + 1, width, height });
}

describe('result review', () => {
  it.each([
    ['large', LARGE],
    ['small', SMALL],
  ])(
    'passes good restyles and flags each kind of bad result with its reason (%s images)',
    async (_, sizes) => {
      const rng = createRng(15);
      const good: string[][] = [];
      const missed: string[] = [];
      for (let i = 0; i < 48; i++) {
        const input = await source(i, sizes);
        const style = STYLES[i % STYLES.length]!;
        const src = await signature(input);
        const ok = await renderResult(input, 'change-style', style);
        good.push(reviewResult(src, await signature(ok.data), { module: 'change-style' }).flags);
        const kind = BAD_RESULTS[i % BAD_RESULTS.length]!;
        const bad = await badResult(kind, input, 'change-style', style, rng);
        const review = reviewResult(src, await signature(bad.data), { module: 'change-style' });
        if (!review.flags.includes(EXPECTED_FLAG[kind]))
          missed.push(`${i} ${kind}: ${JSON.stringify(review)}`);
        expect(review.score).toBeLessThan(0.5);
      }
      expect(
        good.filter((flags) => flags.length > 0),
        JSON.stringify(good),
      ).toEqual([]);
      expect(missed).toEqual([]);
    },
    120_000,
  );

  it('squeezes a rendition of any size and 1 to 4 channels to 64×64 by area averaging', () => {
    const rng = createRng(3);
    for (const [width, height, channels] of [
      [240, 180, 4],
      [85, 64, 3],
      [64, 85, 1],
      [100, 64, 2],
      [64, 64, 3],
      [50, 40, 4],
    ] as const) {
      const data = Uint8Array.from({ length: width * height * channels }, () => Math.floor(rng() * 256));
      const { colour, opacity } = signatureOfPixels({ data, width, height, channels });
      // Each cell's mean, from the overlap of every pixel with it, on the exact grid.
      const overlap = (p: number, cell: number, size: number) =>
        Math.max(0, Math.min(p + 1, ((cell + 1) * size) / 64) - Math.max(p, (cell * size) / 64));
      let worst = 0;
      for (let cy = 0; cy < 64; cy++) {
        for (let cx = 0; cx < 64; cx++) {
          for (let c = 0; c < 3; c++) {
            let sum = 0;
            let area = 0;
            for (
              let y = Math.floor((cy * height) / 64);
              y < Math.min(height, Math.ceil(((cy + 1) * height) / 64));
              y++
            )
              for (
                let x = Math.floor((cx * width) / 64);
                x < Math.min(width, Math.ceil(((cx + 1) * width) / 64));
                x++
              ) {
                const weight = overlap(x, cx, width) * overlap(y, cy, height);
                sum += data[(y * width + x) * channels + (channels < 3 ? 0 : c)]! * weight;
                area += weight;
              }
            worst = Math.max(worst, Math.abs(colour[3 * (cy * 64 + cx) + c]! - sum / area));
          }
        }
      }
      expect(worst, `${width}×${height}×${channels}`).toBeLessThanOrEqual(0.5 + 1e-6);
      if (channels % 2 === 1) expect(opacity).toBe(1);
    }
  });

  it('flags a second item whose result is the same image as an earlier one', async () => {
    const index = new DuplicateIndex();
    const a = await signature(await source(1));
    const b = await signature(await source(1));
    const c = await signature(await source(2));
    expect(index.check('a', a.hash)).toBeNull();
    expect(index.check('b', b.hash)).toBe('a');
    expect(index.check('c', c.hash)).toBeNull();
    expect(index.check('a', a.hash)).toBeNull();
  });

  it('measures structural similarity as ssim.js does (Bezkrovny, 8×8 windows), to the last bit', async () => {
    const rng = createRng(7);
    const maps = [
      ...(await Promise.all([1, 2, 3].map(async (i) => (await signature(await source(i))).edges))),
      Uint8ClampedArray.from({ length: 64 * 64 }, () => Math.floor(rng() * 256)),
      Uint8ClampedArray.from({ length: 64 * 64 }, (_, i) => (i % 64 < 32 ? 0 : 255)),
      new Uint8ClampedArray(64 * 64),
    ];
    const options = { windowSize: 8, bitDepth: 8, k1: 0.01, k2: 0.03 } as Parameters<typeof bezkrovnySsim>[2];
    const matrix = (map: Uint8ClampedArray) => ({ data: Array.from(map), width: 64, height: 64 });
    let compared = 0;
    for (const a of maps) {
      for (const b of maps) {
        const windows = bezkrovnySsim(matrix(a), matrix(b), options).data;
        let sum = 0;
        for (const value of windows) sum += value;
        expect(similarity(a, b)).toBe(sum / windows.length);
        compared++;
      }
    }
    expect(compared).toBe(36);
  });
});
