import { open, stat, truncate } from 'node:fs/promises';
import { StateError } from '../errors.js';
import { type FoldOptions, JournalFold } from './fold.js';
import type { JournalRecord } from './records.js';

/** What reading a journal found. */
export interface JournalContents {
  records: JournalRecord[];
  /** Set when a torn last line (a crash mid-append) was cut off. */
  tornLine: number | null;
}

/** What {@link scanJournal} saw. */
export interface JournalScan {
  /** Records passed to the visitor. */
  records: number;
  /** Set when a torn last line (a crash mid-append) was cut off. */
  tornLine: number | null;
}

/**
 * Streams `journal.jsonl` line by line, calling `onRecord` for each record in order, so a journal of
 * any size is read in memory bounded by its longest line. A torn last line (no newline, not valid
 * JSON: a crash during an append) is cut off the file so the next append starts on a clean line, and
 * reported; a bad line anywhere else is corruption: a {@link StateError} naming the line, never a
 * silent reset. A missing file is an empty journal.
 */
export async function scanJournal(
  file: string,
  onRecord: (record: JournalRecord) => void,
  options: { repair?: boolean } = {},
): Promise<JournalScan> {
  const repair = options.repair ?? true;
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { records: 0, tornLine: null };
    throw error;
  }
  let line = 0;
  let records = 0;
  /** Byte offset where the line being read starts (where a torn last line is cut). */
  let offset = 0;
  let pending: Buffer[] = [];
  const take = (bytes: Buffer): JournalRecord | null | undefined => {
    line++;
    const text = bytes.toString('utf8');
    if (text.trim() === '') return undefined;
    let record: unknown;
    try {
      record = JSON.parse(text);
    } catch {
      return null;
    }
    return isRecord(record) ? record : null;
  };
  try {
    for await (const chunk of handle.createReadStream({ highWaterMark: 1 << 20, autoClose: false })) {
      const buffer = chunk as Buffer;
      let start = 0;
      for (let nl = buffer.indexOf(10, start); nl !== -1; nl = buffer.indexOf(10, start)) {
        const piece =
          pending.length > 0
            ? Buffer.concat([...pending, buffer.subarray(start, nl)])
            : buffer.subarray(start, nl);
        pending = [];
        const record = take(piece);
        if (record === null) throw corrupt(file, line);
        if (record) {
          onRecord(record);
          records++;
        }
        offset += piece.length + 1;
        start = nl + 1;
      }
      if (start < buffer.length) pending.push(buffer.subarray(start));
    }
  } finally {
    await handle.close();
  }
  if (pending.length === 0) return { records, tornLine: null };
  // The last line has no newline: a record whose newline was lost, or a line torn by a crash.
  const record = take(Buffer.concat(pending));
  if (record === null) {
    if (repair) await truncate(file, offset);
    return { records, tornLine: line };
  }
  if (record) {
    onRecord(record);
    records++;
  }
  // Add the missing newline, so the next append does not glue onto the last record.
  if (repair) {
    const append = await open(file, 'a');
    try {
      await append.write('\n');
    } finally {
      await append.close();
    }
  }
  return { records, tornLine: null };
}

/** Folds a journal file, streamed: item states and the last run/plan records; see {@link scanJournal}. */
export async function loadJournal(
  file: string,
  options: { repair?: boolean } & FoldOptions = {},
): Promise<{ fold: JournalFold; tornLine: number | null }> {
  const fold = new JournalFold(options);
  const { tornLine } = await scanJournal(file, (record) => fold.add(record), options);
  return { fold, tornLine };
}

/** Reads every record of a (small) journal into memory; see {@link scanJournal} for the rules. */
export async function readJournal(
  file: string,
  options: { repair?: boolean } = {},
): Promise<JournalContents> {
  const records: JournalRecord[] = [];
  const { tornLine } = await scanJournal(file, (record) => records.push(record), options);
  return { records, tornLine };
}

function corrupt(file: string, line: number): StateError {
  return new StateError(
    'journal_corrupt',
    `${file}:${line}: journal line is not a valid record; the journal is damaged in the middle ` +
      '(not a torn last line), so the run stops rather than forget jobs it already paid for. ' +
      'Move the folder aside or repair the line.',
  );
}

function isRecord(value: unknown): value is JournalRecord {
  return typeof value === 'object' && value !== null && typeof (value as { t?: unknown }).t === 'string';
}

/**
 * What the run appends its records to: the local `journal.jsonl` ({@link JournalWriter}) or a
 * bucket's segment objects (`remote/segment-journal.ts`). Both group-commit, and both break for
 * good on the first write that fails.
 */
export interface Journal {
  /** Appends one record; with `sync`, resolves only once it is durable (fsynced, or stored). */
  append(record: JournalRecord, options?: { sync?: boolean }): Promise<void>;
  /** Makes everything appended so far durable. */
  flush(): Promise<void>;
  /** Flushes and closes. */
  close(): Promise<void>;
  /** Records appended, and durable writes made (fsyncs, or PUTs). */
  readonly stats: { records: number; syncs: number };
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
export class JournalWriter implements Journal {
  readonly file: string;
  #handle: Awaited<ReturnType<typeof open>> | undefined;
  #queue: Pending[] = [];
  #writing = false;
  #broken: unknown;
  /** Bytes written through this writer (for compaction decisions). */
  bytesWritten = 0;
  /** Records appended and fsyncs done: group commit shares one fsync among all records queued meanwhile. */
  readonly stats = { records: 0, syncs: 0 };

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
      this.stats.records += batch.filter((p) => p.line !== '').length;
      if (batch.some((p) => p.sync)) {
        await this.#handle.sync();
        this.stats.syncs++;
      }
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
