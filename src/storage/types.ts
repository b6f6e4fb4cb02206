/**
 * Where bytes live: the two narrow interfaces every stage, report and review reads sources and
 * writes outputs through (docs: /work/shared/STYLE.md "Where bytes live is a seam"). The local
 * file system is the one implementation today (`local-source.ts`, `local-output.ts`); an https or
 * S3 source and an S3 output prefix implement the same members, so nothing above this folder knows
 * that a result is a file or builds a path from the output folder.
 *
 * Keys of an {@link OutputStore} are relative, slash-separated and normalised (`results/k1.jpg`,
 * `report.json`, `thumbs/k1.out.webp`): exactly the paths report.json and report.html show, and
 * exactly the object keys under an S3 prefix.
 */
import type { Readable } from 'node:stream';
import { KitchenError } from '../errors.js';

/** What a source is known by before its bytes are read: enough to tell, on a rerun, that it did not change. */
export interface SourceInfo {
  /** The reference it was opened by (a local path today; a URL or `s3://bucket/key` later). */
  ref: string;
  size: number;
  /** Last modification, in ms since the epoch (a file's mtime, an object's Last-Modified). */
  mtimeMs: number;
  /**
   * A validator that changes whenever the bytes may have: an ETag or version id for an object,
   * `<size>-<mtimeMs>` for a file. Equal versions mean equal bytes; different ones mean "read again".
   */
  version: string;
  /** The ETag as the source sent it (quotes included), when it sent one: what `If-None-Match` sends back. */
  etag?: string;
  /** The Last-Modified header as the source sent it (an HTTP-date), for `If-Modified-Since`. */
  lastModified?: string;
  /** An S3 object's version id on a versioned bucket (null: none). */
  versionId?: string | null;
}

/**
 * What a caller (the journal, on a rerun) knows of a source it read before: enough for a
 * conditional read. Remote stores ask with the validators; the local store compares size and mtime.
 */
export interface KnownSource {
  size: number;
  mtimeMs: number;
  etag?: string;
  lastModified?: string;
  versionId?: string;
}

/** A conditional read's answer when the source did not change: no body was sent. */
export interface SourceNotModified {
  notModified: true;
  ref: string;
}

/** How one read is made. */
export interface SourceReadOptions {
  /** Cancels the request and the body. */
  signal?: AbortSignal;
}

/** A source opened for reading: its info, and its bytes in the form the caller wants. */
export interface OpenedSource extends SourceInfo {
  /**
   * A local file that holds exactly these bytes, when there is one (the local store: the file
   * itself), so a native decoder (sharp, the review's child process) can read it without a copy.
   * Null when the bytes are only reachable through {@link stream} or {@link bytes}.
   */
  localPath: string | null;
  /** The whole body, streamed (for hashing a source too big to hold). */
  stream(): Readable;
  /** The whole body in memory (for sources small enough to decode from memory). */
  bytes(): Promise<Buffer>;
  /** The first `n` bytes (or fewer, for a shorter source): what format sniffing needs. */
  head(n: number): Promise<Buffer>;
  /**
   * Lets go of a body nobody will read (a remote store keeps its connection until then); safe to
   * call twice, and after the body was read. Absent where there is nothing to let go of (a file).
   */
  close?(): void;
}

/**
 * Read access to source images. Errors keep the store's own code so that a caller can tell "no such
 * source" from "cannot read it" (the local store throws Node's errno errors: `ENOENT`, `EISDIR`,
 * `EACCES`...).
 */
export interface SourceStore {
  /** The source's info without reading its bytes; throws when it does not exist or is not a file. */
  stat(ref: string): Promise<SourceInfo>;
  /** Opens the source for reading; throws as {@link stat} does. */
  open(ref: string, options?: SourceReadOptions): Promise<OpenedSource>;
  /**
   * Opens the source only if it changed since it was `known` (http: `If-None-Match` /
   * `If-Modified-Since`, a 304 is `notModified`; S3: `If-None-Match` with the ETag). A store without
   * it is asked through `openIfChanged` of `sources.ts`, which compares size and mtime.
   */
  openIfChanged?(
    ref: string,
    known: KnownSource,
    options?: SourceReadOptions,
  ): Promise<OpenedSource | SourceNotModified>;
}

/** An object of an {@link OutputStore}, as {@link OutputStore.head} and {@link OutputStore.list} see it. */
export interface StoredObject {
  /** Its key, e.g. `results/k1.jpg`. */
  key: string;
  size: number;
  /** When it was last written, in ms since the epoch. */
  mtimeMs: number;
  /**
   * The sha256 (hex) the writer recorded with the object (S3: its `sha256` metadata), when there is
   * one: lets a rerun trust a stored result without reading it back. Absent for the local store.
   */
  sha256?: string;
  /** The object's ETag, where the store has one: what a conditional replace (`If-Match`) names. */
  etag?: string;
}

/** How an object is written. */
export interface PutOptions {
  /** Its media type (an S3 object's Content-Type); the local store has nowhere to keep it. */
  contentType?: string;
  /**
   * The sha256 of the body, hex, when the caller knows it (a verified download): kept as object
   * metadata by stores that have any, so a later run can trust the object without reading it.
   */
  sha256?: string;
  /**
   * Write only if no object has this key yet; otherwise fail with a {@link StorageError} of code
   * `object_exists` and leave the object as it was (S3: `If-None-Match: *`, answered 412).
   * @default false (the object is replaced whole)
   */
  ifAbsent?: boolean;
  /**
   * The sha256 of the object this write may replace: an earlier result of the same item, recorded
   * by the journal (a changed row's new job). A write-once store (a bucket) overwrites that object
   * and no other; the local store replaces files anyway.
   */
  replaces?: string;
  /**
   * Make the object durable before the put resolves (the local store: fsync the file, then its
   * folder). Off for caches a crash may lose (thumbnails), where 10,000 fsyncs would cost seconds.
   * @default true
   */
  durable?: boolean;
}

/** A body given whole: text, bytes, or a stream of either (a Node Readable is one). */
export type PutBody = string | Uint8Array | AsyncIterable<string | Uint8Array>;

/**
 * An object written a piece at a time and made visible whole or not at all: {@link commit} makes it
 * appear under its key, {@link abort} leaves the key as it was. Text is buffered into large writes,
 * so a report of 10^6 rows is never one string.
 */
export interface ObjectWriter {
  /** Appends text; resolves when more may be written (back-pressure). */
  write(text: string): Promise<void>;
  /** Makes the object appear whole under its key. */
  commit(): Promise<StoredObject>;
  /** Gives up: nothing appears, the key keeps what it had. */
  abort(): Promise<void>;
}

/**
 * A local file to be filled by a writer that needs a path (the result download streams into a file
 * and may decode it there), then committed under a key whole, or discarded.
 */
export interface StagedFile {
  /** The local file to write. It is fsynced by whoever writes it (the download flushes its stream). */
  readonly file: string;
  /**
   * Moves the file's bytes under `key` (atomic, durable unless `durable: false`) and returns what
   * was stored. The staged file is gone afterwards, whether or not this succeeds. `bytes`: the
   * file's content when the caller holds it already (a download that kept its verified bytes); a
   * bucket sends them instead of reading the file back, a folder ignores them.
   */
  commit(key: string, options?: PutOptions, bytes?: Buffer): Promise<StoredObject>;
  /** Removes the staged file; nothing is stored. Safe to call after a commit or twice. */
  discard(): Promise<void>;
}

/**
 * The run's outputs: results, reports, thumbnails, the plan file: a local folder
 * (`LocalOutputStore`) or an S3 prefix (`S3OutputStore`). Every write is atomic: a reader sees the
 * old object or the new one, never a torn one.
 */
export interface OutputStore {
  /** Where the store is, for messages: the folder's absolute path, or the bucket URL. */
  readonly location: string;
  /**
   * Each write waits on a network round trip (a bucket): callers that write many small objects
   * (thumbnails) keep more of them under way, so the CPU is not idle while they travel.
   */
  readonly remote: boolean;
  /** Writes `body` under `key`, whole or not at all. */
  put(key: string, body: PutBody, options?: PutOptions): Promise<StoredObject>;
  /** Starts a streamed write of `key` (see {@link ObjectWriter}). */
  writer(key: string, options?: PutOptions): Promise<ObjectWriter>;
  /**
   * A local file to fill before the key is known (a result's extension comes from its bytes). `near`
   * names the key it will roughly have (`results/<id>`), so that the local store stages it in the
   * same folder (a rename, not a copy) under a name {@link sweep} recognises.
   */
  stage(near: string): Promise<StagedFile>;
  /** The object's bytes as a stream; a {@link StorageError} `object_not_found` when there is none. */
  get(key: string): Promise<Readable>;
  /** The object's size and time, or null when there is none. */
  head(key: string): Promise<StoredObject | null>;
  /** The objects whose keys start with `prefix` (a folder: `thumbs/`), in no particular order. */
  list(prefix: string): AsyncIterable<StoredObject>;
  /** Removes the object; no error when there is none. */
  delete(key: string): Promise<void>;
  /**
   * Removes staged files under `prefix` that a killed writer left behind and nobody wrote to for
   * `olderThanMs` (0: all of them, for a caller that holds the run's lock). Returns their names.
   */
  sweep(prefix: string, olderThanMs?: number): Promise<string[]>;
  /**
   * The {@link SourceStore} reference of what a relative link from the store's root points at:
   * `results/k1.jpg` is the store's own object; `../shard-1/results/k1.jpg` (a merged report's
   * link into a sibling run) is outside it. How the review and the thumbnails read a result.
   */
  refOf(relative: string): string;
  /**
   * A local file holding the object's bytes, for a native decoder (the review): a bucket store
   * fetches it into its cache when it is not there. Absent where {@link refOf} is a file already.
   */
  localCopy?(key: string): Promise<string>;
  /** What a user is told to open for `key` (a file path, or a URL). */
  describe(key: string): string;
}

/** Codes of {@link StorageError}. */
export type StorageErrorCode =
  | 'object_exists'
  | 'object_not_found'
  | 'bad_key'
  | 'store_refused'
  | 'store_unavailable'
  | 'body_mismatch';

/**
 * A storage operation that cannot be done as asked: `object_exists` (a put with `ifAbsent` found
 * the key taken), `object_not_found` (a get of a missing key), `bad_key` (a key that is not a relative,
 * normalised, slash-separated path), `store_refused` (a remote store said no: missing bucket, access
 * denied, unknown key id), `store_unavailable` (a remote store could not be reached after the client's
 * retries: network, timeout, 5xx, SlowDown), `body_mismatch` (a remote store found the bytes differ
 * from the sha256 the put declared: they changed after they were verified). Faults of the medium itself (disk full, permission) keep the
 * medium's own error (Node's errno errors), so that callers' disk-fault handling is unchanged.
 */
export class StorageError extends KitchenError {
  declare readonly code: StorageErrorCode;
  /** The key the operation was about. */
  readonly key: string;

  constructor(code: StorageErrorCode, key: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.key = key;
  }
}
