/**
 * The review's signals (issue 15) against the sandbox's own results: good restyles of every style
 * pass, and each kind of bad result the sandbox makes on purpose is flagged with its reason. The
 * sandbox-run acceptance figures (≥ 95 % of bad flagged, ≤ 3 % of good) are measured the same way.
 */
import { describe, expect, it } from 'vitest';
import { DuplicateIndex, reviewResult, signature } from '../../src/review/analyse.js';
import { BAD_RESULTS, createRng } from '../../src/sandbox/faults.js';
import { badResult, renderResult } from '../../src/sandbox/images.js';
import { type KitchenLook, kitchenImage } from '../helpers/images.js';
import { EXPECTED_FLAG } from './kinds.js';

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

async function source(i: number): Promise<Buffer> {
  const looks: KitchenLook[] = ['classic', 'tinted', 'mosaic'];
  const sizes: Array<[number, number]> = [
    [640, 480],
    [480, 640],
    [800, 450],
    [600, 600],
  ];
  const [width, height] = sizes[i % 4]!;
  return kitchenImage({ look: looks[i % 3]!, seed: i + 1, width, height });
}

describe('result review', () => {
  it('passes good restyles and flags each kind of bad result with its reason', async () => {
    const rng = createRng(15);
    const good: string[][] = [];
    const missed: string[] = [];
    for (let i = 0; i < 48; i++) {
      const input = await source(i);
      const style = STYLES[i % STYLES.length]!;
      const src = await signature(input);
      const ok = await renderResult(input, 'change-style', style);
      good.push(reviewResult(src, await signature(ok.data), { module: 'change-style' }).flags);
      const kind = BAD_RESULTS[i % BAD_RESULTS.length]!;
      const bad = await badResult(kind, input, 'change-style', style, rng);
      const review = reviewResult(src, await signature(bad.data), { module: 'change-style' });
      if (!review.flags.includes(EXPECTED_FLAG[kind])) missed.push(`${i} ${kind}: ${JSON.stringify(review)}`);
      expect(review.score).toBeLessThan(0.5);
    }
    expect(
      good.filter((flags) => flags.length > 0),
      JSON.stringify(good),
    ).toEqual([]);
    expect(missed).toEqual([]);
  }, 120_000);

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
});
