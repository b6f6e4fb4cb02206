/**
 * The service's base URL, checked and normalised. Apart from client.ts (and its HTTP library) so
 * that checking options loads no client: `report` and a `plan` without a service never load got.
 */

/** Trims trailing slashes and checks the scheme, so `${base}/v1/...` is always right. */
export function normaliseBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError(`base URL "${raw}" is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`base URL must be http or https, got ${url.protocol}`);
  }
  if (url.username || url.password) throw new TypeError('base URL must not contain credentials');
  return url.href.replace(/\/+$/, '');
}
