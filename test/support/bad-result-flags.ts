/** The flag each kind of bad result the sandbox makes on purpose must raise (issue 15). */
import type { ReviewFlag } from '../../src/review/flags.js';
import type { BadResult } from '../../src/sandbox/index.js';

export const EXPECTED_FLAG: Record<BadResult, ReviewFlag> = {
  blank: 'blank',
  rotated: 'rotated',
  mirrored: 'mirrored',
  cropped: 'aspect_changed',
  unrelated: 'layout_changed',
  unchanged: 'unchanged',
};
