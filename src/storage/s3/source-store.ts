/**
 * Source images in S3 (issue 32): `stat` is a HeadObject, `open` a streamed GetObject, both behind
 * the seam's `SourceStore` so that preflight and the fingerprint do not know a source is an object.
 * Failures are {@link SourceError}s with issue 32's codes (see `errors.ts`); a source over the size
 * cap is refused from its Content-Length before a body byte is read, and a body that runs past the
 * cap anyway (a length that lied) is cut there.
 */
import { Readable } from 'node:stream';
import {
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { DEFAULT_MAX_SOURCE_BYTES } from '../../limits.js';
import { SourceError } from '../http/errors.js';
import type { KnownSource, OpenedSource, SourceInfo, SourceStore } from '../types.js';
import { isAbort, toSourceError } from './errors.js';
import { parseS3Ref } from './ref.js';

/** Options of one read. */
export interface S3ReadOptions {
  /** Cancels the request and the body stream; the caller's abort error is thrown as it is. */
  signal?: AbortSignal;
  /**
   * Refuse a source larger than this many bytes with `too_large` (`--max-source-bytes`).
   * @default the store's `maxBytes`
   */
  maxBytes?: number;
}

/** Options of an {@link S3SourceStore}. */
export interface S3SourceStoreOptions {
  /**
   * The size cap for every read, in bytes; `Infinity` for none.
   * @default 200 * 1024 * 1024 (issue 32's `--max-source-bytes` default)
   */
  maxBytes?: number;
}

/** A source's info with the S3 validators it was derived from. */
export interface S3SourceInfo extends SourceInfo {
  /** The object's ETag as S3 sends it (quotes included): what a conditional GET sends back. */
  etag: string;
  /** The version id on a versioned bucket, else null. */
  versionId: string | null;
}

/** What a conditional open answers when the object still has the ETag the caller knew. */
export interface S3NotModified {
  notModified: true;
  ref: string;
  etag: string;
}

/** An opened S3 source; {@link close} releases the body when the caller reads none of it. */
export interface S3OpenedSource extends OpenedSource {
  etag: string;
  versionId: string | null;
  /** Releases the connection of a body that was never streamed; safe to call twice. */
  close(): void;
}

/** The default size cap: issue 32's `--max-source-bytes` default, 200 MB. */
export { DEFAULT_MAX_SOURCE_BYTES };

function tooLarge(ref: string, max: number, size?: number): SourceError {
  const what = size === undefined ? 'is larger than' : `is ${size} bytes, over`;
  return new SourceError({
    code: 'too_large',
    reason: 'size',
    message: `${ref} ${what} the source size cap of ${max} bytes (--max-source-bytes)`,
  });
}

// The body's bytes as one stream, cut with `too_large` past `max`, stream faults as SourceErrors.
// An async generator keeps one chunk in memory at a time and destroys the body however it ends.
async function* capped(
  first: readonly Buffer[],
  rest: AsyncIterator<Buffer> | null,
  release: () => void,
  ref: string,
  max: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  let seen = 0;
  try {
    for (const chunk of first) {
      seen += chunk.length;
      if (seen > max) throw tooLarge(ref, max);
      yield chunk;
    }
    while (rest !== null) {
      let next: IteratorResult<Buffer>;
      try {
        next = await rest.next();
      } catch (error) {
        throw readFault(error, ref, signal);
      }
      if (next.done) return;
      seen += next.value.length;
      if (seen > max) throw tooLarge(ref, max);
      yield next.value;
    }
  } finally {
    release();
  }
}

/**
 * A fault while a body streams. When the caller aborted, the socket's own error (a reset, "aborted")
 * is the abort's doing, not the source's: the abort is thrown, never `source_unavailable`.
 */
function readFault(error: unknown, ref: string, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason instanceof Error ? signal.reason : error;
  return isAbort(error) ? error : toSourceError(error, ref);
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * S3 implementation of the seam's `SourceStore`, over one shared {@link S3Client}. References are
 * `s3://bucket/key`, taken verbatim (`parseS3Ref`).
 */
export class S3SourceStore implements SourceStore {
  readonly #client: S3Client;
  readonly #maxBytes: number;

  constructor(client: S3Client, options: S3SourceStoreOptions = {}) {
    const max = options.maxBytes ?? DEFAULT_MAX_SOURCE_BYTES;
    if (!(max > 0)) throw new RangeError(`maxBytes must be a positive number of bytes, got ${String(max)}`);
    this.#client = client;
    this.#maxBytes = max;
  }

  /** The object's size, Last-Modified, ETag and version id from a HeadObject; no body is read. */
  async stat(ref: string, options: S3ReadOptions = {}): Promise<S3SourceInfo> {
    const { bucket, key } = parseS3Ref(ref);
    try {
      const command = new HeadObjectCommand({ Bucket: bucket, Key: key });
      const head = await (options.signal === undefined
        ? this.#client.send(command)
        : this.#client.send(command, { abortSignal: options.signal }));
      return infoOf(ref, head);
    } catch (error) {
      throw isAbort(error) ? error : toSourceError(error, ref);
    }
  }

  /** Opens the object with a GetObject; the body is streamed, not read, until the caller asks. */
  async open(ref: string, options: S3ReadOptions = {}): Promise<S3OpenedSource> {
    const opened = await this.#get(ref, options, {});
    if ('notModified' in opened) throw new Error('unreachable: an unconditional GET answered 304');
    return opened;
  }

  /**
   * Opens the object only if its ETag is no longer `etag` (a GetObject with `If-None-Match`), so a
   * rerun downloads nothing that did not change: S3 answers 304 and no body is sent. `known` may be
   * the seam's {@link KnownSource} (the journal's record); without an ETag the object is read whole.
   */
  async openIfChanged(
    ref: string,
    known: string | KnownSource,
    options: S3ReadOptions = {},
  ): Promise<S3OpenedSource | S3NotModified> {
    const etag = typeof known === 'string' ? known : known.etag;
    if (etag === undefined || etag === '') return this.open(ref, options);
    return this.#get(ref, options, { IfNoneMatch: etag });
  }

  async #get(
    ref: string,
    options: S3ReadOptions,
    condition: { IfNoneMatch?: string },
  ): Promise<S3OpenedSource | S3NotModified> {
    const { bucket, key } = parseS3Ref(ref);
    const max = options.maxBytes ?? this.#maxBytes;
    const send = this.#sender(options.signal);
    let got: GetObjectCommandOutput;
    try {
      got = await send(new GetObjectCommand({ Bucket: bucket, Key: key, ...condition }));
    } catch (error) {
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 304 && condition.IfNoneMatch !== undefined) {
        return { notModified: true, ref, etag: condition.IfNoneMatch };
      }
      throw isAbort(error) ? error : toSourceError(error, ref);
    }
    const body = got.Body as Readable | undefined;
    const info = infoOf(ref, got);
    if (info.size > max) {
      body?.destroy();
      throw tooLarge(ref, max, info.size);
    }
    return openedSource(
      info,
      body ?? null,
      max,
      async (n) => {
        // Later reads are pinned to the ETag first seen: the bytes are those of this version or a
        // 412 (PreconditionFailed → source_unavailable: a rerun reads the new version whole).
        // A version id pins the bytes outright; an ETag does through If-Match (412 when replaced).
        const pin =
          info.versionId !== null
            ? { VersionId: info.versionId }
            : info.etag !== ''
              ? { IfMatch: info.etag }
              : {};
        const input = { Bucket: bucket, Key: key, ...pin };
        const command = new GetObjectCommand(
          n === undefined ? input : { ...input, Range: `bytes=0-${n - 1}` },
        );
        try {
          return ((await send(command)).Body as Readable | undefined) ?? null;
        } catch (error) {
          throw isAbort(error) ? error : toSourceError(error, ref);
        }
      },
      options.signal,
    );
  }

  /** `send` with the caller's signal; errors as the SDK threw them (the caller maps them). */
  #sender(signal: AbortSignal | undefined) {
    const client = this.#client;
    return (command: GetObjectCommand): Promise<GetObjectCommandOutput> =>
      signal === undefined ? client.send(command) : client.send(command, { abortSignal: signal });
  }
}

/** The {@link S3SourceInfo} of a HeadObject or GetObject answer. */
function infoOf(
  ref: string,
  answer: {
    ContentLength?: number | undefined;
    LastModified?: Date | undefined;
    ETag?: string | undefined;
    VersionId?: string | undefined;
  },
): S3SourceInfo {
  const etag = answer.ETag ?? '';
  const versionId = answer.VersionId ?? null;
  return {
    ref,
    size: answer.ContentLength ?? 0,
    mtimeMs: answer.LastModified?.getTime() ?? 0,
    // A version id names these exact bytes for ever; an ETag changes whenever they do.
    version: versionId ?? etag,
    etag,
    versionId,
  };
}

/**
 * The opened source over a GET's body: the first {@link OpenedSource.stream} (or {@link
 * OpenedSource.head}) reads that body; a second stream, or a head after the body was handed out,
 * sends another GET pinned to the ETag.
 */
function openedSource(
  info: S3SourceInfo,
  body: Readable | null,
  max: number,
  getAgain: (n?: number) => Promise<Readable | null>,
  signal: AbortSignal | undefined,
): S3OpenedSource {
  const peeked: Buffer[] = [];
  let peekedBytes = 0;
  let iterator: AsyncIterator<Buffer> | null = body === null ? null : body[Symbol.asyncIterator]();
  let held = body !== null;
  const release = () => {
    held = false;
    body?.destroy();
  };
  const fromBody = (source: Readable | null, first: readonly Buffer[], rest: AsyncIterator<Buffer> | null) =>
    Readable.from(
      capped(first, rest, () => source?.destroy(), info.ref, max, signal),
      { objectMode: false },
    );
  const stream = (): Readable => {
    if (held) {
      held = false;
      const rest = iterator;
      iterator = null;
      return fromBody(body, peeked.splice(0), rest);
    }
    // A lazy stream: the second GET is sent when the consumer starts reading.
    return Readable.from(
      (async function* () {
        const again = await getAgain();
        if (again === null) return;
        yield* capped([], again[Symbol.asyncIterator](), () => again.destroy(), info.ref, max, signal);
      })(),
      { objectMode: false },
    );
  };
  return {
    ...info,
    localPath: null,
    stream,
    bytes: () => collect(stream()),
    async head(n: number): Promise<Buffer> {
      if (n <= 0) return Buffer.alloc(0);
      if (held && iterator !== null) {
        // Peek at the held body; stream() later replays what was peeked.
        while (peekedBytes < n) {
          let next: IteratorResult<Buffer>;
          try {
            next = await iterator.next();
          } catch (error) {
            release();
            throw readFault(error, info.ref, signal);
          }
          if (next.done) break;
          peeked.push(next.value);
          peekedBytes += next.value.length;
        }
        return Buffer.concat(peeked).subarray(0, n);
      }
      const part = await getAgain(n);
      return part === null ? Buffer.alloc(0) : (await collect(part)).subarray(0, n);
    },
    close: () => {
      if (held) release();
    },
  };
}
