import { open, readFile, stat, truncate } from 'node:fs/promises';
import { StateError } from '../errors.js';
import type { JournalRecord } from './records.js';

/** What reading a journal found. */
export interface JournalContents {
  records: JournalRecord[];
  /** Set when a torn last line (a crash mid-append) was cut off. */
  tornLine: number | null;
}

/**
 * Reads `journal.jsonl`. A torn last line (no newline, not valid JSON: a crash during an append) is
 * cut off the file so the next append starts on a clean line, and reported; a bad line anywhere else
 * is corruption: a {@link StateError} naming the line, never a silent reset.
 */
export async function readJournal(
  file: string,
  options: { repair?: boolean } = {},
): Promise<JournalContents> {
  const repair = options.repair ?? true;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], tornLine: null };
    throw error;
  }
  const records: JournalRecord[] = [];
  let tornLine: number | null = null;
  let offset = 0;
  let line = 0;
  while (offset < text.length) {
    line++;
    const end = text.indexOf('\n', offset);
    const last = end === -1;
    const raw = text.slice(offset, last ? text.length : end);
    const next = last ? text.length : end + 1;
    if (raw.trim() !== '') {
      let record: unknown;
      try {
        record = JSON.parse(raw);
      } catch {
        record = undefined;
      }
      if (!isRecord(record)) {
        if (last) {
          tornLine = line;
          if (repair) await truncate(file, Buffer.byteLength(text.slice(0, offset)));
          break;
        }
        throw new StateError(
          'journal_corrupt',
          `${file}:${line}: journal line is not a valid record; the journal is damaged in the middle ` +
            '(not a torn last line), so the run stops rather than forget jobs it already paid for. ' +
            'Move the folder aside or repair the line.',
        );
      }
      records.push(record);
    }
    offset = next;
  }
  // A valid last record without its newline: add it, so the next append does not glue onto it.
  if (repair && tornLine === null && text.length > 0 && !text.endsWith('\n')) {
    const handle = await open(file, 'a');
    try {
      await handle.write('\n');
    } finally {
      await handle.close();
    }
  }
  return { records, tornLine };
}

function isRecord(value: unknown): value is JournalRecord {
  return typeof value === 'object' && value !== null && typeof (value as { t?: unknown }).t === 'string';
}

interface Pending {
  line: string;
  sync: boolean;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * The append-only journal. Appends are serialised and group-committed: records queued while a write
 * is under way go out in one write, with one fsync when any of them asked for it. Once an append
 * fails (disk full, I/O error) the journal is broken and every later append fails too: the engine
 * must stop submitting, since a job id it cannot record is a job it may pay for twice.
 */
export class JournalWriter {
  readonly file: string;
  #handle: Awaited<ReturnType<typeof open>> | undefined;
  #queue: Pending[] = [];
  #writing = false;
  #broken: unknown;
  /** Bytes written through this writer (for compaction decisions). */
  bytesWritten = 0;

  private constructor(file: string) {
    this.file = file;
  }

  /** Opens (creating) the journal for appending. */
  static async open(file: string): Promise<JournalWriter> {
    const writer = new JournalWriter(file);
    writer.#handle = await open(file, 'a');
    return writer;
  }

  /** Appends one record; with `sync`, resolves only once it is on disk (fsync). */
  append(record: JournalRecord, options: { sync?: boolean } = {}): Promise<void> {
    if (this.#broken) return Promise.reject(this.#broken);
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ line: `${JSON.stringify(record)}\n`, sync: options.sync ?? false, resolve, reject });
      void this.#drain();
    });
  }

  /** Flushes and fsyncs everything queued. */
  async flush(): Promise<void> {
    if (this.#broken) throw this.#broken;
    await new Promise<void>((resolve, reject) => {
      this.#queue.push({ line: '', sync: true, resolve, reject });
      void this.#drain();
    });
  }

  /** Size of the file on disk. */
  async size(): Promise<number> {
    return (await stat(this.file)).size;
  }

  /** Flushes and closes. */
  async close(): Promise<void> {
    while (this.#writing || this.#queue.length > 0) await new Promise((r) => setImmediate(r));
    await this.#handle?.close().catch(() => {});
    this.#handle = undefined;
  }

  async #drain(): Promise<void> {
    if (this.#writing) return;
    this.#writing = true;
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0);
        await this.#writeBatch(batch);
      }
    } finally {
      this.#writing = false;
    }
  }

  async #writeBatch(batch: Pending[]): Promise<void> {
    try {
      if (this.#broken) throw this.#broken;
      if (!this.#handle) throw new StateError('journal_closed', `${this.file}: journal is closed`);
      const text = batch.map((p) => p.line).join('');
      if (text.length > 0) {
        await this.#handle.write(text);
        this.bytesWritten += Buffer.byteLength(text);
      }
      if (batch.some((p) => p.sync)) await this.#handle.sync();
      for (const p of batch) p.resolve();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      this.#broken =
        error instanceof StateError
          ? error
          : new StateError(
              'journal_write_failed',
              `cannot append to ${this.file}${code ? ` (${code})` : ''}: stopping new submissions so no job id is lost`,
              { cause: error },
            );
      for (const p of batch) p.reject(this.#broken);
      for (const p of this.#queue.splice(0)) p.reject(this.#broken);
    }
  }
}
