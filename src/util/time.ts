import { setTimeout as delay } from 'node:timers/promises';

/** Monotonic milliseconds: immune to wall-clock steps (NTP, DST, faketime). */
export function monotonicMs(): number {
  return performance.now();
}

/**
 * Sleeps `ms` milliseconds, or rejects with the signal's reason when it aborts first.
 * Negative or non-finite durations sleep 0 ms.
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  // setTimeout's limit is 2^31-1 ms; longer waits would fire at once.
  const wait = Number.isFinite(ms) && ms > 0 ? Math.min(ms, 2_147_483_647) : 0;
  if (signal?.aborted) throw signal.reason;
  try {
    await delay(wait, undefined, signal ? { signal } : {});
  } catch (error) {
    // Callers tell a stop from a failure by the signal's own reason, not Node's AbortError.
    if (signal?.aborted) throw signal.reason;
    throw error;
  }
}

/** ISO 8601 with the local offset, e.g. `2026-11-22T04:39:24.000+00:00`. */
export function isoWithOffset(date: Date = new Date()): string {
  const pad = (n: number, w = 2) => String(Math.abs(n)).padStart(w, '0');
  const offset = -date.getTimezoneOffset();
  const sign = offset >= 0 ? '+' : '-';
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}` +
    `${sign}${pad(Math.trunc(offset / 60))}:${pad(offset % 60)}`
  );
}
