/**
 * Secrets in URLs, hidden for run.log, stdout/stderr, error messages and the reports (issue 32).
 * The journal keeps URLs whole (a rerun needs the signature); everything a person reads goes
 * through {@link redactUrl} or {@link redactUrlsInText}.
 *
 * Works on the text, not through WHATWG `URL`: a round trip through `URL` re-encodes and
 * normalises (case, `%7E`, default ports), so the logged URL would no longer be the one in the
 * manifest, and `URL` throws on input that a log line must still survive.
 */

/**
 * Query (and fragment) parameters whose values are secrets, compared lower-case. The list
 * (S3 pre-signed URLs, Azure SAS `sig`, CloudFront `Signature`, generic `token`/`key`) plus GCS's
 * V4 signing parameters and OAuth's `access_token`. `Expires`, `X-Amz-Date`, `X-Amz-Expires`
 * stay: they say when a link dies, which is what a reader of a 403 needs to know.
 */
const SECRET_PARAMS: ReadonlySet<string> = new Set([
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
  'x-goog-signature',
  'x-goog-credential',
  'signature',
  'sig',
  'token',
  'access_token',
  'key',
]);

/** What a secret value is shown as. */
export const REDACTED = '***';

const HTTP_URL = /^https?:\/\//i;

/** Decodes a parameter name for comparison; a malformed escape is compared as written. */
function paramName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    return raw.toLowerCase();
  }
}

/** `a=1&sig=xyz` → `a=1&sig=***`, keeping separators, order and every other byte as written. */
function redactParams(params: string): string {
  return params
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      const name = pair.slice(0, eq);
      return SECRET_PARAMS.has(paramName(name)) ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
}

/**
 * An http(s) URL with its userinfo dropped and secret query/fragment parameter values shown as
 * `***` (names compared case-insensitively). Anything that does not start with `http://` or
 * `https://` (an `s3://bucket/key` whose key holds `?`, `#` or `+`, a local path) comes back
 * untouched. Never throws.
 */
export function redactUrl(url: string): string {
  if (typeof url !== 'string' || !HTTP_URL.test(url)) return url;
  const schemeEnd = url.indexOf('//') + 2;
  const authorityEnd = firstIndexOf(url, ['/', '?', '#'], schemeEnd);
  const authority = url.slice(schemeEnd, authorityEnd);
  // The last `@` ends the userinfo: a password may itself hold a raw `@`.
  const at = authority.lastIndexOf('@');
  const host = at >= 0 ? authority.slice(at + 1) : authority;
  const rest = url.slice(authorityEnd);
  const hash = rest.indexOf('#');
  const beforeHash = hash >= 0 ? rest.slice(0, hash) : rest;
  const fragment = hash >= 0 ? rest.slice(hash + 1) : undefined;
  const query = beforeHash.indexOf('?');
  const path = query >= 0 ? beforeHash.slice(0, query) : beforeHash;
  let out = url.slice(0, schemeEnd) + host + path;
  if (query >= 0) out += `?${redactParams(beforeHash.slice(query + 1))}`;
  // Fragments are never sent, but OAuth-style `#access_token=` links do get pasted into manifests.
  if (fragment !== undefined) out += `#${fragment.includes('=') ? redactParams(fragment) : fragment}`;
  return out;
}

function firstIndexOf(text: string, needles: string[], from: number): number {
  let best = text.length;
  for (const needle of needles) {
    const at = text.indexOf(needle, from);
    if (at >= 0 && at < best) best = at;
  }
  return best;
}

/** An http(s) URL inside free text: up to whitespace, a quote or an angle bracket. */
const URL_IN_TEXT = /https?:\/\/[^\s"'<>`\\]+/gi;
/** Punctuation that ends a sentence rather than the URL ("… failed for https://x/a.jpg."). */
const TRAILING_PUNCTUATION = /[.,;:!?)\]}]+$/;

/**
 * Every http(s) URL found in `text` passed through {@link redactUrl}: for error messages and
 * causes that quote a URL (Node's, a library's, ours). Text without URLs comes back as it was.
 */
export function redactUrlsInText(text: string): string {
  if (typeof text !== 'string') return text;
  return text.replace(URL_IN_TEXT, (match) => {
    const trail = TRAILING_PUNCTUATION.exec(match)?.[0] ?? '';
    return redactUrl(match.slice(0, match.length - trail.length)) + trail;
  });
}
