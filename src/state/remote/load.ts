/**
 * Reading a bucket run's journal into its local working copy, and compacting it into a snapshot.
 * The journal is the newest `snapshot-<seq>.jsonl` (when there is one) followed by the segments
 * numbered after it; segments at or below a snapshot's number are leftovers of a compaction cut
 * short (the snapshot was stored, some deletes were not) and are ignored, then removed by the next
 * compaction. A last segment stored without the one before it is what a run that died with two
 * segments in flight leaves (see `SegmentJournal`): none of its records counted, so it is left out
 * (`orphan`), and the run that holds the lease deletes it. Any other gap in the numbering is damage,
 * never skipped: the run refuses to go on.
 */
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { StateError } from '../../errors.js';
import type { S3Access } from '../../storage/s3/client.js';
import { formatS3Ref } from '../../storage/s3/ref.js';
import { journalPrefix, parseJournalName, segmentKey, snapshotKey } from './keys.js';

/** Where a bucket run is. */
export interface RemoteRun {
  access: S3Access;
  bucket: string;
  /** Empty or ending in `/`. */
  prefix: string;
}

/** What {@link loadRemoteJournal} found. */
export interface RemoteJournalInfo {
  /** The number the next segment gets. */
  nextSeq: number;
  /** Segments read after the snapshot. */
  segments: number;
  /** The snapshot read first, or null. */
  snapshotSeq: number | null;
  /** Every journal object's key (for a compaction to delete the covered ones). */
  keys: string[];
  /** The key of a last segment stored without the one before it (left out; see above), or null. */
  orphan: string | null;
}

/** Lists the journal's objects: snapshots and segments by number. */
async function listJournal(
  run: RemoteRun,
): Promise<{ keys: string[]; segments: number[]; snapshots: number[] }> {
  const keys: string[] = [];
  const segments: number[] = [];
  const snapshots: number[] = [];
  let token: string | undefined;
  do {
    const page = await run.access.client.send(
      new ListObjectsV2Command({
        Bucket: run.bucket,
        Prefix: journalPrefix(run.prefix),
        ...(token ? { ContinuationToken: token } : {}),
      }),
    );
    for (const o of page.Contents ?? []) {
      if (!o.Key) continue;
      const parsed = parseJournalName(o.Key.slice(journalPrefix(run.prefix).length));
      if (!parsed) continue;
      keys.push(o.Key);
      (parsed.kind === 'segment' ? segments : snapshots).push(parsed.seq);
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  segments.sort((a, b) => a - b);
  snapshots.sort((a, b) => a - b);
  return { keys, segments, snapshots };
}

/** Streams the journal stored under the run's prefix into `localFile` (temp and rename). */
export async function loadRemoteJournal(run: RemoteRun, localFile: string): Promise<RemoteJournalInfo> {
  const { keys, segments, snapshots } = await listJournal(run);
  const snapshotSeq = snapshots.at(-1) ?? null;
  const after = segments.filter((seq) => snapshotSeq === null || seq > snapshotSeq);
  let expected = (snapshotSeq ?? 0) + 1;
  // The last segment, one number past a gap right before it: left out (see above).
  const last = after.at(-1);
  const orphan =
    last !== undefined && last === (after.at(-2) ?? expected - 1) + 2
      ? segmentKey(run.prefix, after.pop()!)
      : null;
  for (const seq of after) {
    if (seq !== expected) {
      throw new StateError(
        'journal_corrupt',
        `${formatS3Ref(run.bucket, segmentKey(run.prefix, expected))} is missing (the journal jumps to segment ${seq}); ` +
          'the run stops rather than forget jobs it already paid for. Restore the object or use another --out',
      );
    }
    expected++;
  }
  const tmp = `${localFile}.${process.pid}.tmp`;
  const out = createWriteStream(tmp);
  try {
    const objects = [
      ...(snapshotSeq === null ? [] : [snapshotKey(run.prefix, snapshotSeq)]),
      ...after.map((seq) => segmentKey(run.prefix, seq)),
    ];
    for (const key of objects) {
      const answer = await run.access.client.send(new GetObjectCommand({ Bucket: run.bucket, Key: key }));
      // Written by hand, not by one pipeline per object: those would pile listeners on `out`.
      for await (const chunk of answer.Body as Readable) {
        if (!out.write(chunk)) await once(out, 'drain');
      }
    }
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => (error ? reject(error) : resolve())),
    );
    await rename(tmp, localFile);
  } catch (error) {
    out.destroy();
    await rm(tmp, { force: true });
    throw error;
  }
  return { nextSeq: expected, segments: after.length, snapshotSeq, keys, orphan };
}

/**
 * Stores the compacted journal in `localFile` as the snapshot covering every segment up to
 * `lastSeq`, then deletes those segments and the older snapshots. A crash between the two steps
 * leaves the snapshot and some covered segments: still one loadable journal.
 */
export async function storeSnapshot(
  run: RemoteRun,
  localFile: string,
  lastSeq: number,
  keys: readonly string[],
): Promise<void> {
  const key = snapshotKey(run.prefix, lastSeq);
  // Streamed with its length: a compacted journal of 10^6 items is not held in memory.
  const { size } = await stat(localFile);
  await run.access.client
    .send(
      new PutObjectCommand({
        Bucket: run.bucket,
        Key: key,
        Body: createReadStream(localFile),
        ContentLength: size,
        ContentType: 'application/x-ndjson',
        IfNoneMatch: '*',
      }),
    )
    .catch((error: unknown) => {
      // Stored by an earlier compaction of the same segments that stopped before its deletes.
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode !== 412)
        throw error;
    });
  for (const old of keys) {
    if (old === key) continue;
    const parsed = parseJournalName(old.slice(journalPrefix(run.prefix).length));
    if (parsed && parsed.seq <= lastSeq) {
      await run.access.client.send(new DeleteObjectCommand({ Bucket: run.bucket, Key: old }));
    }
  }
}
