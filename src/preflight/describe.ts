/**
 * The preflight's words for images: format names, sizes, and what a re-encode did, as the
 * refusal reasons, notes and report steps say them.
 *
 * @module
 */
import type { ImageInfo } from './analysis.js';

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

/** Why an image is re-encoded: to normalise it as it is, to convert its format, or to fit the limits. */
export type Purpose = 'normalise' | 'convert' | 'resize';

/** The note of a re-encode for the report: what it was and what came out. */
export function noteFor(purpose: Purpose, original: ImageInfo, prepared: ImageInfo): string {
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
export function sizeSteps(original: ImageInfo, prepared: ImageInfo): string[] {
  const steps: string[] = [];
  if (original.format !== prepared.format)
    steps.push(`${formatLabel(original.format)} → ${formatLabel(prepared.format)}`);
  if (original.width !== prepared.width || original.height !== prepared.height)
    steps.push(`resized ${original.width}×${original.height} → ${prepared.width}×${prepared.height}`);
  return steps;
}
