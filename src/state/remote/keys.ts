/**
 * The names of a bucket run's own state under its prefix (docs/contract.md#outputs-in-object-storage):
 * `.kitchen-batch/journal/<seq>.jsonl` segments, `snapshot-<seq>.jsonl` compactions, and the lease.
 */

/** The folder of the run's state under the prefix. */
export const STATE_DIR = '.kitchen-batch/';
/** Segment numbers are zero-padded to this width, so they sort as text. */
const WIDTH = 10;

/** `<prefix>.kitchen-batch/journal/` */
export function journalPrefix(prefix: string): string {
  return `${prefix}${STATE_DIR}journal/`;
}

/** The key of segment `seq`. */
export function segmentKey(prefix: string, seq: number): string {
  return `${journalPrefix(prefix)}${String(seq).padStart(WIDTH, '0')}.jsonl`;
}

/** The key of the snapshot covering segments up to `seq`. */
export function snapshotKey(prefix: string, seq: number): string {
  return `${journalPrefix(prefix)}snapshot-${String(seq).padStart(WIDTH, '0')}.jsonl`;
}

/** The lease's key. */
export function leaseKey(prefix: string): string {
  return `${prefix}${STATE_DIR}lease.json`;
}

/** A journal object's kind and number from its name (null for anything else). */
export function parseJournalName(name: string): { kind: 'segment' | 'snapshot'; seq: number } | null {
  const match = /^(snapshot-)?(\d{10})\.jsonl$/.exec(name);
  if (!match) return null;
  return { kind: match[1] ? 'snapshot' : 'segment', seq: Number(match[2]) };
}
