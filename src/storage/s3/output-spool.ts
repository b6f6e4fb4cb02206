/**
 * The local side of the S3 output store (issue 33): temp files in `<cacheDir>/staging/` that a body,
 * a streamed writer or a download fills before one PutObject sends them whole (an S3 PUT is whole or
 * absent, so nothing partial ever shows in the bucket), and the {@link ObjectWriter} over them.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { LocalObjectWriter } from '../local-output.js';
import type { ObjectWriter, PutBody, StoredObject } from '../types.js';

/** The suffix every staged or spooled file has, so that a sweep recognises them. */
export const STAGED_SUFFIX = '.part';

/** `results/k1` as one file name (`results~k1`), so staged names say what they were for. */
export function flatName(key: string): string {
  return key.replaceAll('/', '~');
}

/**
 * The cache's folders, each made once per run rather than once per object (a `mkdir` and an `rm` of a
 * missing file per result cost the event loop seconds at 10^4 results). A folder removed meanwhile
 * is made again by {@link CacheFolders.moveInto}.
 */
export class CacheFolders {
  readonly #made = new Map<string, Promise<unknown>>();

  /** Makes `dir` (and its parents) unless this run made it already. */
  make(dir: string): Promise<unknown> {
    let made = this.#made.get(dir);
    if (!made) {
      made = mkdir(dir, { recursive: true });
      made.catch(() => this.#made.delete(dir));
      this.#made.set(dir, made);
    }
    return made;
  }

  /** Renames `file` to `dest`, making `dest`'s folder (again, when it was removed since). */
  async moveInto(file: string, dest: string): Promise<void> {
    const dir = path.dirname(dest);
    await this.make(dir);
    try {
      await rename(file, dest);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      this.#made.delete(dir);
      await this.make(dir);
      await rename(file, dest);
    }
  }

  /** A fresh staged file's path for `near` (`<flat near>.<pid>.<random>.part`), its folder made. */
  async stagedPath(stagingDir: string, near: string): Promise<string> {
    await this.make(stagingDir);
    const name = `${flatName(near)}.${process.pid}.${randomBytes(4).toString('hex')}${STAGED_SUFFIX}`;
    return path.join(stagingDir, name);
  }
}

/** Removes one file; a file that is not there is no error (cheaper than `rm` with `force`). */
export async function removeFile(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Writes a whole body (text, bytes, or a stream of either) to `file`; removes it on failure. */
export async function spool(file: string, body: PutBody): Promise<void> {
  const handle = await open(file, 'w');
  try {
    if (typeof body === 'string' || body instanceof Uint8Array) await handle.writeFile(body);
    else for await (const chunk of body) await handle.writeFile(chunk);
    await handle.close();
  } catch (error) {
    await handle.close().catch(() => {});
    await removeFile(file);
    throw error;
  }
}

/**
 * {@link ObjectWriter} of the S3 store: text spooled to a staged file (the local store's writer, in
 * 64 KiB writes), which `send` PUTs on commit; the file is removed afterwards, sent or not.
 */
export async function spoolWriter(
  file: string,
  send: (file: string) => Promise<StoredObject>,
): Promise<ObjectWriter> {
  return new LocalObjectWriter(await open(file, 'w'), file, false, async () => {
    try {
      return await send(file);
    } finally {
      await removeFile(file);
    }
  });
}
