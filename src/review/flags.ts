/**
 * The review's verdict as the rest of the tool sees it: the flag names, an item's `review` field and
 * the default threshold. Apart from `signature.ts` (which loads sharp) so that the journal, the item
 * table and the reports can name a verdict without loading the image code.
 */

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
export const ALL_REVIEW_FLAGS: readonly ReviewFlag[] = [
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
