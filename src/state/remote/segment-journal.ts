/**
 * The journal of a bucket run (docs/contract.md#outputs-in-object-storage): numbered, append-only
 * segment objects `<prefix>.kitchen-batch/journal/<seq>.jsonl`, each created with
 * `If-None-Match: *`, so two writers can never both write segment N. Records are group-committed
 * as the local journal's are, over a commit window: the records of many items queued meanwhile go
 * out in one PUT, a `sync` append resolves only once a segment holding it is stored, and a record
 * without `sync` goes out with the next PUT or within a second.
 *
 * Two segments are in flight at once: N+1 goes while N is on its way, so a record does not wait
 * for the PUT before its own to come back. A segment's records count (their appends resolve, they
 * reach the working copy) only once every segment before it is stored too, and N+2 waits for N.
 * So a crash with both in flight may leave N+1 stored without N: nothing was acknowledged from it,
 * and the next run that takes the lease deletes it (`loadRemoteJournal` names it) and writes
 * N again.
 *
 * A 412 on a segment means another run wrote it (it took the lease): the journal breaks with
 * `lease_lost`, and every later append fails, as the local journal breaks on a disk error, so the
 * flow stops submitting (a job id it cannot record is a job it may pay for twice). Every counted
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

/** Segments whose records are not counted yet, at most: N+2 is not sent before N is stored. */
export const SEGMENTS_IN_FLIGHT = 2;

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
  /**
   * How long the first record of a commit waits for others before a `sync` commit goes out. With
   * two segments in flight a commit can leave every window even when a PUT takes longer, so a
   * record waits about half the window plus one PUT. @default 50
   */
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

/** One commit: its records, the segment they went out as (none for a bare flush), and how it went. */
interface Commit {
  batch: Pending[];
  segment: { seq: number; body: Buffer } | null;
  state: 'sending' | 'stored' | 'failed';
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
  /** Commits not counted yet, oldest first. */
  readonly #inFlight: Commit[] = [];
  /** Counting commits in order (the working copy is appended one segment at a time). */
  #counting: Promise<void> = Promise.resolve();
  /** Each commit in flight until it is counted (or failed). */
  readonly #settling = new Set<Promise<void>>();
  #broken: unknown;

  constructor(options: SegmentJournalOptions) {
    this.#options = { commitWindowMs: 50, idleMs: 1000, ...options };
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
    while (this.#settling.size > 0) await Promise.all(this.#settling);
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
    if (this.#inFlight.length >= SEGMENTS_IN_FLIGHT) return; // a commit that is counted looks again
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
    const body = Buffer.from(batch.map((p) => p.line).join(''));
    const segment = body.length > 0 ? { seq: this.#seq++, body } : null;
    const commit: Commit = { batch, segment, state: 'sending' };
    this.#inFlight.push(commit);
    const settled = this.#send(commit).then(() => {
      this.#counting = this.#counting.then(() => this.#count());
      return this.#counting;
    });
    this.#settling.add(settled);
    void settled.finally(() => this.#settling.delete(settled));
  }

  /** Stores the commit's segment; a failure fails it and every commit after it. */
  async #send(commit: Commit): Promise<void> {
    try {
      if (this.#broken) throw this.#broken;
      if (commit.segment) {
        const { access, bucket, prefix } = this.#options;
        const key = segmentKey(prefix, commit.segment.seq);
        try {
          await access.client.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: key,
              Body: commit.segment.body,
              ContentType: 'application/x-ndjson',
              IfNoneMatch: '*',
            }),
          );
        } catch (error) {
          throw segmentError(error, formatS3Ref(bucket, key));
        }
      }
      if (commit.state === 'sending') commit.state = 'stored';
    } catch (error) {
      this.#fail(commit, error);
    }
  }

  /** Counts the stored commits at the head, in order: the working copy, then their appends resolve. */
  async #count(): Promise<void> {
    for (let head = this.#inFlight[0]; head && head.state !== 'sending'; head = this.#inFlight[0]) {
      this.#inFlight.shift();
      if (head.state === 'failed') continue; // rejected when it failed
      try {
        if (head.segment) {
          await appendFile(this.#options.mirror, head.segment.body);
          this.stats.syncs++;
          this.bytesWritten += head.segment.body.length;
        }
        this.stats.records += head.batch.filter((p) => p.line !== '').length;
        for (const p of head.batch) p.resolve();
      } catch (error) {
        this.#fail(head, error);
      }
    }
    if (this.#queue.length > 0) {
      this.#schedule(this.#queue.some((p) => p.sync) ? this.#options.commitWindowMs : this.#options.idleMs);
    }
  }

  /** The journal breaks: this commit's records, every later one's and the queue's appends fail. */
  #fail(commit: Commit, error: unknown): void {
    this.#broken ??= error;
    const failed = [commit, ...this.#inFlight.slice(this.#inFlight.indexOf(commit) + 1)];
    for (const c of failed) {
      c.state = 'failed';
      for (const p of c.batch) p.reject(this.#broken);
    }
    for (const p of this.#queue.splice(0)) p.reject(this.#broken);
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
