/**
 * Image references that are not local files (issue 32): http(s) URLs, `s3://bucket/key` and S3
 * globs, and the relative references of a manifest that is itself at a URL or in S3. URLs and keys
 * are taken as written: an S3 key may hold `#`, `?`, `+` and spaces, so it is never parsed with
 * WHATWG `URL` (see storage/s3/ref.ts); a `*` or `?` in an http(s) URL is the URL's, not a glob.
 */
import path from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import fg from 'fast-glob';
import { UsageError } from '../errors.js';
import { SourceError } from '../storage/http/errors.js';
import type { S3Env } from '../storage/s3/client.js';
import { formatS3Ref, isS3Glob, parseS3Ref, type S3Ref } from '../storage/s3/ref.js';
import { sourceKind } from '../storage/sources.js';
import type { Item, RejectCode } from '../types.js';
import { redactUrl, redactUrlsInText } from '../util/redact-url.js';
import { globIdBases, stem } from './glob-ids.js';

/** Where a manifest is, which is where its relative image references point. */
export type ManifestPlace =
  | { kind: 'local'; dir: string }
  /** A manifest fetched from this URL (query included: it is not carried to the images). */
  | { kind: 'http'; url: string }
  /** A manifest in S3: its bucket and the key's folder (`feeds/`, or `` at the bucket's root). */
  | { kind: 's3'; bucket: string; folder: string };

/** The place of a remote manifest `ref`; a local one is described by its folder instead. */
export function placeOf(ref: string): ManifestPlace & { kind: 'http' | 's3' } {
  if (sourceKind(ref) === 'http') return { kind: 'http', url: ref };
  const { bucket, key } = parseS3Ref(ref);
  return { kind: 's3', bucket, folder: key.slice(0, key.lastIndexOf('/') + 1) };
}

/** The path of an http(s) URL as written (no query, no fragment), cut by hand as redactUrl does. */
function urlPath(url: string): string {
  const start = url.indexOf('//') + 2;
  const rest = url.slice(start);
  const cut = rest.search(/[?#]/);
  const beforeQuery = cut < 0 ? rest : rest.slice(0, cut);
  const slash = beforeQuery.indexOf('/');
  return slash < 0 ? '' : beforeQuery.slice(slash);
}

/**
 * The id base of an http(s) URL: the stem of its path's last segment, percent-decoded
 * (`https://cdn.example/p/K%201.jpg?sig=..` → `K 1`); empty when the URL names no file (`https://x/`).
 */
export function urlIdBase(url: string): string {
  const segment = urlPath(url).split('/').pop() ?? '';
  let name = segment;
  try {
    name = decodeURIComponent(segment);
  } catch {
    // A malformed escape (`%zz`) is kept as written; safeId makes it safe.
  }
  return stem(name);
}

/** The id base of an S3 key: the stem of its file name (taken verbatim, nothing decoded). */
export function keyIdBase(key: string): string {
  return stem(key);
}

/** A relative reference resolved against a remote manifest, or why it cannot be. */
export type Resolved = { ref: string } | { problem: string };

/**
 * `spec` (relative, not a glob for http) resolved against a remote manifest's place: a URL by the
 * URL rules (`images/k1.jpg` in `https://cdn.x/feeds/m.csv` → `https://cdn.x/feeds/images/k1.jpg`),
 * an S3 key by joining strings (`s3://b/feeds/` + `images/k1.jpg`), `.` and `..` segments applied.
 */
export function resolveRemote(place: ManifestPlace & { kind: 'http' | 's3' }, spec: string): Resolved {
  if (place.kind === 'http') {
    try {
      return { ref: new URL(spec, place.url).href };
    } catch {
      return { problem: `${JSON.stringify(spec)} cannot be resolved against ${redactUrl(place.url)}` };
    }
  }
  const segments = place.folder === '' ? [] : place.folder.slice(0, -1).split('/');
  for (const segment of spec.split('/')) {
    if (segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) {
        return { problem: `${JSON.stringify(spec)} goes above the bucket s3://${place.bucket}/` };
      }
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  return { ref: formatS3Ref(place.bucket, segments.join('/')) };
}

/** What listing an S3 glob gave: its keys (matched, sorted), or the reason it could not be listed. */
export type S3GlobListing = { keys: string[] } | { error: SourceError | UsageError };

/**
 * Keys a manifest's S3 globs may keep between its two readings (checked whole, then `items()`): a
 * glob is listed once per manifest when its keys fit, and again on the second reading when not.
 */
export const LISTING_CACHE_KEYS = 100_000;

/**
 * Lists a manifest's S3 globs through one S3 client, made on the first glob (a manifest without
 * any makes none, nor loads the AWS SDK), and keeps the listings that fit in {@link LISTING_CACHE_KEYS}.
 */
export class S3GlobLister {
  readonly #env: S3Env;
  #client: S3Client | undefined;
  readonly #cache = new Map<string, S3GlobListing>();
  #cachedKeys = 0;

  constructor(env: S3Env) {
    this.#env = env;
  }

  /**
   * The keys `glob` matches, as fast-glob matches files, sorted as local glob matches are. A
   * failed listing is an answer too (its SourceError), so a row is rejected and the manifest goes on.
   */
  async list(glob: string): Promise<S3GlobListing> {
    const cached = this.#cache.get(glob);
    if (cached) return cached;
    let listing: S3GlobListing;
    const [{ createS3Client }, { listS3Glob }] = await Promise.all([
      import('../storage/s3/client.js'),
      import('../storage/s3/list.js'),
    ]);
    // A malformed S3 environment (endpoint, path-style flag) is the command's fault: it is thrown.
    this.#client ??= createS3Client(this.#env).client;
    try {
      const keys: string[] = [];
      for await (const object of listS3Glob(this.#client, glob)) keys.push(object.key);
      listing = { keys: keys.sort() };
    } catch (error) {
      if (!(error instanceof SourceError) && !(error instanceof UsageError)) throw error;
      listing = { error };
    }
    const size = 'keys' in listing ? listing.keys.length : 1;
    if (this.#cachedKeys + size <= LISTING_CACHE_KEYS) {
      this.#cache.set(glob, listing);
      this.#cachedKeys += size;
    }
    return listing;
  }

  /** Closes the S3 client's connections, if one was made. */
  close(): void {
    this.#client?.destroy();
    this.#client = undefined;
  }
}

type Rejection = NonNullable<Item['rejection']>;

/** One image a row names: a path or reference, one glob match, or a glob that matched nothing. */
export interface ImageRef {
  /** As the report shows it: a local path relative to the manifest folder, else the reference. */
  image: string;
  /** What the sources read: an absolute path, a URL or `s3://bucket/key`; empty when none. */
  imagePath: string;
  /** The base of the item id before the style suffix, not yet made safe. */
  base: string;
}

/** The images of a row's `image`, and the rejection of all of them when there is one. */
export interface ImageResolution {
  images: ImageRef[];
  rejection?: Rejection;
}

/** What {@link remoteImages} needs of the row and the manifest. */
export interface RemoteContext {
  /** The row's own id, when it gives one. */
  id: string | undefined;
  line: number;
  place: ManifestPlace;
  s3: S3GlobLister;
}

/** The row's items all rejected, under the row's id (or its line: a URL may not show in an id). */
function rejected(row: RemoteContext, image: string, rejection: Rejection): ImageResolution {
  return { images: [{ image, imagePath: '', base: row.id ?? `line-${row.line}` }], rejection };
}

const invalid = (message: string): Rejection => ({ code: 'invalid_item', message });

/** An http(s) URL: taken as written, never a glob; the id from its file name unless the row has one. */
function urlImage(url: string, row: RemoteContext): ImageResolution {
  const base = row.id ?? urlIdBase(url);
  if (base === '') {
    return rejected(
      row,
      url,
      invalid(`${redactUrl(url)} names no file to take an item id from; give the row an id`),
    );
  }
  return { images: [{ image: url, imagePath: url, base }] };
}

/**
 * A listing's failure as the rejection of the glob's items, with the SourceError's code
 * (`file_not_found` for a missing bucket, `source_forbidden`, `source_unavailable`).
 */
function listingRejection(glob: string, error: SourceError | UsageError): Rejection {
  if (!(error instanceof SourceError)) return invalid(error.message);
  const reason = error.message.startsWith(`${glob}: `) ? error.message.slice(glob.length + 2) : error.message;
  return {
    // source_forbidden and source_unavailable join RejectCode with issue 32's preflight (types.ts).
    code: error.code as RejectCode,
    message: `cannot list the glob ${JSON.stringify(glob)}: ${redactUrlsInText(reason)}`,
  };
}

/** `s3://bucket/key` taken verbatim, or an S3 glob listed and named as a local glob's matches. */
async function s3Images(spec: string, row: RemoteContext): Promise<ImageResolution> {
  let ref: S3Ref;
  try {
    ref = parseS3Ref(spec);
  } catch (error) {
    if (error instanceof UsageError) return rejected(row, spec, invalid(error.message));
    throw error;
  }
  if (!isS3Glob(ref))
    return { images: [{ image: spec, imagePath: spec, base: row.id ?? keyIdBase(ref.key) }] };
  const listing = await row.s3.list(spec);
  if ('error' in listing) {
    return {
      images: [{ image: spec, imagePath: '', base: row.id ?? spec }],
      rejection: listingRejection(spec, listing.error),
    };
  }
  if (listing.keys.length === 0) {
    return {
      images: [{ image: spec, imagePath: '', base: row.id ?? spec }],
      rejection: { code: 'file_not_found', message: `no object matches the glob ${JSON.stringify(spec)}` },
    };
  }
  const bases = globIdBases(listing.keys, row.id);
  return {
    images: listing.keys.map((key, index) => {
      const object = formatS3Ref(ref.bucket, key);
      return { image: object, imagePath: object, base: bases[index] ?? key };
    }),
  };
}

/**
 * The images of `spec` when it is not a local file: an http(s) URL, an `s3://` reference or glob,
 * or a relative reference in a manifest at a URL or in S3 (resolved against it). Undefined for a
 * local path or glob, which the caller resolves on disk.
 */
export async function remoteImages(spec: string, row: RemoteContext): Promise<ImageResolution | undefined> {
  const kind = sourceKind(spec);
  if (kind === 'http') return urlImage(spec, row);
  if (kind === 's3') return s3Images(spec, row);
  const { place } = row;
  // An absolute path is a local file wherever the manifest is (a volume every worker mounts).
  if (place.kind === 'local' || path.isAbsolute(spec)) return undefined;
  if (place.kind === 'http' && fg.isDynamicPattern(spec)) {
    return rejected(
      row,
      spec,
      invalid(
        `${JSON.stringify(spec)} is a glob, and a manifest at a URL has no folder to list: name each image, or use an s3:// glob`,
      ),
    );
  }
  const resolved = resolveRemote(place, spec);
  if ('problem' in resolved) return rejected(row, spec, invalid(resolved.problem));
  return place.kind === 'http' ? urlImage(resolved.ref, row) : s3Images(resolved.ref, row);
}
