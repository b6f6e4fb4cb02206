/**
 * Just enough of an ICC profile to name it: its colour space (header bytes 16..19) and its
 * description (`desc` tag: ICC v2 `desc` text or v4 `mluc`). Preflight converts whatever is not
 * sRGB to sRGB, and says what it converted from.
 */

/** What a profile says of itself. */
export interface IccInfo {
  /** 'RGB', 'CMYK', 'GRAY', 'Lab', … as the header gives it (trimmed). */
  space: string;
  /** The profile's description ('sRGB IEC61966-2.1', 'Display P3', …), or null when unreadable. */
  description: string | null;
}

/** Reads the header and description of a profile; null when the bytes are not an ICC profile. */
export function readIcc(icc: Buffer): IccInfo | null {
  if (icc.length < 132 || icc.toString('latin1', 36, 40) !== 'acsp') return null;
  const space = icc.toString('latin1', 16, 20).trim();
  return { space, description: description(icc) };
}

/** Whether a profile is an sRGB one (by its description: sRGB profiles are named so by every vendor). */
export function isSrgbProfile(info: IccInfo | null): boolean {
  return info !== null && info.space === 'RGB' && /\bsRGB\b/i.test(info.description ?? '');
}

function description(icc: Buffer): string | null {
  const count = icc.readUInt32BE(128);
  for (let i = 0; i < count && 132 + i * 12 + 12 <= icc.length; i++) {
    const entry = 132 + i * 12;
    if (icc.toString('latin1', entry, entry + 4) !== 'desc') continue;
    const offset = icc.readUInt32BE(entry + 4);
    const size = icc.readUInt32BE(entry + 8);
    if (offset + size > icc.length || size < 12) return null;
    const tag = icc.subarray(offset, offset + size);
    const type = tag.toString('latin1', 0, 4);
    if (type === 'desc') {
      const length = tag.readUInt32BE(8);
      return clean(tag.toString('latin1', 12, Math.min(tag.length, 12 + length)));
    }
    if (type === 'mluc' && tag.length >= 28) {
      const records = tag.readUInt32BE(8);
      if (records < 1) return null;
      const length = tag.readUInt32BE(20);
      const start = tag.readUInt32BE(24);
      if (start + length > tag.length) return null;
      // UTF-16BE: swap to the LE Node decodes.
      const text = Buffer.from(tag.subarray(start, start + length));
      text.swap16();
      return clean(text.toString('utf16le'));
    }
    return null;
  }
  return null;
}

function clean(text: string): string | null {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: profile strings are NUL-terminated
  const trimmed = text.replace(/\u0000+$/, '').trim();
  return trimmed === '' ? null : trimmed;
}
