/**
 * Format detection from the first bytes of a file. sharp decides what it can decode, but its
 * refusals are terse ("unsupported image format", "corrupt header") and a pixel bomb is refused
 * before sharp tells us its size, so the preflight reads the magic bytes itself to say in words
 * what the file is (a text file, a BMP, an HEIC photo) and how big a refused image would have been.
 */
import { jpegFrame } from './format.js';

/** What the magic bytes say a file is. */
export type SniffedKind =
  | 'empty'
  | 'jpeg'
  | 'png'
  | 'webp'
  | 'gif'
  | 'tiff'
  | 'avif'
  | 'heic'
  | 'bmp'
  | 'svg'
  | 'pdf'
  | 'text'
  | 'unknown';

/** The sniffed kind plus the pixel size when the header states it cheaply (PNG, GIF, JPEG, WebP). */
export interface Sniffed {
  kind: SniffedKind;
  width?: number;
  height?: number;
}

/** How many leading bytes {@link sniff} looks at; enough for a JPEG's SOF behind a typical EXIF block. */
export const SNIFF_BYTES = 256 * 1024;

const HEIC_BRANDS = new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'hevm', 'hevs']);
const AVIF_BRANDS = new Set(['avif', 'avis']);

/** Identifies a file from its leading bytes (pass at least the first {@link SNIFF_BYTES} when available). */
export function sniff(head: Uint8Array): Sniffed {
  const b = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  if (b.length === 0) return { kind: 'empty' };
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) {
    const frame = jpegFrame(b);
    return frame ? { kind: 'jpeg', width: frame.width, height: frame.height } : { kind: 'jpeg' };
  }
  if (b.length >= 24 && b.subarray(0, 8).equals(PNG_SIGNATURE)) {
    return { kind: 'png', width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  }
  if (b.length >= 10 && (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a')) {
    return { kind: 'gif', width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  }
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 4) === 'WEBP')
    return { kind: 'webp', ...webpSize(b) };
  if (b.length >= 4 && (ascii(b, 0, 4) === 'II*\0' || ascii(b, 0, 4) === 'MM\0*')) return { kind: 'tiff' };
  if (b.length >= 12 && ascii(b, 4, 4) === 'ftyp') {
    const kind = isoBrand(b);
    if (kind) return { kind };
  }
  if (b.length >= 4 && ascii(b, 0, 4) === '%PDF') return { kind: 'pdf' };
  if (b.length >= 26 && ascii(b, 0, 2) === 'BM' && [12, 40, 56, 64, 108, 124].includes(b.readUInt32LE(14))) {
    return { kind: 'bmp' };
  }
  if (looksLikeText(b)) {
    // An SVG is text too; it is named separately because sharp would happily rasterise it.
    const start = b.subarray(0, 4096).toString('utf8').toLowerCase();
    return { kind: start.includes('<svg') ? 'svg' : 'text' };
  }
  return { kind: 'unknown' };
}

/** Walks RIFF chunks to tell lossless WebP (a VP8L image chunk) from lossy (VP8). */
export function webpIsLossless(b: Uint8Array): boolean {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  let at = 12;
  while (at + 8 <= buf.length) {
    const id = ascii(buf, at, 4);
    if (id === 'VP8L') return true;
    if (id === 'VP8 ') return false;
    const size = buf.readUInt32LE(at + 4);
    at += 8 + size + (size % 2);
  }
  return false;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function ascii(b: Buffer, at: number, length: number): string {
  return b.toString('latin1', at, at + length);
}

function isoBrand(b: Buffer): SniffedKind | undefined {
  const boxSize = Math.min(b.readUInt32BE(0), b.length);
  const brands = [ascii(b, 8, 4)];
  for (let at = 16; at + 4 <= boxSize; at += 4) brands.push(ascii(b, at, 4));
  // The major brand decides; mif1/msf1 files are identified by their compatible brands.
  const major = brands[0] ?? '';
  if (AVIF_BRANDS.has(major)) return 'avif';
  if (HEIC_BRANDS.has(major)) return 'heic';
  if (brands.some((brand) => AVIF_BRANDS.has(brand))) return 'avif';
  if (brands.some((brand) => HEIC_BRANDS.has(brand)) || major === 'mif1' || major === 'msf1') return 'heic';
  return undefined;
}

function webpSize(b: Buffer): { width?: number; height?: number } {
  if (b.length < 30) return {};
  const chunk = ascii(b, 12, 4);
  if (chunk === 'VP8X') return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) };
  if (chunk === 'VP8L') {
    const bits = b.readUInt32LE(21);
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff) };
  }
  if (chunk === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
  return {};
}

function looksLikeText(b: Buffer): boolean {
  const sample = b.subarray(0, 1024);
  let start = 0;
  if (sample[0] === 0xef && sample[1] === 0xbb && sample[2] === 0xbf) start = 3; // UTF-8 BOM
  for (let i = start; i < sample.length; i++) {
    const c = sample[i] ?? 0;
    // Tabs, newlines and printable bytes; bytes >= 0x80 are allowed for UTF-8 text.
    if (c < 0x09 || (c > 0x0d && c < 0x20) || c === 0x7f) return false;
  }
  return true;
}
