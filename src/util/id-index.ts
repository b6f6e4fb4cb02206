import { createHash } from 'node:crypto';

/**
 * A map from item ids to small whole numbers (a manifest line, a part number) that costs about 24
 * bytes per id, whatever the ids' length, and lives outside the JavaScript heap: an open-addressing
 * table of 64-bit id hashes in typed arrays. A million ids take 24 MB. Two ids can share a hash
 * (about one pair in 10^7 among a million ids): a hit is a *candidate*, which the caller confirms
 * against the real ids before it acts on it.
 */
export class IdIndex {
  /** Hash halves per slot (high, low); a low half of 0 marks an empty slot (stored low halves are odd). */
  #hashes = new Uint32Array(2 * 1024);
  #values = new Uint32Array(1024);
  #size = 0;

  /** The hash an id is keyed by: two 32-bit halves of its sha1 (the low one made odd). */
  static key(id: string): [number, number] {
    const digest = createHash('sha1').update(id).digest();
    return [digest.readUInt32BE(0), (digest.readUInt32BE(4) | 1) >>> 0];
  }

  /** The value stored under `id`'s hash, if any (a candidate: see the class comment). */
  get(id: string): number | undefined {
    const [high, low] = IdIndex.key(id);
    const slot = this.#find(high, low);
    return this.#hashes[slot * 2 + 1] === 0 ? undefined : this.#values[slot];
  }

  /** Stores `value` (0 to 2^32 − 1) under `id`'s hash. */
  set(id: string, value: number): void {
    const [high, low] = IdIndex.key(id);
    let slot = this.#find(high, low);
    if (this.#hashes[slot * 2 + 1] === 0) {
      if ((this.#size + 1) * 2 > this.#values.length) {
        this.#grow();
        slot = this.#find(high, low);
      }
      this.#hashes[slot * 2] = high;
      this.#hashes[slot * 2 + 1] = low;
      this.#size++;
    }
    this.#values[slot] = value;
  }

  get size(): number {
    return this.#size;
  }

  /** The slot holding this hash, or the empty slot where it would go (linear probing). */
  #find(high: number, low: number): number {
    const mask = this.#values.length - 1;
    let slot = (high ^ low) & mask;
    for (;;) {
      const stored = this.#hashes[slot * 2 + 1];
      if (stored === 0 || (stored === low && this.#hashes[slot * 2] === high)) return slot;
      slot = (slot + 1) & mask;
    }
  }

  #grow(): void {
    const hashes = this.#hashes;
    const values = this.#values;
    this.#hashes = new Uint32Array(hashes.length * 2);
    this.#values = new Uint32Array(values.length * 2);
    for (let slot = 0; slot < values.length; slot++) {
      const low = hashes[slot * 2 + 1]!;
      if (low === 0) continue;
      const high = hashes[slot * 2]!;
      const to = this.#find(high, low);
      this.#hashes[to * 2] = high;
      this.#hashes[to * 2 + 1] = low;
      this.#values[to] = values[slot]!;
    }
  }
}
