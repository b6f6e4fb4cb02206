import { createHash } from 'node:crypto';
import { UsageError } from '../errors.js';

/** Part `index` (1-based) of `count`. */
export interface Shard {
  index: number;
  count: number;
}

/** Parses `K/N` (1 ≤ K ≤ N). */
export function parseShard(text: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = match ? Number(match[1]) : Number.NaN;
  const count = match ? Number(match[2]) : Number.NaN;
  if (!match || count < 1 || index < 1 || index > count) {
    throw new UsageError(`--shard must be K/N with 1 ≤ K ≤ N (e.g. 1/4), got "${text}"`);
  }
  return { index, count };
}

/** Whether an item belongs to a shard: a stable hash of its id, so every machine agrees. */
export function inShard(id: string, shard: Shard): boolean {
  const h = createHash('sha256').update(id).digest().readUInt32BE(0);
  return h % shard.count === shard.index - 1;
}
