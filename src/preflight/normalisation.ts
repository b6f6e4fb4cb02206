/**
 * What it takes to make an upload upright, 8-bit sRGB (or grey), one frame and free of metadata,
 * read from sharp's metadata: the preflight's steps, and the thumbnails' (`src/report/thumbs.ts`).
 *
 * @module
 */
import type { Metadata } from 'sharp';
import { isSrgbProfile, readIcc } from '../image/icc.js';

/** EXIF orientation → what turning the pixels upright does (1: nothing). */
const ORIENTATION: Record<number, string> = {
  2: 'mirrored',
  3: 'rotated 180°',
  4: 'flipped',
  5: 'mirrored and rotated 90°',
  6: 'rotated 90°',
  7: 'mirrored and rotated 270°',
  8: 'rotated 270°',
};

/** Sample formats wider than 8 bits per channel. */
const WIDE_DEPTHS = new Set(['ushort', 'short', 'uint', 'int', 'float', 'double', 'complex', 'dpcomplex']);

/**
 * What it takes to make an upload upright, 8-bit sRGB (or grey), one frame and free of metadata, in
 * words; empty when the image already is. With `keepMetadata`, nothing (the bytes go as they are).
 */
export function normalisation(meta: Metadata, keepMetadata: boolean): string[] {
  if (keepMetadata) return [];
  const steps: string[] = [];
  const turn = ORIENTATION[meta.orientation ?? 1];
  if (turn) steps.push(turn);
  const colour = colourStep(meta);
  if (colour) steps.push(colour);
  if ((meta.pages ?? 1) > 1) steps.push(`first frame of ${meta.pages}`);
  if (carriesMetadata(meta)) steps.push('metadata removed');
  return steps;
}

/** The colour conversion an image needs to be 8-bit sRGB or grey, in words; null when none. */
function colourStep(meta: Metadata): string | null {
  const icc = meta.icc ? readIcc(meta.icc) : null;
  const named = (what: string) => (icc?.description ? `${what} (${icc.description})` : what);
  const wide = WIDE_DEPTHS.has(meta.depth ?? 'uchar');
  const bits = wide ? ', 16-bit → 8-bit' : '';
  if (meta.space === 'cmyk') return `${named('CMYK')} → sRGB${bits}`;
  if (meta.space === 'lab' || meta.space === 'labs' || meta.space === 'labq') return `Lab → sRGB${bits}`;
  if (icc && icc.space === 'RGB' && !isSrgbProfile(icc))
    return `${icc.description ?? 'RGB profile'} → sRGB${bits}`;
  if (wide) return '16-bit → 8-bit';
  return null;
}

/** EXIF (often with GPS), XMP, IPTC or PNG text chunks: what normalising removes. */
function carriesMetadata(meta: Metadata): boolean {
  return Boolean(meta.exif || meta.xmp || meta.iptc || (meta.comments && meta.comments.length > 0));
}
