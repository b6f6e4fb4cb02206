import { createReadStream } from 'node:fs';
import { type FileHandle, mkdtemp, open, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

/**
 * Lines kept on disk for a second pass (output that needs totals before its rows): a temp file
 * written once in order, read back in order, then removed. Memory holds 64 kB of it at a time.
 */
export class Spool {
  readonly #dir: string;
  readonly #file: string;
  readonly #handle: FileHandle;
  #buffer = '';

  private constructor(dir: string, handle: FileHandle) {
    this.#dir = dir;
    this.#file = path.join(dir, 'lines');
    this.#handle = handle;
  }

  /** A new, empty spool in the OS temp folder. */
  static async create(prefix = 'kitchen-batch-spool-'): Promise<Spool> {
    const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
    return new Spool(dir, await open(path.join(dir, 'lines'), 'w'));
  }

  /** Appends one line (without its newline). */
  async write(line: string): Promise<void> {
    this.#buffer += `${line}\n`;
    if (this.#buffer.length >= 64 * 1024) await this.#flush();
  }

  /** The lines written, in order (the spool is closed for writing). */
  async *lines(): AsyncGenerator<string> {
    await this.#flush();
    await this.#handle.close();
    yield* createInterface({ input: createReadStream(this.#file), crlfDelay: Number.POSITIVE_INFINITY });
  }

  /** Removes the temp file. */
  async remove(): Promise<void> {
    await this.#handle.close().catch(() => {});
    await rm(this.#dir, { recursive: true, force: true });
  }

  async #flush(): Promise<void> {
    const text = this.#buffer;
    this.#buffer = '';
    if (text) await this.#handle.writeFile(text);
  }
}
