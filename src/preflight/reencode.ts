/**
 * The preflight's re-encode of a source the service cannot take as it is: normalised, converted
 * or shrunk until its bytes fit, in one streaming sharp pipeline per attempt.
 *
 * @module
 */
import type { Metadata, Sharp, SharpOptions } from 'sharp';
import type { UploadFormat } from '../image/format.js';
import { loadSharp } from '../image/sharp.js';
import { webpIsLossless } from '../image/sniff.js';
import type { AnalyseLimits, AnalyseSource, Analysis, ImageInfo } from './analysis.js';
import { formatBytes, formatLabel, noteFor, type Purpose, sizeSteps } from './describe.js';

interface Attempt {
  scale: number;
  quality: number;
}

/**
 * Re-encodes until the bytes fit: the first attempt is the one that almost always fits and runs as
 * one streaming sharp pipeline (the fast path the benchmark measures); later attempts lower the
 * quality, then shrink by 0.8 per step.
 */
export async function reencode(
  source: AnalyseSource,
  meta: Metadata,
  original: ImageInfo,
  limits: AnalyseLimits,
  base: SharpOptions,
  purpose: Purpose,
  steps: string[],
): Promise<Analysis> {
  const sharp = await loadSharp();
  const target =
    purpose === 'normalise'
      ? (meta.format as UploadFormat)
      : (await usesAlpha(source, meta, base))
        ? 'png'
        : 'jpeg';
  const lossless =
    target === 'png' || (target === 'webp' && purpose === 'normalise' && webpIsLossless(source.head));
  const firstQuality = purpose === 'normalise' ? 92 : 90;
  // Grey stays grey (8-bit); everything else becomes 8-bit sRGB, converted through its profile.
  const grey = meta.space === 'b-w' || meta.space === 'grey16';
  const attempts: Attempt[] = lossless
    ? [1, 0.8, 0.64, 0.512, 0.41, 0.328].map((scale) => ({ scale, quality: 100 }))
    : [
        { scale: 1, quality: firstQuality },
        { scale: 1, quality: 80 },
        { scale: 1, quality: 70 },
        ...[0.8, 0.64, 0.512, 0.41, 0.328].map((scale) => ({ scale, quality: 70 })),
      ];
  const longSide = Math.max(original.width, original.height);
  const fitSide = Math.min(longSide, limits.maxSide);
  let smallest = Number.POSITIVE_INFINITY;

  for (const attempt of attempts) {
    const box = Math.max(1, Math.floor(fitSide * attempt.scale));
    // autoOrient turns the pixels upright, so dropping the EXIF block (sharp writes no metadata by
    // default) cannot leave the picture sideways. Without keepIccProfile sharp converts through the
    // embedded profile (or its CMYK default) and writes none: untagged 8-bit sRGB.
    let image: Sharp = sharp(source.input, { ...base, autoOrient: true });
    if (box < longSide)
      image = image.resize({ width: box, height: box, fit: 'inside', withoutEnlargement: true });
    image = image.toColourspace(grey ? 'b-w' : 'srgb');
    image = encoder(image, target, attempt.quality, lossless, meta);
    const { data, info } = await image.toBuffer({ resolveWithObject: true });
    if (data.length <= limits.maxBytes) {
      const prepared: ImageInfo = {
        format: target,
        width: info.width,
        height: info.height,
        bytes: data.length,
      };
      const action = purpose === 'resize' ? 'resized' : 'converted';
      const note = noteFor(purpose, original, prepared);
      return {
        ok: true,
        action,
        original,
        prepared,
        data,
        note,
        steps: [...steps, ...sizeSteps(original, prepared)],
      };
    }
    smallest = Math.min(smallest, data.length);
  }
  return {
    ok: false,
    code: 'too_large',
    reason:
      `${formatLabel(original.format)} image of ${original.width}×${original.height} / ${formatBytes(original.bytes)} ` +
      `stays over the ${formatBytes(limits.maxBytes)} limit even re-encoded and shrunk (smallest try: ${formatBytes(smallest)})`,
  };
}

/**
 * Whether transparency is really used. An alpha channel alone does not say so: libvips decodes
 * every GIF as RGBA, and many PNGs carry an all-opaque alpha; those are better sent as JPEG.
 * Measured on a downscale (a box-like 'linear' kernel, no overshoot) so that any transparent
 * area still pulls some alpha below 255, at a fraction of the cost of full-size statistics.
 */
async function usesAlpha(source: AnalyseSource, meta: Metadata, base: SharpOptions): Promise<boolean> {
  if (!meta.hasAlpha) return false;
  const sharp = await loadSharp();
  const { isOpaque } = await sharp(source.input, base)
    .resize(256, 256, { fit: 'inside', kernel: 'linear', withoutEnlargement: true })
    .stats();
  return !isOpaque;
}

function encoder(
  image: Sharp,
  format: UploadFormat,
  quality: number,
  lossless: boolean,
  meta: Metadata,
): Sharp {
  if (format === 'png') return image.png();
  if (format === 'webp') return lossless ? image.webp({ lossless: true }) : image.webp({ quality });
  // Keep full-resolution colour when the source had it (re-encoding a 4:4:4 photo at 4:2:0 blurs edges).
  const chromaSubsampling = meta.format === 'jpeg' && meta.chromaSubsampling === '4:4:4' ? '4:4:4' : '4:2:0';
  return image.jpeg({ quality, chromaSubsampling });
}
