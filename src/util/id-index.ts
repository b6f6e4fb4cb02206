import { createHash } from 'node:crypto';

/**
 * A map from item ids to small values that costs a few tens of bytes per id, whatever the ids'
 * length: ids are keyed by a 48-bit hash, so a million ids take tens of MB, not hundreds. Two ids
 * can share a hash (about one pair in 300 among a million ids): a hit is a *candidate*, which the
 * caller confirms against the real ids before it acts on it.
 */
export class IdIndex<V> {
  readonly #map = new Map<number, V>();

  /** The hash an id is keyed by. */
  static key(id: string): number {
    return createHash('sha1').update(id).digest().readUIntBE(0, 6);
  }

  /** The value stored under `id`'s hash, if any (a candidate: see the class comment). */
  get(id: string): V | undefined {
    return this.#map.get(IdIndex.key(id));
  }

  set(id: string, value: V): void {
    this.#map.set(IdIndex.key(id), value);
  }

  get size(): number {
    return this.#map.size;
  }
}
