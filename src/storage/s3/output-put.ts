/**
 * The PutObject of the S3 output store (issue 33), with its write-once rules: `ifAbsent` sends
 * `If-None-Match: *`; a 412 is answered by a HEAD, and a stored object holding our sha256 counts as
 * stored (a retried put that finds its own bytes), anything else is `object_exists` and is never
 * overwritten; a 409 ConditionalRequestConflict (a concurrent write of the key) is retried with
 * back-off, a few times. Every other retry is the SDK's own (5xx, SlowDown, resets).
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { type PutOptions, StorageError, type StoredObject } from '../types.js';
import { withPayloadHash } from './client.js';
import type { DirectPut } from './direct-put.js';
import { isStoreUnavailable, nameOf, statusOf } from './output-errors.js';

/** Bodies up to this size are sent from memory (the SDK can resend them on its retries). */
const IN_MEMORY_BODY = 8 * 1024 * 1024;
/** What S3 answers to a body that does not match its declared sha256 (or MD5). */
const MISMATCH = new Set(['XAmzContentSHA256Mismatch', 'BadDigest']);
/** Attempts of a put answered 409 ConditionalRequestConflict, the first included. */
const CONFLICT_ATTEMPTS = 4;

/** What a put needs of its store. */
export interface PutTarget {
  client: S3Client;
  bucket: string;
  prefix: string;
  /** The client's attempts per call (`S3AccessConfig.maxAttempts`), for streamed bodies the SDK does not retry. */
  maxAttempts: number;
  /** The client's direct puts (in-memory bodies without the SDK's middleware), if any. */
  direct?: DirectPut;
  head(key: string): Promise<StoredObject | null>;
  describe(key: string): string;
  /** The StorageError for an SDK failure while `doing` (e.g. `writing`) the key. */
  error(error: unknown, key: string, doing: string): StorageError;
}

/** PUTs a local file: from memory when small (the SDK may resend it), else streamed with its length. */
export async function sendFile(
  target: PutTarget,
  key: string,
  file: string,
  options: PutOptions,
): Promise<StoredObject> {
  const { size } = await stat(file);
  if (size <= IN_MEMORY_BODY) {
    const bytes = await readFile(file);
    return sendPut(target, key, () => bytes, size, options);
  }
  return sendPut(target, key, () => createReadStream(file), size, options);
}

/**
 * One PutObject with the write-once rules; `body` makes a fresh body for each retry. An in-memory
 * body goes direct first (direct-put.ts) when the client knows the bucket's route; anything but a
 * plain answer there is sent again through the SDK, below. The SDK does not retry a request whose
 * body is a stream ("non-retryable streaming request"), so a streamed put that fails as unavailable
 * (5xx, SlowDown, reset) is retried here, up to the client's `maxAttempts` in all, with a new
 * stream of the file each time.
 */
export async function sendPut(
  target: PutTarget,
  key: string,
  body: () => Buffer | Readable,
  size: number,
  options: PutOptions,
  ifMatch?: string,
): Promise<StoredObject> {
  const stored = (): StoredObject => ({
    key,
    size,
    // PutObject answers no Last-Modified: the local clock stands in (head() gives the server's).
    mtimeMs: Date.now(),
    ...(options.sha256 === undefined ? {} : { sha256: options.sha256 }),
  });
  const direct = target.direct;
  if (direct?.knows(target.bucket)) {
    const bytes = body();
    if (Buffer.isBuffer(bytes)) {
      const answer = await direct.put({
        bucket: target.bucket,
        key: target.prefix + key,
        body: bytes,
        ...(options.sha256 === undefined
          ? {}
          : { sha256: options.sha256, metadata: { sha256: options.sha256 } }),
        ...(options.contentType === undefined ? {} : { contentType: options.contentType }),
        ...(options.ifAbsent ? { ifNoneMatch: '*' as const } : {}),
        ...(ifMatch === undefined ? {} : { ifMatch }),
      });
      if (answer.kind === 'stored') return stored();
      if (answer.kind === 'exists') {
        const cause = Object.assign(new Error(`PutObject ${key}: HTTP 412`), {
          name: 'PreconditionFailed',
          $metadata: { httpStatusCode: 412 },
        });
        return alreadyStored(target, key, body, size, options, cause);
      }
    } else {
      // A file too large for memory streams through the SDK; this stream was not sent.
      bytes.destroy();
    }
  }
  return sendThroughSdk(target, key, body, options, size, ifMatch, stored);
}

/** {@link sendPut} through the SDK's PutObjectCommand, with its retries and ours. */
async function sendThroughSdk(
  target: PutTarget,
  key: string,
  body: () => Buffer | Readable,
  options: PutOptions,
  size: number,
  ifMatch: string | undefined,
  stored: () => StoredObject,
): Promise<StoredObject> {
  let conflicts = 0;
  let streamed = 0;
  for (let attempt = 1; ; attempt++) {
    const sent = body();
    try {
      const input = {
        Bucket: target.bucket,
        Key: target.prefix + key,
        Body: sent,
        ContentLength: size,
        ...(options.contentType === undefined ? {} : { ContentType: options.contentType }),
        ...(options.sha256 === undefined ? {} : { Metadata: { sha256: options.sha256 } }),
        ...(options.ifAbsent ? { IfNoneMatch: '*' } : {}),
        ...(ifMatch === undefined ? {} : { IfMatch: ifMatch }),
      };
      // A verified download's sha256 is the payload's: S3 checks the bytes against it.
      if (options.sha256 !== undefined) withPayloadHash(input, options.sha256);
      await target.client.send(new PutObjectCommand(input));
      return stored();
    } catch (error) {
      if (!Buffer.isBuffer(sent)) sent.destroy();
      const status = statusOf(error);
      if (status === 409 && ++conflicts < CONFLICT_ATTEMPTS) {
        await backOff(attempt);
        continue;
      }
      if (!Buffer.isBuffer(sent) && isStoreUnavailable(error) && ++streamed < target.maxAttempts) {
        await backOff(attempt);
        continue;
      }
      if (status === 412 && options.ifAbsent) return alreadyStored(target, key, body, size, options, error);
      const name = nameOf(error);
      if (MISMATCH.has(name)) {
        throw new StorageError(
          'body_mismatch',
          key,
          `writing ${target.describe(key)}: the store found its bytes differ from the sha256 they were verified with (${name}); the local copy changed since, nothing was stored`,
          { cause: error },
        );
      }
      throw target.error(error, key, 'writing');
    }
  }
}

/** Exponential back-off with jitter: about 100 ms, 200 ms, 400 ms... */
function backOff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt * (0.5 + Math.random())));
}

/**
 * A write-once put found the key taken: stored when the object holds our sha256; the object the put
 * `replaces` (an earlier result of the item, by the journal's sha256) is overwritten with `If-Match`
 * on its ETag; anything else is `object_exists`.
 */
async function alreadyStored(
  target: PutTarget,
  key: string,
  body: () => Buffer | Readable,
  size: number,
  options: PutOptions,
  cause: unknown,
): Promise<StoredObject> {
  const existing = await target.head(key);
  if (existing && options.sha256 !== undefined && existing.sha256 === options.sha256) return existing;
  if (existing?.etag && options.replaces !== undefined && existing.sha256 === options.replaces) {
    const { ifAbsent: _once, replaces: _earlier, ...rest } = options;
    return sendPut(target, key, body, size, rest, existing.etag);
  }
  throw new StorageError(
    'object_exists',
    key,
    `${target.describe(key)} exists already${existing?.sha256 ? ' with other bytes' : ''}; it is left as it was`,
    { cause },
  );
}
