/**
 * The review's memory of source signatures (`child.ts`). The preflight hands a source's rendition
 * over when it checks the source, a little ahead of the submission; the source's results are
 * reviewed after their downloads, in about the same order, once per style. On an instant service
 * the review falls behind the downloads, by more sources than are kept.
 *
 * Kept least-recently-used, that order is a scan larger than the memory: every source handed over
 * pushed out the oldest one still to be used, and past a lag of `capacity` sources every review
 * decoded its source again (202 to 1,026 of 1,700 sources in a 10,200-item bench run). So a source
 * handed over waits, in order, until its first review; a newcomer finds room if there is some, or
 * in the place of one left behind (the review has gone `STALE_AFTER` sources past it: its items
 * failed or were skipped), and is otherwise not kept: the ones kept are the next to be used, and
 * the memory serves its size in sources at any lag instead of none. Apart from those, the
 * `RECENT` sources used (or decoded for a review) last are kept for the styles still to come.
 */

/** Sources used (or decoded for a review) kept for the styles still to come: they come in a row. */
export const RECENT = 64;

/** Sources handed over this far behind the latest one used are not waited for any longer. */
export const STALE_AFTER = 256;

/** A memory of up to `capacity` values by key; see the module comment. */
export class SourceMemo<T> {
  /** Room for the sources handed over and not used yet: the capacity less the recent ones'. */
  readonly #aheadCapacity: number;
  /** Handed over, not used yet: the order they came in, with their sequence numbers. */
  readonly #ahead = new Map<string, { value: T; seq: number }>();
  /** Used or decoded for a review, the most recent last. */
  readonly #recent = new Map<string, T>();
  #handed = 0;
  /** Sequence number of the latest source used that was handed over. */
  #reached = -1;

  constructor(capacity: number) {
    this.#aheadCapacity = Math.max(1, capacity - RECENT);
  }

  get size(): number {
    return this.#ahead.size + this.#recent.size;
  }

  /**
   * A source handed over ahead of its reviews: kept when there is room or room can be made (the
   * value is made only then). Returns whether it is kept.
   */
  offer(key: string, make: () => T): boolean {
    const seq = this.#handed++;
    if (this.#ahead.has(key) || this.#recent.has(key)) return true;
    if (!this.#makeRoom()) return false;
    this.#ahead.set(key, { value: make(), seq });
    return true;
  }

  /** The source's value for a review, if kept; it then counts as used. */
  get(key: string): T | undefined {
    const waiting = this.#ahead.get(key);
    if (waiting) {
      this.#ahead.delete(key);
      this.#reached = Math.max(this.#reached, waiting.seq);
      this.#touch(key, waiting.value);
      return waiting.value;
    }
    const value = this.#recent.get(key);
    if (value !== undefined) this.#touch(key, value);
    return value;
  }

  /** A source decoded for a review: kept among the recently used. */
  remember(key: string, value: T): void {
    this.#ahead.delete(key);
    this.#touch(key, value);
  }

  /** Forgets a source (its decode failed). */
  delete(key: string): void {
    this.#ahead.delete(key);
    this.#recent.delete(key);
  }

  #touch(key: string, value: T): void {
    this.#recent.delete(key);
    this.#recent.set(key, value);
    if (this.#recent.size > RECENT) this.#recent.delete(this.#recent.keys().next().value as string);
  }

  /** Room for one more handed over: free, or the place of the oldest one if it was left behind. */
  #makeRoom(): boolean {
    if (this.#ahead.size < this.#aheadCapacity) return true;
    const [oldest, entry] = this.#ahead.entries().next().value as [string, { seq: number }];
    if (entry.seq >= this.#reached - STALE_AFTER) return false;
    this.#ahead.delete(oldest);
    return true;
  }
}
