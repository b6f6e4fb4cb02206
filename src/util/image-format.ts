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
