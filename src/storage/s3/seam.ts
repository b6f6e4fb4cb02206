/**
 * The source side of the storage seam, declared here STRUCTURALLY IDENTICAL to
 * src/storage/types.ts on branch i31-storage (`SourceInfo`, `OpenedSource`, `SourceStore`), because
 * that file is not on this branch yet. On merge, delete this file and import those names from
 * `../types.js`: the S3 store implements exactly these members.
 */
import type { Readable } from 'node:stream';

/** What a source is known by before its bytes are read: enough to tell, on a rerun, that it did not change. */
export interface SourceInfo {
  /** The reference it was opened by (a local path; a URL or `s3://bucket/key`). */
  ref: string;
  size: number;
  /** Last modification, in ms since the epoch (a file's mtime, an object's Last-Modified). */
  mtimeMs: number;
  /** A validator that changes whenever the bytes may have (an ETag or version id for an object). */
  version: string;
}

/** A source opened for reading: its info, and its bytes in the form the caller wants. */
export interface OpenedSource extends SourceInfo {
  /** A local file holding exactly these bytes, when there is one; null for remote sources. */
  localPath: string | null;
  /** The whole body, streamed. */
  stream(): Readable;
  /** The whole body in memory. */
  bytes(): Promise<Buffer>;
  /** The first `n` bytes (or fewer, for a shorter source). */
  head(n: number): Promise<Buffer>;
}

/** Read access to source images; errors keep the store's own code. */
export interface SourceStore {
  /** The source's info without reading its bytes. */
  stat(ref: string): Promise<SourceInfo>;
  /** Opens the source for reading; throws as {@link stat} does. */
  open(ref: string): Promise<OpenedSource>;
}
