import { createHash } from 'node:crypto';

/** Longest id we keep whole; longer ones are cut and suffixed with a hash (file names max out at 255 bytes). */
const MAX_ID_LENGTH = 180;

/**
 * Makes an item id safe as a file name: `[A-Za-z0-9._-]` only (others become `-`), never `.` or `..`
 * or a leading dot, and at most {@link MAX_ID_LENGTH} characters (longer ones end in a short hash of the
 * original so two long ids stay distinct).
 */
export function safeId(raw: string): string {
  let id = raw.replace(/[^A-Za-z0-9._-]/g, '-');
  id = id.replace(/^\.+/, (dots) => '-'.repeat(dots.length));
  if (id === '') id = '-';
  if (id.length > MAX_ID_LENGTH) {
    const hash = createHash('sha256').update(raw).digest('hex').slice(0, 12);
    id = `${id.slice(0, MAX_ID_LENGTH - 13)}-${hash}`;
  }
  return id;
}
