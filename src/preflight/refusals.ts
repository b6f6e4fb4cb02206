/**
 * The preflight's refusals in plain words: of what the leading bytes already show is no photo
 * (`refuseBySniff`), and of a sharp failure (`classify`).
 *
 * @module
 */
import type { Sniffed } from '../image/sniff.js';
import type { AnalyseLimits, Analysis } from './analysis.js';
import { formatLabel } from './describe.js';

/** The refusal of a source whose leading bytes show it is no photo; undefined when they do not. */
export function refuseBySniff(sniffed: Sniffed): Analysis | undefined {
  switch (sniffed.kind) {
    case 'empty':
      return { ok: false, code: 'unsupported_format', reason: 'empty file (0 bytes), not an image' };
    case 'text':
      return { ok: false, code: 'unsupported_format', reason: 'a text file, not an image' };
    case 'svg':
      // sharp could rasterise it, but a drawing is not a kitchen photo; export it as JPEG or PNG.
      return {
        ok: false,
        code: 'unsupported_format',
        reason: 'an SVG drawing, not a photo (export it as JPEG or PNG)',
      };
    case 'pdf':
      return { ok: false, code: 'unsupported_format', reason: 'a PDF document, not an image' };
    case 'bmp':
      return {
        ok: false,
        code: 'unsupported_format',
        reason: 'a BMP image, which this build of sharp cannot read (save it as JPEG or PNG)',
      };
    default:
      return undefined;
  }
}

/** Turns a sharp failure into a refusal in plain words. */
export function classify(error: unknown, sniffed: Sniffed, limits: AnalyseLimits): Analysis {
  const message = error instanceof Error ? error.message : String(error);
  const detail = message.split('\n')[0] ?? message;
  if (/exceeds pixel limit/i.test(message)) {
    const shrinks = sniffed.kind === 'jpeg' || sniffed.kind === 'webp';
    const megapixels = Math.floor(
      (shrinks ? limits.shrinkOnLoadPixels : limits.limitInputPixels) / 1_000_000,
    );
    const size =
      sniffed.width !== undefined && sniffed.height !== undefined
        ? `image is ${sniffed.width}×${sniffed.height} pixels`
        : 'image has too many pixels';
    return { ok: false, code: 'too_large', reason: `${size}, over the ${megapixels} megapixel safety limit` };
  }
  if (sniffed.kind === 'heic') {
    // The prebuilt sharp reads AVIF but not HEVC-coded HEIF (lovell/sharp#4050).
    return {
      ok: false,
      code: 'unsupported_format',
      reason: 'a HEIF/HEIC image that this build of sharp cannot decode (convert it to JPEG first)',
    };
  }
  if (/unsupported image format/i.test(message)) {
    return { ok: false, code: 'unsupported_format', reason: 'not an image in a format this tool can read' };
  }
  if (/corrupt header/i.test(message)) {
    return {
      ok: false,
      code: 'corrupt_image',
      reason: `${sniffed.kind === 'unknown' ? 'an image file' : `a ${formatLabel(sniffed.kind)} file`} with a damaged header (${detail})`,
    };
  }
  return { ok: false, code: 'corrupt_image', reason: `the image data is damaged or cut short (${detail})` };
}
