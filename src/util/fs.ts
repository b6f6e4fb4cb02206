import { createHash, randomBytes } from 'node:crypto';
import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * A file written whole or not at all, as a stream: {@link AtomicFile.write} appends (buffered, with
 * back-pressure, so nothing big is ever one string), {@link AtomicFile.commit} fsyncs, renames over
 * the target and fsyncs the folder; {@link AtomicFile.abort} removes the temp file and leaves the
 * target as it was.
 */
export class AtomicFile {
  readonly file: string;
  readonly #tmp: string;
  readonly #handle: FileHandle;
  #buffer = '';

  private constructor(file: string, tmp: string, handle: FileHandle) {
    this.file = file;
    this.#tmp = tmp;
    this.#handle = handle;
  }

  /** Starts writing `file` (a temp file beside it until {@link commit}). */
  static async open(file: string): Promise<AtomicFile> {
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    return new AtomicFile(file, tmp, await open(tmp, 'w'));
  }

  /** Appends text (written out in chunks of 64 kB); resolves when more may be written. */
  async write(text: string): Promise<void> {
    this.#buffer += text;
    if (this.#buffer.length >= 64 * 1024) await this.#flush();
  }

  /** Makes the file whole on disk under its name. */
  async commit(): Promise<void> {
    await this.#flush();
    await this.#handle.sync();
    await this.#handle.close();
    await rename(this.#tmp, this.file);
    await fsyncDir(path.dirname(this.file));
  }

  /** Gives up: the temp file is removed, the target untouched. */
  async abort(): Promise<void> {
    await this.#handle.close().catch(() => {});
    await rm(this.#tmp, { force: true });
  }

  async #flush(): Promise<void> {
    const text = this.#buffer;
    this.#buffer = '';
    // writeFile (not write) goes on after a short write, from the current position.
    if (text) await this.#handle.writeFile(text);
  }
}

/** fsyncs a directory so that renames and creations in it are durable (best effort where unsupported). */
export async function fsyncDir(dir: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // Some file systems refuse fsync on a directory; the rename is still atomic there.
  } finally {
    await handle?.close().catch(() => {});
  }
}

/**
 * fsync of one folder for many callers at once (group commit for renames into it): every caller
 * waits for an fsync that started after it called, and callers that come while one is under way
 * share the next one. 64 downloads renamed at once then cost two folder fsyncs, not 64.
 */
export function coalescedFsyncDir(dir: string): () => Promise<void> {
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    running = fsyncDir(dir).finally(() => {
      running = null;
    });
    return running;
  };
  return () => {
    if (!running) return start();
    next ??= running.then(() => {
      next = null;
      return start();
    });
    return next;
  };
}

/** sha256 of a buffer or string, hex. */
export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** sha256 of a stream's bytes (an object read from a store), hex. */
export async function sha256Stream(stream: AsyncIterable<Uint8Array | string>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk);
  return hash.digest('hex');
}

const LOCAL_FS_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM', 'EIO', 'EMFILE', 'ENFILE']);

/** An error from writing the local file (it carries a syscall), as opposed to the network. */
export function isLocalFsError(error: unknown): error is NodeJS.ErrnoException {
  const e = error as NodeJS.ErrnoException | undefined;
  return typeof e?.code === 'string' && LOCAL_FS_CODES.has(e.code) && typeof e.syscall === 'string';
}
