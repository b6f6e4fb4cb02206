/**
 * The run's outputs under an S3 prefix (issue 33): `s3://bucket/prefix/` holds the keys the local
 * folder would (`results/<id>.jpg`, `report.json`, `thumbs/...`), written by single PutObjects, each
 * whole or absent. Bodies are spooled to a local cache folder first, so a report of 10^6 rows is sent
 * from a file with its length known (memory flat), and a committed result's bytes stay in the cache
 * (`<cacheDir>/objects/<key>`) for the review and the thumbnails, which then read no GET.
 *
 * The cache is trusted without asking S3: only this store writes it, after its own PUT succeeded
 * (or found the same sha256 stored), and drops it on a put, delete or {@link S3OutputStore.evict}.
 * A cache shared by two runs writing one key is not supported (their lock forbids it anyway).
 *
 * Write-once keys (`ifAbsent`) send `If-None-Match: *`. A 412 is answered by a HEAD: when the stored
 * object's recorded sha256 equals ours, a retried put found its own bytes and counts as stored;
 * otherwise `object_exists`, and the object is never overwritten. A 409 ConditionalRequestConflict
 * (a concurrent write of the key) is retried a few times. Other retries are the SDK's own.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { removeLeftovers } from '../local-output.js';
import {
  type ObjectWriter,
  type OutputStore,
  type PutBody,
  type PutOptions,
  type StagedFile,
  StorageError,
  type StoredObject,
} from '../types.js';
import type { S3Access } from './client.js';
import { nameOf, statusOf, toStoreError } from './output-errors.js';
import { type PutTarget, sendFile, sendPut } from './output-put.js';
import { CacheFolders, flatName, removeFile, STAGED_SUFFIX, spool, spoolWriter } from './output-spool.js';
import { checkKey, resolveInBucket } from './output-url.js';
import { formatS3Ref } from './ref.js';

/** Where {@link S3OutputStore.probe} writes (never listed as an output). */
const PROBE_FOLDER = '.kitchen-batch/';

/** Options of {@link S3OutputStore}. */
export interface S3OutputStoreOptions {
  /** The run's client (`createS3Client(env)`). */
  access: S3Access;
  bucket: string;
  /** `''` or a prefix ending in `/` (see `parseOutputUrl`). */
  prefix: string;
  /** A local folder for spooled bodies (`staging/`) and cached copies (`objects/`). */
  cacheDir: string;
  /** Keys per ListObjectsV2 page (1 to 1000). @default 1000 */
  listPageSize?: number;
}

/** {@link OutputStore} over an S3 prefix. */
export class S3OutputStore implements OutputStore {
  readonly remote = true;
  readonly location: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly cacheDir: string;
  readonly #access: S3Access;
  readonly #pageSize: number;
  readonly #folders = new CacheFolders();

  constructor(options: S3OutputStoreOptions) {
    const { prefix } = options;
    if (prefix !== '' && (!prefix.endsWith('/') || !checkKey(prefix.slice(0, -1)))) {
      throw new StorageError('bad_key', prefix, `not an output prefix: ${JSON.stringify(prefix)}`);
    }
    this.#access = options.access;
    this.bucket = options.bucket;
    this.prefix = prefix;
    this.cacheDir = path.resolve(options.cacheDir);
    this.location = formatS3Ref(this.bucket, prefix);
    this.#pageSize = options.listPageSize ?? 1000;
  }

  describe(key: string): string {
    return formatS3Ref(this.bucket, this.prefix + key);
  }

  async put(key: string, body: PutBody, options: PutOptions = {}): Promise<StoredObject> {
    checkKey(key);
    await this.evict(key);
    if (typeof body === 'string' || body instanceof Uint8Array) {
      const bytes = Buffer.from(body);
      return sendPut(this.#target, key, () => bytes, bytes.length, options);
    }
    const file = await this.#folders.stagedPath(this.#staging, key);
    try {
      await spool(file, body);
      return await sendFile(this.#target, key, file, options);
    } finally {
      await removeFile(file);
    }
  }

  async writer(key: string, options: PutOptions = {}): Promise<ObjectWriter> {
    checkKey(key);
    await this.evict(key);
    const file = await this.#folders.stagedPath(this.#staging, key);
    return spoolWriter(file, (spooled) => sendFile(this.#target, key, spooled, options));
  }

  async stage(near: string): Promise<StagedFile> {
    const file = await this.#folders.stagedPath(this.#staging, near);
    return {
      file,
      commit: async (key, options = {}, bytes) => {
        try {
          checkKey(key);
          await this.evict(key);
          // Downloads are stored write-once: never over an object this run did not write.
          const once = { ...options, ifAbsent: true };
          const stored =
            bytes === undefined
              ? await sendFile(this.#target, key, file, once)
              : await sendPut(this.#target, key, () => bytes, bytes.length, once);
          // The bytes stay as the cached copy: the review and the thumbnails read them with no GET.
          await this.#folders.moveInto(file, this.#cached(key));
          return stored;
        } catch (error) {
          await removeFile(file);
          throw error;
        }
      },
      discard: () => removeFile(file),
    };
  }

  async get(key: string): Promise<Readable> {
    checkKey(key);
    const cached = this.#cached(key);
    if (existsSync(cached)) return createReadStream(cached);
    try {
      const out = await this.#access.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }),
      );
      return out.Body as Readable;
    } catch (error) {
      if (nameOf(error) === 'NoSuchKey' || statusOf(error) === 404) {
        throw new StorageError('object_not_found', key, `${this.describe(key)} does not exist`, {
          cause: error,
        });
      }
      throw this.#error(error, key, 'reading');
    }
  }

  async head(key: string): Promise<StoredObject | null> {
    checkKey(key);
    try {
      const out = await this.#access.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }),
      );
      const sha256 = out.Metadata?.sha256;
      return {
        key,
        size: out.ContentLength ?? 0,
        mtimeMs: out.LastModified?.getTime() ?? 0,
        ...(sha256 === undefined ? {} : { sha256 }),
        ...(out.ETag ? { etag: out.ETag } : {}),
      };
    } catch (error) {
      if (nameOf(error) === 'NotFound' || nameOf(error) === 'NoSuchKey' || statusOf(error) === 404)
        return null;
      throw this.#error(error, key, 'checking');
    }
  }

  /** Paged ListObjectsV2 under `<prefix><prefix given>`; keys relative to the store's prefix. */
  async *list(prefix: string): AsyncIterable<StoredObject> {
    let token: string | undefined;
    do {
      let page: Awaited<ReturnType<S3OutputStore['listPage']>>;
      try {
        page = await this.listPage(prefix, token);
      } catch (error) {
        throw this.#error(error, prefix, 'listing');
      }
      for (const object of page.Contents ?? []) {
        const key = object.Key?.slice(this.prefix.length);
        if (key === undefined || key === '' || key.endsWith('/') || key.startsWith(PROBE_FOLDER)) continue;
        yield { key, size: object.Size ?? 0, mtimeMs: object.LastModified?.getTime() ?? 0 };
      }
      // A truncated page without a token would loop for ever on a faulty server: stop instead.
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  /** One ListObjectsV2 page (public for the list generator's type only). */
  listPage(prefix: string, token: string | undefined) {
    return this.#access.client.send(
      new ListObjectsV2Command({
        Bucket: this.bucket,
        Prefix: this.prefix + prefix,
        ...(this.#pageSize === 1000 ? {} : { MaxKeys: this.#pageSize }),
        ...(token === undefined ? {} : { ContinuationToken: token }),
      }),
    );
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    await this.evict(key);
    try {
      await this.#access.client.send(
        new DeleteObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }),
      );
    } catch (error) {
      throw this.#error(error, key, 'deleting');
    }
  }

  /**
   * Removes staged and spooled files of the cache whose names start with `prefix` (flattened) and
   * that nobody wrote to for `olderThanMs`. The bucket has nothing to sweep: a PUT is whole or absent.
   */
  async sweep(prefix: string, olderThanMs = 0): Promise<string[]> {
    const mine = (name: string) => name.endsWith(STAGED_SUFFIX) && name.startsWith(flatName(prefix));
    return removeLeftovers(this.#staging, mine, olderThanMs);
  }

  /**
   * The cached copy's absolute path when this run holds one, else `s3://bucket/<key>`. A relative
   * link is resolved against the prefix inside the bucket: `../shard-1/results/k1.jpg` from
   * `s3://b/runs/shard-2/` is `s3://b/runs/shard-1/results/k1.jpg` (a merged report's sibling run);
   * one that climbs above the bucket's root is a `bad_key`.
   */
  refOf(relative: string): string {
    const key = resolveInBucket(this.prefix, relative);
    if (key.startsWith(this.prefix)) {
      const cached = this.#cached(key.slice(this.prefix.length));
      if (existsSync(cached)) return cached;
    }
    return formatS3Ref(this.bucket, key);
  }

  /** The key's cached copy, fetched into the cache by a streamed GET when absent. */
  async localCopy(key: string): Promise<string> {
    const cached = this.#cached(checkKey(key));
    if (existsSync(cached)) return cached;
    const body = await this.get(key);
    const file = await this.#folders.stagedPath(this.#staging, key);
    try {
      await pipeline(body, createWriteStream(file));
      await this.#folders.moveInto(file, cached);
    } catch (error) {
      await removeFile(file);
      throw error;
    }
    return cached;
  }

  /**
   * Drops the key's cached copy (no error when there is none). Asked first: a result's key is
   * usually not cached, and an unlink that fails ENOENT costs the event loop an Error with its stack
   * (0.9 s of the main thread at 10^4 results, measured); a stat does not.
   */
  async evict(key: string): Promise<void> {
    const cached = this.#cached(checkKey(key));
    if (existsSync(cached)) await removeFile(cached);
  }

  /**
   * Proves the prefix writable before a run submits anything: PUTs `.kitchen-batch/probe-<pid>-<random>`
   * (If-None-Match: *) and deletes it. @throws {StorageError} `store_refused` naming the bucket, the
   * prefix, what S3 said and the credential source (never a secret).
   */
  async probe(): Promise<void> {
    const key = `${PROBE_FOLDER}probe-${process.pid}-${randomBytes(6).toString('hex')}`;
    try {
      await this.#access.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.prefix + key,
          Body: Buffer.from('probe\n'),
          IfNoneMatch: '*',
        }),
      );
      await this.#access.client.send(
        new DeleteObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }),
      );
    } catch (error) {
      const cause = this.#error(error, key, 'writing a probe object');
      throw new StorageError(
        'store_refused',
        key,
        `cannot write outputs to ${this.location} (bucket ${JSON.stringify(this.bucket)}, prefix ${JSON.stringify(this.prefix)}): ${cause.message}`,
        { cause },
      );
    }
  }

  /** What the put functions of output-put.ts need of this store. */
  get #target(): PutTarget {
    return {
      client: this.#access.client,
      bucket: this.bucket,
      prefix: this.prefix,
      maxAttempts: this.#access.config.maxAttempts,
      ...(this.#access.direct ? { direct: this.#access.direct } : {}),
      head: (key) => this.head(key),
      describe: (key) => this.describe(key),
      error: (error, key, doing) => this.#error(error, key, doing),
    };
  }

  get #staging(): string {
    return path.join(this.cacheDir, 'staging');
  }

  #cached(key: string): string {
    return path.join(this.cacheDir, 'objects', ...key.split('/'));
  }

  #error(error: unknown, key: string, doing: string): StorageError {
    return toStoreError(error, key, `${doing} ${this.describe(key)}`, this.#access, this.bucket);
  }
}
