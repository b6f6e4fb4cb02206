/**
 * S3 globs (issue 32: `s3://bucket/kitchens/**\/*.jpg`): ListObjectsV2 from the pattern's literal
 * prefix, page by page (ContinuationToken), each key matched as fast-glob matches a file path, so a
 * manifest's glob means the same on disk and in a bucket. Memory is one page at a time whatever the
 * bucket holds.
 */
import { ListObjectsV2Command, type ListObjectsV2CommandOutput, type S3Client } from '@aws-sdk/client-s3';
import picomatch from 'picomatch';
import { isAbort, toSourceError } from './errors.js';
import { formatS3Ref, globPrefix, parseS3Ref } from './ref.js';

/** One object a glob matched. */
export interface S3ListedObject {
  /** `s3://bucket/key`. */
  ref: string;
  key: string;
  size: number;
  /** As the listing gives it (quotes included), for a conditional GET or the fingerprint. */
  etag: string;
  /** Last-Modified in ms since the epoch. */
  lastModified: number;
}

/** Options of {@link listS3Glob}. */
export interface ListS3GlobOptions {
  /** Cancels the listing between and during pages. */
  signal?: AbortSignal;
  /**
   * Keys per ListObjectsV2 page (S3's maximum and default is 1000).
   * @default 1000
   */
  pageSize?: number;
}

/**
 * The picomatch options fast-glob derives from its defaults (fast-glob `providers/provider.js`
 * `_getMicromatchOptions`, with src/manifest/expand.ts's settings: `dot`, `baseNameMatch`,
 * `caseSensitiveMatch` left at their defaults, braces, extglobs and globstar on). So dot files and
 * dot folders are not matched by `*` or `**`, and case matters. fast-glob 3 matches with picomatch 2
 * (through micromatch), this module with picomatch 4: test/storage/s3/list.test.ts checks that both
 * select the same keys, pattern by pattern.
 */
export const FAST_GLOB_MATCH_OPTIONS: Readonly<picomatch.PicomatchOptions> = Object.freeze({
  dot: false,
  matchBase: false,
  nobrace: false,
  nocase: false,
  noext: false,
  noglobstar: false,
  posix: true,
  strictSlashes: false,
});

/**
 * The objects of `pattern` (`s3://bucket/<key glob>`) in key order (S3 lists keys in UTF-8 binary
 * order), as an async generator: one page is fetched when the previous one is used up.
 * Folder markers (keys ending in `/`) are skipped, as fast-glob's `onlyFiles` skips folders.
 * @throws {SourceError} `file_not_found` for a missing bucket, `source_forbidden`,
 *   `source_unavailable` after the SDK's retries; a {@link UsageError} for a malformed reference.
 */
export async function* listS3Glob(
  client: S3Client,
  pattern: string,
  options: ListS3GlobOptions = {},
): AsyncGenerator<S3ListedObject> {
  const { bucket, key: keyPattern } = parseS3Ref(pattern);
  const pageSize = options.pageSize ?? 1000;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) {
    throw new RangeError(`pageSize must be an integer from 1 to 1000, got ${String(pageSize)}`);
  }
  const isMatch = picomatch(keyPattern, FAST_GLOB_MATCH_OPTIONS);
  const prefix = globPrefix(keyPattern);
  let token: string | undefined;
  do {
    let page: ListObjectsV2CommandOutput;
    try {
      const command = new ListObjectsV2Command({
        Bucket: bucket,
        MaxKeys: pageSize,
        ...(prefix === '' ? {} : { Prefix: prefix }),
        ...(token === undefined ? {} : { ContinuationToken: token }),
      });
      page = await (options.signal === undefined
        ? client.send(command)
        : client.send(command, { abortSignal: options.signal }));
    } catch (error) {
      throw isAbort(error) ? error : toSourceError(error, pattern);
    }
    for (const object of page.Contents ?? []) {
      const key = object.Key;
      if (key === undefined || key.endsWith('/') || !isMatch(key)) continue;
      yield {
        ref: formatS3Ref(bucket, key),
        key,
        size: object.Size ?? 0,
        etag: object.ETag ?? '',
        lastModified: object.LastModified?.getTime() ?? 0,
      };
    }
    // A truncated page without a token would loop for ever on a faulty server: stop instead.
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
}
