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
  const wait = Number.isFinite(ms) && ms > 0 ? ms : 0;
  await delay(wait, undefined, signal ? { signal } : {});
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
