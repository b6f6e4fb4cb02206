/**
 * Growable storage outside the JavaScript heap for per-item columns of 10^5 to 10^6 items: strings
 * as UTF-8 in one byte arena (no object, header or pointer per string), and shared values as small
 * integers into a pool. Typed-array memory is not part of V8's heap, so it is not multiplied by the
 * garbage collector's headroom the way a million small strings are.
 */

/** Strings appended to one buffer; each is found again by the offset {@link put} returned. */
export class TextArena {
  #bytes = Buffer.alloc(64 * 1024);
  #used = 0;

  /** Bytes in use (rewrites leave the old bytes behind: a value is written once or twice in an item's life). */
  get size(): number {
    return this.#used;
  }

  /** Stores `text` and returns its offset. */
  put(text: string): number {
    const length = Buffer.byteLength(text);
    const need = this.#used + 4 + length;
    if (need > this.#bytes.length) {
      const grown = Buffer.alloc(Math.max(need, this.#bytes.length * 2));
      this.#bytes.copy(grown, 0, 0, this.#used);
      this.#bytes = grown;
    }
    const at = this.#used;
    this.#bytes.writeUInt32LE(length, at);
    this.#bytes.write(text, at + 4, length, 'utf8');
    this.#used = need;
    return at;
  }

  get(offset: number): string {
    const length = this.#bytes.readUInt32LE(offset);
    return this.#bytes.toString('utf8', offset + 4, offset + 4 + length);
  }
}

/** Equal values kept once and named by a small integer (0 is reserved for null). */
export class ValuePool<T> {
  readonly #index = new Map<string, number>();
  readonly #values: T[] = [];

  /** The number of `value` (null → 0); `key` says which values are equal (the value itself for strings). */
  put(value: T | null, key: string): number {
    if (value === null) return 0;
    let n = this.#index.get(key);
    if (n === undefined) {
      this.#values.push(value);
      n = this.#values.length;
      this.#index.set(key, n);
    }
    return n;
  }

  get(n: number): T | null {
    return n === 0 ? null : (this.#values[n - 1] ?? null);
  }
}

/** A typed array of `size` elements with the old contents. */
export function grown<T extends Uint8Array | Uint16Array | Uint32Array | Float32Array | Float64Array>(
  old: T,
  size: number,
  fill?: number,
): T {
  const next = new (old.constructor as new (length: number) => T)(size);
  if (fill !== undefined) next.fill(fill, old.length);
  next.set(old);
  return next;
}
