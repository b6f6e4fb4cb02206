/**
 * The sharp work of the preflight for one source image, independent of where the file lives: decide
 * whether the service can take the bytes as they are, and otherwise produce bytes it can take.
 * Memoisation, caching and the worker pool live in `index.ts`, `cache.ts` and `pool.ts`.
 */
import sharp, { type Metadata, type Sharp, type SharpOptions } from 'sharp';
import type { UploadFormat } from '../image/format.js';
import { isSrgbProfile, readIcc } from '../image/icc.js';
import { type Sniffed, sniff, webpIsLossless } from '../image/sniff.js';
import type { RejectCode } from '../types.js';

/** Format, oriented pixel size and byte size of an image. */
export interface ImageInfo {
  /** Detected from the content: 'jpeg', 'png', 'webp', 'tiff', 'gif', 'avif', 'heic', … */
  format: string;
  /** Width as displayed, i.e. after EXIF orientation. */
  width: number;
  /** Height as displayed, i.e. after EXIF orientation. */
  height: number;
  bytes: number;
}

/** What the analysis of one source decided; file names are added by the caller. */
export type Analysis =
  | {
      ok: true;
      action: 'as-is' | 'converted' | 'resized';
      original: ImageInfo;
      prepared: ImageInfo;
      /** The re-encoded bytes, absent for 'as-is'. The caller writes them out and drops them. */
      data?: Buffer;
      note?: string;
      /**
       * What was done to the image, in words (`rotated 90°`, `CMYK → sRGB`, `metadata removed`,
       * `resized 6000×4000 → 4096×2731`); empty for 'as-is'. report.json's `preflight`.
       */
      steps: string[];
      /** A rendition of the upload, 64 px on its short side, upright, 8-bit: made for 'as-is' only (see {@link PixelSample}). */
      sample?: PixelSample;
    }
  | { ok: false; code: RejectCode; reason: string };

/**
 * The pixels of the small rendition the as-is check decodes anyway: handed to the result review
 * (`src/review`) as the source's rendition, so that it does not decode the source again.
 */
export interface PixelSample {
  data: Buffer;
  width: number;
  height: number;
  channels: number;
}

/** Limits the analysis works to (validated by the caller). */
export interface AnalyseLimits {
  maxBytes: number;
  maxSide: number;
  /**
   * Send images the service can take as they are, metadata, orientation tag and colour profile
   * included (the behaviour before uploads were normalised); conversions and resizes still normalise.
   */
  keepMetadata: boolean;
  limitInputPixels: number;
  /** The pixel limit of JPEG and WebP (they shrink on load): {@link SHRINK_ON_LOAD_PIXELS} unless the caller set a limit. */
  shrinkOnLoadPixels: number;
}

/**
 * Pixel limit for JPEG and WebP, which shrink on load (libvips decodes them at 1/2 to 1/8 scale
 * when the output is that much smaller), so a gigapixel scan is resized in bounded memory.
 */
export const SHRINK_ON_LOAD_PIXELS = 1_100_000_000;

/** The source: its bytes in memory (normal case) or a path for sharp to read (very large files). */
export interface AnalyseSource {
  input: Buffer | string;
  /** The leading bytes, for magic-byte sniffing. */
  head: Buffer;
  bytes: number;
}

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

const LABEL: Record<string, string> = {
  jpeg: 'JPEG',
  png: 'PNG',
  webp: 'WebP',
  tiff: 'TIFF',
  gif: 'GIF',
  avif: 'AVIF',
  heic: 'HEIF/HEIC',
  heif: 'HEIF',
  svg: 'SVG',
  jp2: 'JPEG 2000',
  jxl: 'JPEG XL',
  ppm: 'PPM',
  pdf: 'PDF',
  bmp: 'BMP',
};

/** Human name of a format ('jpeg' → 'JPEG'). */
export function formatLabel(format: string): string {
  return LABEL[format] ?? format.toUpperCase();
}

/** Decimal megabytes, as the service's "10 MB" limit is checked against 10^7 bytes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1_000_000) return `${Math.max(1, Math.round(bytes / 1000))} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

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

type Purpose = 'normalise' | 'convert' | 'resize';

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

interface Attempt {
  scale: number;
  quality: number;
}

/**
 * Re-encodes until the bytes fit: the first attempt is the one that almost always fits and runs as
 * one streaming sharp pipeline (the fast path the benchmark measures); later attempts lower the
 * quality, then shrink by 0.8 per step.
 */
async function reencode(
  source: AnalyseSource,
  meta: Metadata,
  original: ImageInfo,
  limits: AnalyseLimits,
  base: SharpOptions,
  purpose: Purpose,
  steps: string[],
): Promise<Analysis> {
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

function noteFor(purpose: Purpose, original: ImageInfo, prepared: ImageInfo): string {
  const from = `${original.width}×${original.height} / ${formatBytes(original.bytes)}`;
  const to = `${prepared.width}×${prepared.height} / ${formatBytes(prepared.bytes)}`;
  const formats =
    original.format === prepared.format
      ? ''
      : ` (${formatLabel(original.format)} → ${formatLabel(prepared.format)})`;
  if (purpose === 'normalise') return `normalised, re-encoded ${from} to ${to}`;
  if (purpose === 'convert')
    return `converted from ${formatLabel(original.format)} to ${formatLabel(prepared.format)}, ${to}`;
  return `resized from ${from} to ${to}${formats}`;
}

/** The format and size changes of a re-encode, in words (`TIFF → JPEG`, `resized 6000×4000 → 4096×2731`). */
function sizeSteps(original: ImageInfo, prepared: ImageInfo): string[] {
  const steps: string[] = [];
  if (original.format !== prepared.format)
    steps.push(`${formatLabel(original.format)} → ${formatLabel(prepared.format)}`);
  if (original.width !== prepared.width || original.height !== prepared.height)
    steps.push(`resized ${original.width}×${original.height} → ${prepared.width}×${prepared.height}`);
  return steps;
}

/** EXIF (often with GPS), XMP, IPTC or PNG text chunks: what normalising removes. */
function carriesMetadata(meta: Metadata): boolean {
  return Boolean(meta.exif || meta.xmp || meta.iptc || (meta.comments && meta.comments.length > 0));
}

/** 'heif' is a container: name what is inside, as the user knows it (AVIF vs HEIC). */
function formatOf(meta: Metadata): string {
  if (meta.format === 'heif') return meta.compression === 'hevc' ? 'heic' : 'avif';
  return meta.format;
}

function refuseBySniff(sniffed: Sniffed): Analysis | undefined {
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
function classify(error: unknown, sniffed: Sniffed, limits: AnalyseLimits): Analysis {
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
