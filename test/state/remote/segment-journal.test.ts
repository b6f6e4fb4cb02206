/**
 * A bucket run's own state against a real S3 server (s3rver behind the conditional front): the
 * journal as segment objects (group commit, durability, loading, compaction into a snapshot) and
 * the lease (one holder, takeover, loss).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StateError } from '../../../src/errors.js';
import { writeCompactJournal } from '../../../src/state/compact.js';
import { ItemStore } from '../../../src/state/items.js';
import { JournalWriter, loadJournal } from '../../../src/state/journal.js';
import type { JournalRecord } from '../../../src/state/records.js';
import { segmentKey } from '../../../src/state/remote/keys.js';
import { acquireLease } from '../../../src/state/remote/lease.js';
import { loadRemoteJournal, storeSnapshot } from '../../../src/state/remote/load.js';
import { SegmentJournal } from '../../../src/state/remote/segment-journal.js';
import { ItemTable } from '../../../src/state/table.js';
import { createS3Client, type S3Access } from '../../../src/storage/s3/client.js';
import { type ConditionalS3, startConditionalS3 } from '../../support/s3-conditional.js';

const BUCKET = 'state';
let s3: ConditionalS3;
let access: S3Access;
let dir: string;

beforeAll(async () => {
  s3 = await startConditionalS3([BUCKET]);
  vi.stubEnv('AWS_ACCESS_KEY_ID', 'S3RVER');
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'S3RVER');
  access = createS3Client({ AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1' }, { maxAttempts: 2 });
  dir = await mkdtemp(path.join(tmpdir(), 'kb-remote-state-'));
});
afterAll(async () => {
  vi.unstubAllEnvs();
  access?.client.destroy();
  await s3?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const run = (prefix: string) => ({ access, bucket: BUCKET, prefix });

type ItemRecordOf<T extends JournalRecord['t']> = Extract<JournalRecord, { t: T }>;

/** `bucket/key` of segment `seq` under `prefix`, as the front names requests. */
const segmentAt = (prefix: string, seq: number) => `${BUCKET}/${segmentKey(prefix, seq)}`;

/** The status of the last request the front saw for `key` (`bucket/key`), if any. */
const statusOf = (key: string) => s3.requests.findLast((r) => r.key === key)?.status;

async function keys(prefix: string): Promise<string[]> {
  const page = await access.client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}

/** The records of one item's life, as the flow writes them (sync where the flow syncs). */
function itemRecords(i: number): Array<[JournalRecord, boolean]> {
  const id = `k${i}`;
  const fp = `fp${i}`;
  const at = '2026-11-26T22:00:00.000+00:00';
  return [
    [{ t: 'submitting', id, fp, at }, true],
    [{ t: 'accepted', id, fp, job_id: `job-${i}`, at }, true],
    [
      {
        t: 'ended',
        id,
        fp,
        job_id: `job-${i}`,
        status: 'succeeded',
        image_url: `http://results.invalid/${id}.jpg`,
        processing_time_ms: 10,
        error: null,
      },
      false,
    ],
    [
      {
        t: 'downloaded',
        id,
        fp,
        job_id: `job-${i}`,
        output: `results/${id}.jpg`,
        sha256: 'ab'.repeat(32),
        bytes: 100,
        mtime_ms: 1,
      },
      true,
    ],
  ];
}

describe('the journal as segment objects', () => {
  it('a sync append resolves only once its segment is readable; 64 items at once share PUTs; loading folds as the local journal does', async () => {
    const prefix = 'group/';
    const mirror = path.join(dir, 'group.jsonl');
    const journal = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror });
    const local = await JournalWriter.open(path.join(dir, 'group-local.jsonl'));
    const first = itemRecords(0)[0]!;
    await journal.append(first[0], { sync: true });
    const stored = await keys(`${prefix}.kitchen-batch/journal/`);
    expect(stored).toEqual([`${prefix}.kitchen-batch/journal/0000000001.jsonl`]);
    const body = await (
      await access.client.send(new GetObjectCommand({ Bucket: BUCKET, Key: stored[0]! }))
    ).Body!.transformToString();
    expect(JSON.parse(body)).toEqual(first[0]);
    await local.append(first[0]);
    const items = 64;
    await Promise.all(
      Array.from({ length: items }, async (_, i) => {
        for (const [record, sync] of itemRecords(i + 1)) {
          await journal.append(record, { sync });
          await local.append(record);
        }
      }),
    );
    await journal.close();
    await local.close();
    const records = 1 + items * 4;
    expect(journal.stats.records).toBe(records);
    // 64 items × 3 sync points, gathered by the commit window: far fewer PUTs than records.
    expect(journal.stats.syncs).toBeLessThan(items);
    const loaded = path.join(dir, 'group-loaded.jsonl');
    const info = await loadRemoteJournal(run(prefix), loaded);
    expect(info.nextSeq).toBe(journal.nextSeq);
    const [remote, mine, mirrored] = await Promise.all(
      [loaded, path.join(dir, 'group-local.jsonl'), mirror].map((f) => loadJournal(f)),
    );
    for (const other of [mine, mirrored]) {
      expect([...remote!.fold.states.values()]).toEqual([...other!.fold.states.values()]);
    }
  });

  it('compaction: a snapshot replaces the segments; a crash between the snapshot and the deletes still loads', async () => {
    const prefix = 'compact/';
    const mirror = path.join(dir, 'compact.jsonl');
    const journal = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror, commitWindowMs: 0 });
    for (let i = 0; i < 5; i++)
      for (const [record] of itemRecords(i)) await journal.append(record, { sync: true });
    await journal.close();
    const before = await loadJournal(mirror);
    const info = await loadRemoteJournal(run(prefix), path.join(dir, 'compact-a.jsonl'));
    // The crash: the snapshot stored, no segment deleted yet.
    await writeCompactJournal(mirror, before.fold.states.values(), before.fold.last);
    await storeSnapshot(run(prefix), mirror, info.nextSeq - 1, []);
    const half = await loadRemoteJournal(run(prefix), path.join(dir, 'compact-b.jsonl'));
    expect(half).toMatchObject({ snapshotSeq: info.nextSeq - 1, segments: 0, nextSeq: info.nextSeq });
    const after = await loadJournal(path.join(dir, 'compact-b.jsonl'));
    expect([...after.fold.states.values()]).toEqual([...before.fold.states.values()]);
    // The next compaction removes what the snapshot covers.
    await storeSnapshot(run(prefix), mirror, info.nextSeq - 1, half.keys);
    expect(await keys(`${prefix}.kitchen-batch/journal/`)).toEqual([
      `${prefix}.kitchen-batch/journal/snapshot-${String(info.nextSeq - 1).padStart(10, '0')}.jsonl`,
    ]);
  });

  it('a bucket that keeps failing (500 after the retries) breaks the journal: journal_write_failed naming it, every later append too', async () => {
    const prefix = 'broken/';
    s3.fail({ method: 'PUT', keyPrefix: `${BUCKET}/${prefix}`, times: 10, status: 500 });
    const journal = new SegmentJournal({
      ...run(prefix),
      nextSeq: 1,
      mirror: path.join(dir, 'broken.jsonl'),
    });
    const error = (await journal
      .append(itemRecords(0)[0]![0], { sync: true })
      .catch((e: unknown) => e)) as StateError;
    s3.heal();
    expect(error.code).toBe('journal_write_failed');
    expect(error.message).toContain('s3://state/broken/.kitchen-batch/journal/0000000001.jsonl');
    await expect(journal.append(itemRecords(0)[1]![0], { sync: true })).rejects.toBe(error);
  });

  it('two segments in flight: N+1 goes while N is on its way, and counts only once N is stored; N+2 waits for N', async () => {
    const prefix = 'flight/';
    const mirror = path.join(dir, 'flight.jsonl');
    const journal = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror, commitWindowMs: 0 });
    s3.fail({ method: 'PUT', keyPrefix: segmentAt(prefix, 1), times: 1, hold: true });
    const counted: string[] = [];
    const append = (i: number) =>
      journal.append(itemRecords(i)[0]![0], { sync: true }).then(() => counted.push(`k${i}`));
    const first = append(0);
    await vi.waitFor(() => expect(s3.held()).toEqual([segmentAt(prefix, 1)]));
    const second = append(1);
    await vi.waitFor(() => expect(statusOf(segmentAt(prefix, 2))).toBe(200));
    const third = append(2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(s3.requests.filter((r) => r.key === segmentAt(prefix, 3))).toEqual([]);
    expect(counted).toEqual([]);
    await expect(readFile(mirror, 'utf8')).rejects.toThrow(/ENOENT/);

    // A crash now: segment 2 is stored without 1. Loading leaves it out and names it.
    const crashed = path.join(dir, 'flight-crashed.jsonl');
    const info = await loadRemoteJournal(run(prefix), crashed);
    expect(info).toMatchObject({
      nextSeq: 1,
      segments: 0,
      orphan: `${prefix}.kitchen-batch/journal/0000000002.jsonl`,
    });
    expect(await readFile(crashed, 'utf8')).toBe('');

    s3.release();
    await Promise.all([first, second, third]);
    expect(counted).toEqual(['k0', 'k1', 'k2']);
    await journal.close();
    expect(
      (await readFile(mirror, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual(['k0', 'k1', 'k2']);
    const whole = await loadRemoteJournal(run(prefix), path.join(dir, 'flight-whole.jsonl'));
    expect(whole).toMatchObject({ nextSeq: 4, segments: 3, orphan: null });
  });

  it('a segment that fails fails those after it, even stored: none counts, and loading leaves the stored one out', async () => {
    const prefix = 'flight-failed/';
    const mirror = path.join(dir, 'flight-failed.jsonl');
    const journal = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror, commitWindowMs: 0 });
    s3.fail({ method: 'PUT', keyPrefix: segmentAt(prefix, 1), times: 1, hold: true });
    const first = journal.append(itemRecords(0)[0]![0], { sync: true }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(s3.held()).toHaveLength(1));
    const second = journal.append(itemRecords(1)[0]![0], { sync: true }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(statusOf(segmentAt(prefix, 2))).toBe(200));
    // Segment 1 fails for good (500, and 500 again on the client's retry).
    s3.fail({ method: 'PUT', keyPrefix: segmentAt(prefix, 1), times: 5, status: 500 });
    s3.release({ status: 500 });
    const [a, b] = (await Promise.all([first, second])) as StateError[];
    s3.heal();
    expect(a!.code).toBe('journal_write_failed');
    expect(a!.message).toContain('0000000001.jsonl');
    expect(b).toBe(a);
    await journal.close();
    await expect(readFile(mirror, 'utf8')).rejects.toThrow(/ENOENT/);
    const info = await loadRemoteJournal(run(prefix), path.join(dir, 'flight-failed-loaded.jsonl'));
    expect(info).toMatchObject({ nextSeq: 1, orphan: `${prefix}.kitchen-batch/journal/0000000002.jsonl` });
  });

  it('the item store waits for its segment only where the contract needs it: the submitting mark, not the item or ended records', async () => {
    const prefix = 'waits/';
    const mirror = path.join(dir, 'waits.jsonl');
    const journal = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror, commitWindowMs: 0 });
    const failures: unknown[] = [];
    const store = new ItemStore(journal, new ItemTable(), { onFailure: (e) => failures.push(e) });
    const [submitting, , ended] = itemRecords(0).map(([record]) => record);
    s3.fail({ method: 'PUT', keyPrefix: segmentAt(prefix, 1), times: 1, hold: true });
    // Planned while no segment can be stored: the item record is applied at once, not waited for.
    const state = await store.plan({
      id: 'k0',
      fp: 'fp0',
      image: 'k0.jpg',
      module: 'm',
      style: 's',
      src: null,
    });
    expect(s3.requests.filter((r) => r.key.startsWith(`${BUCKET}/${prefix}`))).toEqual([]);
    expect(state).toMatchObject({ id: 'k0', phase: 'new' });
    let marked = false;
    const mark = store.record(submitting as ItemRecordOf<'submitting'>, { sync: true }).then(() => {
      marked = true;
    });
    await vi.waitFor(() => expect(s3.held()).toEqual([segmentAt(prefix, 1)]));
    // The poll stage's `ended` (wait: false): applied at once, while the mark before it still waits.
    await store.record(ended as ItemRecordOf<'ended'>, { wait: false });
    expect(state).toMatchObject({ phase: 'succeeded', imageUrl: 'http://results.invalid/k0.jpg' });
    expect(marked).toBe(false);
    s3.release();
    await mark;
    await journal.close();
    expect(failures).toEqual([]);
    const lines = (await readFile(mirror, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).t);
    expect(lines).toEqual(['item', 'submitting', 'ended']);
  });
  it('a gap in the segments is damage: journal_corrupt naming the missing object', async () => {
    const prefix = 'gap/';
    for (const seq of [1, 3, 4]) {
      await access.client.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: `${prefix}.kitchen-batch/journal/${String(seq).padStart(10, '0')}.jsonl`,
          Body: Buffer.from('{"t":"submitting","id":"k","fp":"f"}\n'),
        }),
      );
    }
    const error = await loadRemoteJournal(run(prefix), path.join(dir, 'gap.jsonl')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateError);
    expect((error as StateError).code).toBe('journal_corrupt');
    expect((error as StateError).message).toContain(
      's3://state/gap/.kitchen-batch/journal/0000000002.jsonl is missing',
    );
  });
});

describe('the lease', () => {
  it('one holder: a second acquire is refused naming it; released, it can be taken again', async () => {
    const lease = await acquireLease(run('lease-a/'));
    const refused = (await acquireLease(run('lease-a/')).catch((e: unknown) => e)) as StateError;
    expect(refused.code).toBe('locked');
    expect(refused.message).toMatch(
      new RegExp(`^s3://state/lease-a is in use by another kitchen-batch run \\(pid ${process.pid} on `),
    );
    await lease.release();
    const again = await acquireLease(run('lease-a/'));
    expect(again.tookOver).toBeNull();
    await again.release();
  });

  it("a renewal that finds the lease taken calls onLost; the old writer's next segment is refused (lease_lost), and so is every append after", async () => {
    const prefix = 'lease-b/';
    const lost: StateError[] = [];
    const lease = await acquireLease({ ...run(prefix), heartbeatMs: 100, onLost: (e) => lost.push(e) });
    const old = new SegmentJournal({ ...run(prefix), nextSeq: 1, mirror: path.join(dir, 'old.jsonl') });
    await old.append(itemRecords(0)[0]![0], { sync: true });
    // Another run takes the lease and writes the next segment (as a run that took over would).
    const key = `${prefix}.kitchen-batch/lease.json`;
    await access.client.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: Buffer.from('{"pid":1,"host":"elsewhere"}') }),
    );
    const next = new SegmentJournal({ ...run(prefix), nextSeq: 2, mirror: path.join(dir, 'new.jsonl') });
    await next.append(itemRecords(0)[1]![0], { sync: true });
    await vi.waitFor(() => expect(lost).toHaveLength(1), { timeout: 5000 });
    expect(lost[0]!.code).toBe('lease_lost');
    expect(lost[0]!.message).toContain('s3://state/lease-b');
    const refused = await old.append(itemRecords(0)[1]![0], { sync: true }).catch((e: unknown) => e);
    expect((refused as StateError).code).toBe('lease_lost');
    await expect(old.append(itemRecords(0)[2]![0])).rejects.toBe(refused);
    // A lost lease is not deleted on release: it is the other run's now.
    await lease.release();
    expect(await keys(key)).toEqual([key]);
  });
});

describe('the lease of a holder on another machine', () => {
  it('is taken over only once its heartbeat is over 60 s old', async () => {
    const prefix = 'lease-c/';
    const key = `${prefix}.kitchen-batch/lease.json`;
    const renewed = Date.now();
    await access.client.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: key,
        Body: Buffer.from(
          JSON.stringify({
            pid: 4242,
            host: 'pod-elsewhere',
            started_at: 'earlier',
            renewed_at: new Date(renewed).toISOString(),
          }),
        ),
      }),
    );
    const live = (await acquireLease({ ...run(prefix), now: () => renewed + 30_000 }).catch(
      (e: unknown) => e,
    )) as StateError;
    expect(live.code).toBe('locked');
    expect(live.message).toContain('pid 4242 on pod-elsewhere');
    const lease = await acquireLease({ ...run(prefix), now: () => renewed + 120_000 });
    expect(lease.tookOver).toMatchObject({ pid: 4242, host: 'pod-elsewhere' });
    expect(lease.tookOver?.reason).toMatch(/^its heartbeat is 1[12]\d s old$/);
    await lease.release();
  });

  it('of two runs taking a stale lease at once, exactly one wins; the other is refused naming it', async () => {
    const prefix = 'lease-d/';
    const renewed = Date.now();
    await access.client.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: `${prefix}.kitchen-batch/lease.json`,
        Body: Buffer.from(
          JSON.stringify({
            pid: 7,
            host: 'gone-pod',
            started_at: 'x',
            renewed_at: new Date(renewed).toISOString(),
          }),
        ),
      }),
    );
    // Two processes' view: the same lease is not "ours" to either (two module instances would say so).
    const takers = await Promise.allSettled(
      [0, 1].map(() => acquireLease({ ...run(prefix), now: () => renewed + 120_000 })),
    );
    const won = takers.filter((t) => t.status === 'fulfilled');
    expect(won).toHaveLength(1);
    const lost = takers.find((t) => t.status === 'rejected') as PromiseRejectedResult;
    expect((lost.reason as StateError).code).toBe('locked');
    await (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireLease>>>).value.release();
  });
});
