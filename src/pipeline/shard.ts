import { createHash } from 'node:crypto';
import { OptionError } from '../util/validate.js';

/** Part `index` (1-based) of `count`. */
export interface Shard {
  index: number;
  count: number;
}

const EXPECTED = 'K/N with 1 ≤ K ≤ N (e.g. 1/4)';

/** Checks a shard (1 ≤ K ≤ N, whole numbers); `name` names it in the message. */
export function checkShard(name: string, shard: Shard): Shard {
  const { index, count } = shard;
  if (
    !Number.isSafeInteger(index) ||
    !Number.isSafeInteger(count) ||
    count < 1 ||
    index < 1 ||
    index > count
  ) {
    throw new OptionError(name, EXPECTED, `${index}/${count}`);
  }
  return shard;
}

/** Parses `K/N` (1 ≤ K ≤ N), as `--shard` gives it. */
export function parseShard(text: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  if (!match) throw new OptionError('--shard', EXPECTED, text);
  return checkShard('--shard', { index: Number(match[1]), count: Number(match[2]) });
}

/** Whether an item belongs to a shard: a stable hash of its id, so every machine agrees. */
export function inShard(id: string, shard: Shard): boolean {
  const h = createHash('sha256').update(id).digest().readUInt32BE(0);
  return h % shard.count === shard.index - 1;
}

/** `K/N`, as `--shard` takes it and the journal's `run` record keeps it. */
export function shardText(shard: Shard): string {
  return `${shard.index}/${shard.count}`;
}

/**
 * A run may continue a folder when it runs the same part as the folder's last run, or narrows an
 * unsharded folder to one part: any other change moves items between folders, where the ones done
 * elsewhere would be paid for again (docs/contract.md#sharding). The refusal's words, or null.
 */
export function shardChange(
  previous: string | undefined,
  current: Shard | null,
  outDir: string,
): string | null {
  const now = current ? shardText(current) : undefined;
  if (previous === undefined || previous === now) return null;
  const asked = now ? `--shard ${now}` : 'no --shard (every item)';
  return (
    `${outDir} holds shard ${previous} of its manifest; this run asks for ${asked}. ` +
    `Items would move between shard folders and the ones finished elsewhere be submitted again. ` +
    `Rerun with --shard ${previous}, or see "Changing the number of shards" in the README`
  );
}
