/** Small helpers for async iteration. */

/** Maps with at most `limit` calls at once, yielding results in input order. */
export async function* mapOrdered<T, R>(
  items: AsyncIterable<T>,
  limit: number,
  fn: (item: T) => Promise<R>,
): AsyncGenerator<R> {
  const window: Promise<R>[] = [];
  for await (const item of items) {
    const pending = fn(item);
    pending.catch(() => {}); // awaited below, in order; this only keeps an early failure from being "unhandled"
    window.push(pending);
    if (window.length >= limit) yield await window.shift()!;
  }
  while (window.length > 0) yield await window.shift()!;
}
