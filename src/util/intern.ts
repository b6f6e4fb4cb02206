/**
 * One copy of each equal string (or value object): a catalogue of 10^5 items repeats a handful of
 * module and style names and each image path once per style; kept once, they cost nothing per item.
 */
export class Interner {
  readonly #strings = new Map<string, string>();
  readonly #objects = new Map<string, object>();

  /** The one copy of `value`. */
  string<T extends string | null>(value: T): T {
    if (value === null) return value;
    const known = this.#strings.get(value);
    if (known !== undefined) return known as T;
    this.#strings.set(value, value);
    return value;
  }

  /** The one copy of an object equal to `value` under `key` (the caller's choice of identity). */
  object<T extends object>(key: string, value: T): T {
    const known = this.#objects.get(key);
    if (known !== undefined) return known as T;
    this.#objects.set(key, value);
    return value;
  }
}
