/**
 * The output store of a bucket prefix (`--out s3://bucket/prefix/`, docs/contract.md#outputs-in-object-storage):
 * the keys of a run folder (`results/k1.jpg`, `report.json`, `thumbs/...`) as objects under the
 * prefix. A PUT is whole or absent, so there are no temp objects: what is written a piece at a
 * time (reports, downloads) is filled in a local file of the cache folder first, then put. Results
 * are put once (`If-None-Match: *`) with their sha256 as metadata; a 412 whose object holds our
 * sha256 is our own earlier put (a retry after a lost answer), anything else is never overwritten.
 *
 * The cache folder is only a cache: staged files, and the local copies of the results this process
 * stored (`objects/<key>`), which the review and the thumbnails read without a GET.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
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
import { LocalObjectWriter } from '../local-output.js';
import {
  type ObjectWriter,
  type OutputStore,
  type PutBody,
  type PutOptions,
  type StagedFile,
  StorageError,
  type StoredObject,
} from '../types.js';
import { describeS3Access, type S3Access } from './client.js';
import { toSourceError } from './errors.js';
import { formatS3Ref, parseS3Ref } from './ref.js';

/** Where an output prefix is: a bucket, and a key prefix that is empty or ends in `/`. */
export interface OutputLocation {
  bucket: string;
  prefix: string;
}

/** `s3://bucket/prefix/` (trailing slashes optional) → bucket and `prefix/`; a UsageError when it is no S3 reference. */
export function parseOutputUrl(url: string): OutputLocation {
  const { bucket, key } = parseS3Ref(url, { prefix: true });
  const prefix = key.replace(/\/+$/, '');
  return { bucket, prefix: prefix === '' ? '' : `${prefix}/` };
}

/** Options of {@link S3OutputStore}. */
export interface S3OutputStoreOptions extends OutputLocation {
  access: S3Access;
  /** The local cache folder: staged files and the results' local copies. */
  cacheDir: string;
}

/** Whether a storage failure means the bucket could not be reached (after the client's retries). */
export function isStoreUnavailable(error: unknown): boolean {
  return error instanceof StorageError && error.code === 'store_unavailable';
}

/** Conflicting concurrent writes of one key (409 ConditionalRequestConflict) are retried this often. */
const CONFLICT_ATTEMPTS = 5;
/** Bodies up to this size are put from memory, so the SDK can retry them itself; larger ones are streamed. */
const IN_MEMORY = 8 * 1024 * 1024;

/** {@link OutputStore} over a bucket prefix. */
export class S3OutputStore implements OutputStore {
  readonly location: string;
  readonly #access: S3Access;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #cache: string;

  constructor(options: S3OutputStoreOptions) {
    this.#access = options.access;
    this.#bucket = options.bucket;
    this.#prefix = options.prefix;
    this.#cache = path.resolve(options.cacheDir);
    this.location = formatS3Ref(this.#bucket, this.#prefix).replace(/\/$/, '');
  }

  describe(key: string): string {
    return formatS3Ref(this.#bucket, this.#prefix + key);
  }

  refOf(relative: string): string {
    const key = path.posix.normalize(relative);
    const copy = this.#copyPath(key);
    if (copy && existsSync(copy)) return copy;
    // `../shard-1/results/k1.jpg`: a sibling prefix in the same bucket.
    return formatS3Ref(this.#bucket, path.posix.normalize(`${this.#prefix}${key}`).replace(/^(\.\.\/)+/, ''));
  }

  async put(key: string, body: PutBody, options: PutOptions = {}): Promise<StoredObject> {
    if (typeof body === 'string' || body instanceof Uint8Array) {
      return this.#put(key, { bytes: Buffer.from(body) }, options);
    }
    const tmp = await this.#scratch('tmp', key);
    try {
      await pipeline(body as AsyncIterable<string | Uint8Array>, createWriteStream(tmp));
      return await this.#putFile(key, tmp, options);
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async writer(key: string, options: PutOptions = {}): Promise<ObjectWriter> {
    const tmp = await this.#scratch('tmp', key);
    const commit = async () => {
      try {
        return await this.#putFile(key, tmp, options);
      } finally {
        await rm(tmp, { force: true });
      }
    };
    return new LocalObjectWriter(await open(tmp, 'w'), tmp, false, commit);
  }

  async stage(near: string): Promise<StagedFile> {
    const file = await this.#scratch('staging', near, '.part');
    return {
      file,
      commit: async (key, options = {}) => {
        try {
          // Downloads are stored write-once: never over an object this run did not write.
          const stored = await this.#putFile(key, file, { ...options, ifAbsent: true });
          // Kept as the local copy the review and the thumbnails read.
          const copy = this.#copyPath(key);
          if (copy) {
            await mkdir(path.dirname(copy), { recursive: true });
            await rename(file, copy);
          }
          return stored;
        } finally {
          await rm(file, { force: true });
        }
      },
      discard: () => rm(file, { force: true }),
    };
  }

  async get(key: string): Promise<Readable> {
    const copy = this.#copyPath(key);
    if (copy && existsSync(copy)) return createReadStream(copy);
    try {
      const answer = await this.#access.client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
      return answer.Body as Readable;
    } catch (error) {
      throw storageFailure(error, key, this.describe(key));
    }
  }

  async head(key: string): Promise<(StoredObject & { etag?: string }) | null> {
    try {
      const answer = await this.#access.client.send(
        new HeadObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
      return {
        key,
        size: answer.ContentLength ?? 0,
        mtimeMs: answer.LastModified?.getTime() ?? 0,
        ...(answer.Metadata?.sha256 ? { sha256: answer.Metadata.sha256 } : {}),
        ...(answer.ETag ? { etag: answer.ETag } : {}),
      };
    } catch (error) {
      const failure = storageFailure(error, key, this.describe(key));
      if (failure.code === 'object_not_found') return null;
      throw failure;
    }
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    let token: string | undefined;
    do {
      let page: Awaited<ReturnType<S3OutputStore['listPage']>>;
      try {
        page = await this.listPage(prefix, token);
      } catch (error) {
        throw storageFailure(error, prefix, this.describe(prefix));
      }
      for (const o of page.Contents ?? []) {
        if (!o.Key) continue;
        yield {
          key: o.Key.slice(this.#prefix.length),
          size: o.Size ?? 0,
          mtimeMs: o.LastModified?.getTime() ?? 0,
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** One page of ListObjectsV2 under `prefix` (relative to the store's). */
  listPage(prefix: string, token?: string) {
    return this.#access.client.send(
      new ListObjectsV2Command({
        Bucket: this.#bucket,
        Prefix: this.#prefix + prefix,
        ...(token ? { ContinuationToken: token } : {}),
      }),
    );
  }

  async delete(key: string): Promise<void> {
    await this.evict(key);
    try {
      await this.#access.client.send(
        new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.#prefix + key }),
      );
    } catch (error) {
      const failure = storageFailure(error, key, this.describe(key));
      if (failure.code !== 'object_not_found') throw failure;
    }
  }

  async sweep(_prefix: string, olderThanMs = 0): Promise<string[]> {
    // A PUT is whole or absent: only the cache can hold leftovers (a killed process's staged files).
    const removed: string[] = [];
    for (const sub of ['staging', 'tmp']) {
      const dir = path.join(this.#cache, sub);
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        const file = path.join(dir, name);
        const st = await stat(file).catch(() => null);
        if (!st || Date.now() - st.mtimeMs < olderThanMs) continue;
        await rm(file, { force: true });
        removed.push(name);
      }
    }
    return removed;
  }

  /** A local file holding the object's bytes: the cached copy, fetched into the cache when absent. */
  async localCopy(key: string): Promise<string> {
    const copy = this.#copyPath(key);
    if (!copy) throw new StorageError('bad_key', key, `${this.describe(key)}: not a key of ${this.location}`);
    if (existsSync(copy)) return copy;
    const tmp = await this.#scratch('tmp', key);
    try {
      await pipeline(await this.get(key), createWriteStream(tmp));
      await mkdir(path.dirname(copy), { recursive: true });
      await rename(tmp, copy);
      return copy;
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Drops the cached copy of `key` (the object stays). */
  async evict(key: string): Promise<void> {
    const copy = this.#copyPath(key);
    if (copy) await rm(copy, { force: true });
  }

  /**
   * Proves the prefix can be written before anything is paid for: puts a probe object under
   * `.kitchen-batch/` and deletes it. A `store_refused` StorageError names the bucket, the prefix,
   * what S3 said and where the credentials came from (never what they are).
   */
  async probe(): Promise<void> {
    const key = `.kitchen-batch/probe-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await this.#put(key, { bytes: Buffer.from('probe\n') }, { ifAbsent: true });
      await this.delete(key);
    } catch (error) {
      const said = error instanceof StorageError ? error.message : String(error);
      throw new StorageError(
        'store_refused',
        key,
        `cannot write to ${this.location}/ (${said}); ${describeS3Access(this.#access.config, this.#bucket)}`,
        { cause: error },
      );
    }
  }

  async #putFile(key: string, file: string, options: PutOptions): Promise<StoredObject> {
    const { size } = await stat(file);
    if (size <= IN_MEMORY) {
      const handle = await open(file, 'r');
      try {
        return await this.#put(key, { bytes: await handle.readFile() }, options);
      } finally {
        await handle.close();
      }
    }
    return this.#put(key, { file, size }, options);
  }

  /** PutObject with the write-once rule, conflicts retried; a body in memory or a file streamed. */
  async #put(
    key: string,
    body: { bytes: Buffer } | { file: string; size: number },
    options: PutOptions,
    ifMatch?: string,
  ): Promise<StoredObject> {
    const size = 'bytes' in body ? body.bytes.length : body.size;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#access.client.send(
          new PutObjectCommand({
            Bucket: this.#bucket,
            Key: this.#prefix + key,
            Body: 'bytes' in body ? body.bytes : createReadStream(body.file),
            ContentLength: size,
            ...(options.contentType ? { ContentType: options.contentType } : {}),
            ...(options.sha256 ? { Metadata: { sha256: options.sha256 } } : {}),
            ...(options.ifAbsent ? { IfNoneMatch: '*' } : {}),
            ...(ifMatch ? { IfMatch: ifMatch } : {}),
          }),
        );
        return { key, size, mtimeMs: Date.now(), ...(options.sha256 ? { sha256: options.sha256 } : {}) };
      } catch (error) {
        const status = statusOf(error);
        if (status === 409 && attempt < CONFLICT_ATTEMPTS) {
          await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
          continue;
        }
        if (status === 412 && options.ifAbsent) return this.#existing(key, body, options);
        throw storageFailure(error, key, this.describe(key));
      }
    }
  }

  /**
   * A write-once put found the key taken: ours (same sha256 and size) counts as stored; the object it
   * `replaces` (an earlier result of the item) is overwritten with `If-Match` on its ETag; anything
   * else is `object_exists`, and stays as it is.
   */
  async #existing(
    key: string,
    body: { bytes: Buffer } | { file: string; size: number },
    options: PutOptions,
  ): Promise<StoredObject> {
    const size = 'bytes' in body ? body.bytes.length : body.size;
    const there = await this.head(key);
    if (there && options.sha256 !== undefined && there.sha256 === options.sha256 && there.size === size) {
      return there;
    }
    if (there?.etag && options.replaces !== undefined && there.sha256 === options.replaces) {
      const { ifAbsent: _once, replaces: _old, ...rest } = options;
      return this.#put(key, body, rest, there.etag);
    }
    throw new StorageError(
      'object_exists',
      key,
      `${this.describe(key)} already holds another object` +
        (there?.sha256 ? ` (sha256 ${there.sha256.slice(0, 12)}…, ${there.size} bytes)` : ''),
    );
  }

  /** A fresh file name in a cache subfolder, named after `near`'s base name. */
  async #scratch(sub: string, near: string, ext = '.tmp'): Promise<string> {
    const dir = path.join(this.#cache, sub);
    await mkdir(dir, { recursive: true });
    const base = path.posix.basename(near).replace(/[^A-Za-z0-9._-]/g, '_');
    return path.join(dir, `.${base}.${process.pid}.${randomBytes(4).toString('hex')}${ext}`);
  }

  /** Where the local copy of `key` lives in the cache, or null for a key outside the prefix. */
  #copyPath(key: string): string | null {
    const normal = path.posix.normalize(key);
    if (normal.startsWith('../') || path.posix.isAbsolute(normal) || normal === '.') return null;
    return path.join(this.#cache, 'objects', ...normal.split('/'));
  }
}

function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/** A failure of an S3 call on `key`, as a {@link StorageError} (messages from the source mapping: no secret). */
function storageFailure(error: unknown, key: string, where: string): StorageError {
  if (error instanceof StorageError) return error;
  const mapped = toSourceError(error, where);
  const code =
    mapped.code === 'file_not_found' && !/bucket does not exist/.test(mapped.message)
      ? 'object_not_found'
      : mapped.code === 'source_unavailable'
        ? 'store_unavailable'
        : 'store_refused';
  return new StorageError(code, key, mapped.message, { cause: error });
}
