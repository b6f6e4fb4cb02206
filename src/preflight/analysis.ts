/**
 * What the preflight's analysis of one source is given and what it decides (`analyse.ts` does it):
 * types only, and the pixel limit of formats that shrink on load, so that the files doing the work
 * share them without importing each other.
 *
 * @module
 */
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
