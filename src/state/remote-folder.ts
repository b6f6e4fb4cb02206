/**
 * A run folder by its `--out`: a local folder (`run-folder.ts`), or a bucket prefix
 * (`s3://bucket/prefix/`, docs/contract.md#outputs-in-object-storage) opened by `remote/folder.ts`.
 * The bucket side, and with it the AWS SDK, is loaded only when an `--out` names a bucket, so a run
 * into a local folder never loads it, and a command that only reads a journal loads neither side.
 */
import type { S3Env } from '../storage/s3/client.js';
import { isS3Ref } from '../storage/s3/ref.js';
import type { JournalFold } from './fold.js';
import type { RunFolder, RunFolderOptions } from './run-folder.js';

/** What a bucket run folder needs beyond a local one's options. */
export interface RemoteFolderOptions extends RunFolderOptions {
  /** `--cache DIR`; null for the default (`defaultCacheDir` of storage/outputs.ts). */
  cacheDir: string | null;
  /** The environment the S3 client is configured from (the sources' one). */
  env: S3Env;
}

/** Opens the run folder `dir`: a bucket prefix (`openRemoteRunFolder`) or a local folder (`openRunFolder`). */
export async function openOutFolder(dir: string, options: RemoteFolderOptions): Promise<RunFolder> {
  // Either side's code (the run's logger, the lock) only for a command that opens a run folder:
  // `plan` and `report` read a journal and load neither.
  if (!isS3Ref(dir)) {
    const { openRunFolder } = await import('./run-folder.js');
    return openRunFolder(dir, options);
  }
  const { openRemoteRunFolder } = await import('./remote/folder.js');
  return openRemoteRunFolder(dir, options);
}

/**
 * A bucket run's journal folded, read without the lease (what `plan` shows): the segments are read
 * into a private file of the cache, so a run working meanwhile is not disturbed.
 */
export async function readRemoteFold(
  url: string,
  options: { cacheDir: string | null; env: S3Env },
): Promise<JournalFold> {
  const { readRemoteFold } = await import('./remote/folder.js');
  return readRemoteFold(url, options);
}
