/**
 * The sharp work of the preflight for one source image, independent of where the file lives: decide
 * whether the service can take the bytes as they are, and otherwise produce bytes it can take.
 * Memoisation, caching and the worker pool live in `index.ts`, `cache.ts` and `pool.ts`.
 */
import type { Metadata, SharpOptions } from 'sharp';
import { loadSharp } from '../image/sharp.js';
import { sniff } from '../image/sniff.js';
import type { AnalyseLimits, AnalyseSource, Analysis, ImageInfo } from './analysis.js';
import { formatLabel } from './describe.js';
import { normalisation } from './normalisation.js';
import { reencode } from './reencode.js';
import { classify, refuseBySniff } from './refusals.js';

// The analysis's types, words and steps live in the files beside this one; their users import them
// from here, the preflight's one entry to the analysis.
export {
  type AnalyseLimits,
  type AnalyseSource,
  type Analysis,
  type ImageInfo,
  type PixelSample,
  SHRINK_ON_LOAD_PIXELS,
} from './analysis.js';
export { formatBytes, formatLabel } from './describe.js';
export { normalisation } from './normalisation.js';

const PASSTHROUGH = new Set<string>(['jpeg', 'png', 'webp']);
/**
 * Decodable formats we convert. An allowlist, not "whatever libvips can load": libvips also reads
 * SVG, FITS, its own .v format and more, none of which is a kitchen photo.
 */
const CONVERTIBLE = new Set<string>(['tiff', 'gif', 'heif', 'jp2', 'jxl', 'ppm']);

/**
 * 'error' rather than sharp's default 'warning': both refuse truncated and undecodable data
 * (measured: a cut JPEG, PNG and WebP all fail with either), but 'warning' also refuses the
 * harmless libjpeg warnings many camera files carry, such as extraneous bytes before a marker.
 */
const FAIL_ON = 'error' as const;

/** Runs the whole analysis of one source; throws only on programming or environment faults. */
export async function analyse(source: AnalyseSource, limits: AnalyseLimits): Promise<Analysis> {
  const sniffed = sniff(source.head);
  const early = refuseBySniff(sniffed);
  if (early) return early;

  const shrinks = sniffed.kind === 'jpeg' || sniffed.kind === 'webp';
  const base: SharpOptions = {
    failOn: FAIL_ON,
    limitInputPixels: shrinks ? limits.shrinkOnLoadPixels : limits.limitInputPixels,
  };
  const sharp = await loadSharp();
  let meta: Metadata;
  try {
    meta = await sharp(source.input, base).metadata();
  } catch (error) {
    return classify(error, sniffed, limits);
  }

  const format = formatOf(meta);
  if (meta.format === 'svg') return refuseBySniff({ kind: 'svg' }) as Analysis;
  if (!PASSTHROUGH.has(meta.format) && !CONVERTIBLE.has(meta.format)) {
    return {
      ok: false,
      code: 'unsupported_format',
      reason: `${formatLabel(format)} file, a format the service does not accept and this tool does not convert`,
    };
  }

  const oriented = meta.autoOrient ?? { width: meta.width, height: meta.height };
  const original: ImageInfo = { format, width: oriented.width, height: oriented.height, bytes: source.bytes };
  const tooLarge =
    source.bytes > limits.maxBytes || Math.max(original.width, original.height) > limits.maxSide;
  // Over sharp's own pixel limit only formats that shrink on load get this far: they must shrink.
  const tooManyPixels = meta.width * meta.height > limits.limitInputPixels;
  // An animated WebP is still WebP, but the service wants one still picture: take the first frame.
  const still = (meta.pages ?? 1) <= 1;
  const steps = normalisation(meta, limits.keepMetadata);

  try {
    if (PASSTHROUGH.has(meta.format) && still && !tooLarge && !tooManyPixels) {
      if (steps.length > 0) return await reencode(source, meta, original, limits, base, 'normalise', steps);
      // metadata() reads only the header (a cut JPEG passes it), so decode every pixel once. A tiny
      // resize is the cheapest full decode (measured ~2x faster than .stats(), ~2x than full raw):
      // JPEG and WebP shrink on load but still entropy-decode all of the data. Upright and 8-bit,
      // the rendition is the review's view of the source (`sample`).
      const { data, info } = await sharp(source.input, { ...base, autoOrient: true })
        .resize(64, 64, { fit: 'outside' })
        .raw({ depth: 'uchar' })
        .toBuffer({ resolveWithObject: true });
      const sample = { data, width: info.width, height: info.height, channels: info.channels };
      return { ok: true, action: 'as-is', original, prepared: original, steps: [], sample };
    }
    const purpose = tooLarge || tooManyPixels ? 'resize' : 'convert';
    return await reencode(source, meta, original, limits, base, purpose, normalisation(meta, false));
  } catch (error) {
    return classify(error, sniffed, limits);
  }
}

/** 'heif' is a container: name what is inside, as the user knows it (AVIF vs HEIC). */
function formatOf(meta: Metadata): string {
  if (meta.format === 'heif') return meta.compression === 'hevc' ? 'heic' : 'avif';
  return meta.format;
}
