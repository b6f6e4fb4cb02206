/**
 * `Retry-After` as the service may send it: delta-seconds or an HTTP-date. An HTTP-date is measured
 * against the response's own `Date` header when there is one, so a client whose clock is hours off
 * (docs/faults.md J.44) still waits the time the server meant. Also accepts `retry-after-ms`.
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
  const at = parseHttpDate(raw);
  if (at === undefined) return undefined;
  const serverNowRaw = first(headers.date);
  const serverNow = serverNowRaw ? Date.parse(serverNowRaw) : Number.NaN;
  const now = Number.isNaN(serverNow) ? localNow : serverNow;
  const delta = at - now;
  return delta > 0 ? delta : undefined;
}

/** The three HTTP-date forms of RFC 9110 §5.6.7 (IMF-fixdate, obsolete RFC 850, asctime). */
const IMF_FIXDATE = /^[a-z]{3},\s+\d{1,2}\s+[a-z]{3}\s+\d{4}\s+\d{2}:\d{2}:\d{2}\s+GMT$/i;
const RFC_850 = /^[a-z]{6,9},\s+\d{1,2}-[a-z]{3}-\d{2}\s+\d{2}:\d{2}:\d{2}\s+GMT$/i;
const ASCTIME = /^[a-z]{3}\s+[a-z]{3}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+\d{4}$/i;

/**
 * Milliseconds since the epoch of an HTTP-date, or undefined. V8's `Date.parse` alone is too lenient
 * (it reads `abc 2099` as a year-2099 date) and reads asctime, which is GMT by definition, as local
 * time; so the form is checked first and asctime is pinned to GMT.
 */
function parseHttpDate(raw: string): number | undefined {
  let text: string;
  if (IMF_FIXDATE.test(raw) || RFC_850.test(raw)) text = raw;
  else if (ASCTIME.test(raw)) text = `${raw} GMT`;
  else return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : at;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
