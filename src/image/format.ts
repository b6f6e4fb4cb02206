/** The image formats the service accepts, and therefore the only ones we upload or keep as results. */
export type UploadFormat = 'jpeg' | 'png' | 'webp';

/** File extension of each format. */
export const FORMAT_EXTENSION = { jpeg: 'jpg', png: 'png', webp: 'webp' } as const satisfies Record<
  UploadFormat,
  string
>;

/** MIME type of each format. */
export const FORMAT_CONTENT_TYPE = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
} as const satisfies Record<UploadFormat, string>;

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/**
 * JPEG, PNG or WebP by magic bytes; null for anything else. Names and Content-Type headers are
 * deliberately ignored: what matters is what the bytes are (docs/faults.md D.22).
 */
export function sniffImage(head: Uint8Array): UploadFormat | null {
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'jpeg';
  if (head.length >= 8 && PNG_SIGNATURE.every((b, i) => head[i] === b)) return 'png';
  const ascii = (from: number, to: number) => Buffer.from(head.subarray(from, to)).toString('latin1');
  if (head.length >= 12 && ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'webp';
  return null;
}

/** A JPEG's frame header (SOFn) and what its markers before it say. */
export interface JpegFrame {
  /** The SOF marker's number, 0 to 15: 0 to 2 are Huffman-coded (baseline, extended, progressive). */
  sof: number;
  /** Bits per sample. */
  precision: number;
  width: number;
  height: number;
  components: number;
  /** An APP2 `ICC_PROFILE` segment came before the frame. */
  iccProfile: boolean;
}

/** APP2's identifier of an embedded ICC profile. */
const ICC_PROFILE = [...'ICC_PROFILE\0'].map((c) => c.charCodeAt(0));

/**
 * Walks a JPEG's markers to its frame header; null when the bytes are not a JPEG, a marker is
 * malformed or cut short, or the scan (or the end) comes before any frame. Only the bytes up to
 * the frame header are needed.
 */
export function jpegFrame(bytes: Uint8Array): JpegFrame | null {
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== 0xd8) return null;
  let iccProfile = false;
  let at = 2;
  while (at + 4 <= bytes.length) {
    if (bytes[at] !== 0xff) return null;
    const marker = bytes[at + 1]!;
    // Fill bytes, and markers without a length (TEM, RSTn).
    if (marker === 0xff) {
      at++;
      continue;
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    // Another start, or the end, of an image, or the scan, before any frame.
    if (marker === 0xd8 || marker === 0xd9 || marker === 0xda) return null;
    const length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
    const body = at + 4;
    if (length < 2 || at + 2 + length > bytes.length) return null;
    if (marker === 0xe2 && ICC_PROFILE.every((byte, i) => bytes[body + i] === byte)) iccProfile = true;
    // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (length < 8) return null;
      return {
        sof: marker - 0xc0,
        precision: bytes[body]!,
        height: (bytes[body + 1]! << 8) | bytes[body + 2]!,
        width: (bytes[body + 3]! << 8) | bytes[body + 4]!,
        components: bytes[body + 5]!,
        iccProfile,
      };
    }
    at += 2 + length;
  }
  return null;
}
