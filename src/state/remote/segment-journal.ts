/**
 * The journal of a bucket run (docs/contract.md#outputs-in-object-storage): numbered, append-only
 * segment objects `<prefix>.kitchen-batch/journal/<seq>.jsonl`, each created with
 * `If-None-Match: *`, so two writers can never both write segment N. Records are group-committed
 * as the local journal's are, over a commit window: the records of many items queued meanwhile go
 * out in one PUT, a `sync` append resolves only once a segment holding it is stored, and a record
 * without `sync` goes out with the next PUT or within a second. One PUT is in flight at a time.
 *
 * A 412 on a segment means another run wrote it (it took the lease): the journal breaks with
 * `lease_lost`, and every later append fails, as the local journal breaks on a disk error, so the
 * flow stops submitting (a job id it cannot record is a job it may pay for twice). Every stored
 * segment is also appended to the local working copy, so it always equals the bucket's journal.
 */
import { appendFile } from 'node:fs/promises';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { StateError } from '../../errors.js';
import type { S3Access } from '../../storage/s3/client.js';
import { formatS3Ref } from '../../storage/s3/ref.js';
import type { Journal } from '../journal.js';
import type { JournalRecord } from '../records.js';
import { segmentKey } from './keys.js';

/** Options of {@link SegmentJournal}. */
export interface SegmentJournalOptions {
  access: S3Access;
  bucket: string;
  /** The run's key prefix (empty or ending in `/`). */
  prefix: string;
  /** The number of the next segment (one past the last stored). */
  nextSeq: number;
  /** The local working copy every stored segment is appended to. */
  mirror: string;
  /** How long the first record of a commit waits for others before a `sync` commit goes out. @default 100 */
  commitWindowMs?: number;
  /** How long records without `sync` may wait. @default 1000 */
  idleMs?: number;
}

interface Pending {
  line: string;
  sync: boolean;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** {@link Journal} as segment objects in a bucket. */
export class SegmentJournal implements Journal {
  readonly stats = { records: 0, syncs: 0 };
  bytesWritten = 0;
  readonly #options: Required<SegmentJournalOptions>;
  #seq: number;
  #queue: Pending[] = [];
  /** When the oldest queued record was queued. */
  #firstAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = 0;
  #writing: Promise<void> | null = null;
  #broken: unknown;

  constructor(options: SegmentJournalOptions) {
    this.#options = { commitWindowMs: 100, idleMs: 1000, ...options };
    this.#seq = options.nextSeq;
  }

  /** The number the next segment will get. */
  get nextSeq(): number {
    return this.#seq;
  }

  append(record: JournalRecord, options: { sync?: boolean } = {}): Promise<void> {
    return this.#push(`${JSON.stringify(record)}\n`, options.sync ?? false);
  }

  flush(): Promise<void> {
    return this.#push('', true, 0);
  }

  /** Makes the journal fail every append from now on (the lease was lost). */
  break(error: unknown): void {
    this.#broken ??= error;
  }

  async close(): Promise<void> {
    if (this.#queue.length > 0 && !this.#broken) await this.flush().catch(() => {});
    while (this.#writing) await this.#writing;
    clearTimeout(this.#timer);
  }

  #push(line: string, sync: boolean, windowMs = this.#options.commitWindowMs): Promise<void> {
    if (this.#broken) return Promise.reject(this.#broken);
    return new Promise<void>((resolve, reject) => {
      if (this.#queue.length === 0) this.#firstAt = Date.now();
      this.#queue.push({ line, sync, resolve, reject });
      this.#schedule(sync ? windowMs : this.#options.idleMs);
    });
  }

  /** Commits within `waitMs` of the oldest queued record (sooner if a commit is already due sooner). */
  #schedule(waitMs: number): void {
    if (this.#writing) return; // the running commit looks again when it ends
    const due = this.#firstAt + waitMs;
    if (this.#timer && this.#timerAt <= due) return;
    clearTimeout(this.#timer);
    this.#timerAt = due;
    this.#timer = setTimeout(() => this.#commit(), Math.max(0, due - Date.now()));
  }

  #commit(): void {
    this.#timer = undefined;
    const batch = this.#queue.splice(0);
    if (batch.length === 0) return;
    this.#writing = this.#write(batch).finally(() => {
      this.#writing = null;
      if (this.#queue.length > 0) {
        this.#schedule(this.#queue.some((p) => p.sync) ? this.#options.commitWindowMs : this.#options.idleMs);
      }
    });
  }

  async #write(batch: Pending[]): Promise<void> {
    const text = batch.map((p) => p.line).join('');
    try {
      if (this.#broken) throw this.#broken;
      if (text.length > 0) {
        const { access, bucket, prefix, mirror } = this.#options;
        const key = segmentKey(prefix, this.#seq);
        try {
          await access.client.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: key,
              Body: Buffer.from(text),
              ContentType: 'application/x-ndjson',
              IfNoneMatch: '*',
            }),
          );
        } catch (error) {
          throw segmentError(error, formatS3Ref(bucket, key));
        }
        this.#seq++;
        this.stats.syncs++;
        this.bytesWritten += Buffer.byteLength(text);
        await appendFile(mirror, text);
      }
      this.stats.records += batch.filter((p) => p.line !== '').length;
      for (const p of batch) p.resolve();
    } catch (error) {
      this.#broken ??= error;
      for (const p of batch) p.reject(this.#broken);
      for (const p of this.#queue.splice(0)) p.reject(this.#broken);
    }
  }
}

/** Why a segment could not be stored: another writer (412: `lease_lost`), or the bucket (`journal_write_failed`). */
function segmentError(error: unknown, where: string): StateError {
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (status === 412) {
    return new StateError(
      'lease_lost',
      `${where} was written by another run: it took this run's lease. Stopping new submissions; ` +
        'the other run continues the journal',
      { cause: error },
    );
  }
  const said = (error as Error)?.name ?? String(error);
  return new StateError(
    'journal_write_failed',
    `cannot store the journal segment ${where} (${said}${status ? `, HTTP ${status}` : ''}): stopping new submissions so no job id is lost`,
    { cause: error },
  );
}
