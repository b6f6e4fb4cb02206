/**
 * `Retry-After` as the service may send it: delta-seconds or an HTTP-date. An HTTP-date is measured
 * against the response's own `Date` header when there is one, so a client whose clock is hours off
 * (FAULTS J.44) still waits the time the server meant. Also accepts `retry-after-ms`.
 *
 * Returns milliseconds, or `undefined` for anything unusable (missing, garbage, negative, a date in
 * the past): the caller then falls back to its computed backoff, never to a 0 ms loop.
 */
export function parseRetryAfter(
  headers: Record<string, string | string[] | undefined>,
  localNow: number = Date.now(),
): number | undefined {
  const ms = first(headers['retry-after-ms']);
  if (ms !== undefined && /^\s*\d+(\.\d+)?\s*$/.test(ms)) {
    const value = Number(ms);
    if (value > 0) return value;
  }
  const raw = first(headers['retry-after'])?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) {
    const seconds = Number(raw);
    return seconds > 0 ? seconds * 1000 : undefined;
  }
  // Only an HTTP-date-looking value is read as a date; `Date.parse('soon')` is NaN but
  // `Date.parse('1')` is not, which the digit test above already took care of.
  if (!/[a-z]{3}/i.test(raw)) return undefined;
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  const serverNowRaw = first(headers.date);
  const serverNow = serverNowRaw ? Date.parse(serverNowRaw) : Number.NaN;
  const now = Number.isNaN(serverNow) ? localNow : serverNow;
  const delta = at - now;
  return delta > 0 ? delta : undefined;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
