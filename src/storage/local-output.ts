/**
 * The output store of a local folder (the run's `--out`): every key is a file under the folder,
 * written to a temp file beside its target, fsynced, renamed over it (or hard-linked, for a put
 * that must not replace), and the folder fsynced so the rename itself survives a power cut. The
 * layout is the keys' own: `results/<id>.jpg`, `report.json`, `thumbs/...`.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { type FileHandle, link, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { coalescedFsyncDir } from '../util/fs.js';
import {
  type ObjectWriter,
  type OutputStore,
  type PutBody,
  type PutOptions,
  type StagedFile,
  StorageError,
  type StoredObject,
} from './types.js';

/** Text is written out in pieces of this size: big enough for few syscalls, small enough to stay flat. */
const WRITE_CHUNK = 64 * 1024;

/**
 * A staged download is `.<name>.<pid>.part` beside its target: hidden, named for its writer, and
 * recognised by {@link LocalOutputStore.sweep} when a killed run left it behind.
 */
function isStaged(name: string): boolean {
  return name.startsWith('.') && name.endsWith('.part');
}

/** A put's temp file: `<name>.<pid>.<random>.tmp` beside its target, never listed as an object. */
function isTemp(name: string): boolean {
  return /\.\d+\.[0-9a-f]{8}\.tmp$/.test(name);
}

/** {@link OutputStore} over a local folder. */
export class LocalOutputStore implements OutputStore {
  readonly remote = false;
  readonly location: string;
  /** One coalesced folder fsync per folder: 64 results renamed at once cost two fsyncs, not 64. */
  readonly #syncs = new Map<string, () => Promise<void>>();
  /** Folders known to exist, so a put does not mkdir again. */
  readonly #made = new Map<string, Promise<unknown>>();

  /** A store over `dir` (made absolute; created on the first write). */
  constructor(dir: string) {
    this.location = path.resolve(dir);
  }

  async put(key: string, body: PutBody, options: PutOptions = {}): Promise<StoredObject> {
    const file = await this.#writable(key);
    const tmp = tempName(file);
    const handle = await open(tmp, 'w');
    try {
      if (typeof body === 'string' || body instanceof Uint8Array) await handle.writeFile(body);
      else for await (const chunk of body) await handle.writeFile(chunk);
      if (options.durable !== false) await handle.sync();
    } catch (error) {
      await handle.close().catch(() => {});
      await rm(tmp, { force: true });
      throw error;
    }
    await handle.close();
    return this.#commit(tmp, file, key, options);
  }

  async writer(key: string, options: PutOptions = {}): Promise<ObjectWriter> {
    const file = await this.#writable(key);
    const tmp = tempName(file);
    const commit = () => this.#commit(tmp, file, key, options);
    return new LocalObjectWriter(await open(tmp, 'w'), tmp, options.durable !== false, commit);
  }

  async stage(near: string): Promise<StagedFile> {
    const target = await this.#writable(near);
    const file = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.part`);
    return {
      file,
      commit: async (key, options = {}) => {
        let dest: string;
        try {
          dest = await this.#writable(key);
        } catch (error) {
          await rm(file, { force: true });
          throw error;
        }
        return this.#commit(file, dest, key, options);
      },
      discard: () => rm(file, { force: true }),
    };
  }

  async get(key: string): Promise<Readable> {
    const file = this.#file(key);
    const stream = createReadStream(file);
    // Opening is asynchronous: wait for it, so that a missing key fails here and not mid-read.
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve());
      stream.once('error', (error: NodeJS.ErrnoException) => {
        reject(
          error.code === 'ENOENT' || error.code === 'ENOTDIR' || error.code === 'EISDIR'
            ? new StorageError('object_not_found', key, `${this.describe(key)} does not exist`, {
                cause: error,
              })
            : error,
        );
      });
    });
    return stream;
  }

  async head(key: string): Promise<StoredObject | null> {
    const st = await stat(this.#file(key)).catch(() => null);
    return st?.isFile() ? { key, size: st.size, mtimeMs: st.mtimeMs } : null;
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    // The deepest folder the prefix names whole: `thumbs/` lists thumbs/, `results/k` lists results/.
    const cut = prefix.lastIndexOf('/');
    const base = cut < 0 ? '' : prefix.slice(0, cut);
    if (base !== '') this.#file(base);
    yield* this.#walk(base, prefix);
  }

  async delete(key: string): Promise<void> {
    await rm(this.#file(key), { force: true });
  }

  async sweep(prefix: string, olderThanMs = 0): Promise<string[]> {
    const dir = prefix === '' ? this.location : this.#file(prefix.replace(/\/$/, ''));
    return removeLeftovers(dir, isStaged, olderThanMs);
  }

  refOf(relative: string): string {
    return path.resolve(this.location, relative);
  }

  describe(key: string): string {
    return path.join(this.location, key);
  }

  /** The key's file, its folder created. */
  async #writable(key: string): Promise<string> {
    const file = this.#file(key);
    const dir = path.dirname(file);
    let made = this.#made.get(dir);
    if (!made) {
      made = mkdir(dir, { recursive: true });
      this.#made.set(dir, made);
      // A failed mkdir (read-only disk) must not stick: the next write tries again.
      made.catch(() => this.#made.delete(dir));
    }
    await made;
    return file;
  }

  /** Puts the finished temp file under its name: rename (replace) or hard link (only if absent). */
  async #commit(tmp: string, file: string, key: string, options: PutOptions): Promise<StoredObject> {
    try {
      if (options.ifAbsent) {
        // link(2) fails with EEXIST when the name is taken, atomically: the local If-None-Match.
        await link(tmp, file).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'EEXIST') throw error;
          throw new StorageError('object_exists', key, `${this.describe(key)} exists already`, {
            cause: error,
          });
        });
        await rm(tmp, { force: true });
      } else {
        await rename(tmp, file);
      }
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    }
    if (options.durable !== false) await this.#syncDir(path.dirname(file));
    const st = await stat(file);
    return { key, size: st.size, mtimeMs: st.mtimeMs };
  }

  #syncDir(dir: string): Promise<void> {
    let sync = this.#syncs.get(dir);
    if (!sync) {
      sync = coalescedFsyncDir(dir);
      this.#syncs.set(dir, sync);
    }
    return sync();
  }

  /**
   * The file of a key. A key is relative, slash-separated and normalised: no empty, `.` or `..`
   * segment, no backslash, no leading slash, so that no key can name a file outside the folder.
   */
  #file(key: string): string {
    const parts = key.split('/');
    if (
      key === '' ||
      key.includes('\\') ||
      key.includes('\0') ||
      parts.some((p) => p === '' || p === '.' || p === '..')
    ) {
      throw new StorageError(
        'bad_key',
        key,
        `not a storage key: ${JSON.stringify(key)} (relative, slash-separated, no . or ..)`,
      );
    }
    return path.join(this.location, ...parts);
  }

  async *#walk(base: string, prefix: string): AsyncIterable<StoredObject> {
    const dir = base === '' ? this.location : path.join(this.location, ...base.split('/'));
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const key = base === '' ? entry.name : `${base}/${entry.name}`;
      if (entry.isDirectory()) {
        // Only folders the prefix may reach into.
        if (`${key}/`.startsWith(prefix) || prefix.startsWith(`${key}/`)) yield* this.#walk(key, prefix);
        continue;
      }
      if (!entry.isFile() || !key.startsWith(prefix) || isStaged(entry.name) || isTemp(entry.name)) continue;
      const st = await stat(path.join(dir, entry.name)).catch(() => null);
      if (st) yield { key, size: st.size, mtimeMs: st.mtimeMs };
    }
  }
}

/**
 * Removes the files of `dir` that `match` accepts and nobody wrote to for `olderThanMs` (0: all of
 * them); returns their names. Staged files of killed writers, in a run folder or a bucket's cache.
 */
export async function removeLeftovers(
  dir: string,
  match: (name: string) => boolean,
  olderThanMs: number,
): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!match(name)) continue;
    const file = path.join(dir, name);
    if (olderThanMs > 0) {
      // Another writer may be filling it now: only one left alone that long is left over.
      const st = await stat(file).catch(() => null);
      if (!st || Date.now() - st.mtimeMs < olderThanMs) continue;
    }
    await rm(file, { force: true });
    removed.push(name);
  }
  return removed;
}

function tempName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
}

/** {@link ObjectWriter} of the local store: a temp file filled in 64 kB writes, committed by rename. */
export class LocalObjectWriter implements ObjectWriter {
  readonly #handle: FileHandle;
  readonly #durable: boolean;
  readonly #commit: () => Promise<StoredObject>;
  readonly #tmp: string;
  #buffer = '';

  constructor(handle: FileHandle, tmp: string, durable: boolean, commit: () => Promise<StoredObject>) {
    this.#handle = handle;
    this.#tmp = tmp;
    this.#durable = durable;
    this.#commit = commit;
  }

  async write(text: string): Promise<void> {
    this.#buffer += text;
    if (this.#buffer.length >= WRITE_CHUNK) await this.#flush();
  }

  async commit(): Promise<StoredObject> {
    try {
      await this.#flush();
      if (this.#durable) await this.#handle.sync();
      await this.#handle.close();
    } catch (error) {
      await this.abort();
      throw error;
    }
    return this.#commit();
  }

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

/** The store a caller named: a store as it is, a folder path as the {@link LocalOutputStore} over it. */
export function toOutputStore(target: OutputStore | string): OutputStore {
  return typeof target === 'string' ? new LocalOutputStore(target) : target;
}
