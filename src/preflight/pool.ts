/**
 * The preflight's concurrency helpers: a bounded memo, a FIFO pool, and a wait on shared work that
 * one caller may give up without cancelling it for the others.
 */

/**
 * Preparations remembered per path and per content hash. The styles of one image come in a row,
 * so a few thousand recent ones catch nearly every repeat, and memory stays flat over a catalogue
 * of any size; older settled ones are forgotten (a repeat then costs a read and a cache hit).
 */
export const MEMO_LIMIT = 4096;

/** Adds an entry and forgets the oldest settled ones beyond {@link MEMO_LIMIT}. */
export function remember<K, V extends { settled: boolean }>(memo: Map<K, V>, key: K, value: V): void {
  memo.set(key, value);
  if (memo.size <= MEMO_LIMIT) return;
  for (const [k, v] of memo) {
    if (memo.size <= MEMO_LIMIT) break;
    if (v.settled) memo.delete(k);
  }
}

/**
 * Waits for a shared preparation on behalf of one caller (already counted in `waiters`), who may
 * give up without cancelling it for the others.
 */
export function waitFor<T>(
  entry: { promise: Promise<T>; waiters: number },
  signal: AbortSignal | undefined,
): Promise<T> {
  return abandonable(entry.promise, signal, () => {
    entry.waiters -= 1;
  });
}

/**
 * `promise`, or `signal.reason` as soon as the signal aborts (then `onAbort` runs): one caller
 * stops waiting for shared work that goes on for the others.
 */
export function abandonable<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  onAbort: () => void,
): Promise<T> {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const abort = (): void => {
      onAbort();
      reject(signal.reason);
    };
    signal.addEventListener('abort', abort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(error);
      },
    );
  });
}

export interface Limiter {
  run<T>(task: () => Promise<T>): Promise<T>;
}

/** A FIFO pool: at most `size` tasks run at once. */
export function createLimiter(size: number): Limiter {
  let active = 0;
  const queue: Array<() => void> = [];
  return {
    async run(task) {
      if (active >= size) await new Promise<void>((resolve) => queue.push(resolve));
      else active += 1;
      // A woken task inherits the slot of the one that finished, so `active` is unchanged then.
      try {
        return await task();
      } finally {
        if (queue.length > 0) queue.shift()?.();
        else active -= 1;
      }
    },
  };
}
