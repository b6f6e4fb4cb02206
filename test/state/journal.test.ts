import { appendFile, readFile, writeFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { StateError } from '../../src/errors.js';
import { reportItem } from '../../src/report/build.js';
import { compactRecords, shouldCompact } from '../../src/state/compact.js';
import { foldJournal, JournalFold } from '../../src/state/fold.js';
import { JournalWriter, readJournal } from '../../src/state/journal.js';
import type { JournalRecord } from '../../src/state/records.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-journal-');

const item = (id: string, fp = 'fp1'): JournalRecord => ({
  t: 'item',
  id,
  fp,
  image: `${id}.jpg`,
  module: 'change-style',
  style: 'modern',
  src: null,
});

/** A journal with items in every phase, including possible duplicates and a changed fingerprint. */
function sampleRecords(): JournalRecord[] {
  const e = { code: 'x', message: 'y' };
  return [
    { t: 'run', at: 'a', v: 1, manifest: 'm.csv', base_url: 'http://s', pid: 1 },
    {
      t: 'plan',
      ids: [
        'done',
        'dup',
        'acc',
        'succ',
        'fail',
        'ref',
        'rej',
        'unk',
        'nc',
        'chg',
        'to',
        'rf',
        'rfu',
        'lost',
        'ncr',
        'twice',
      ],
      manifest_dir: '/m',
    },
    item('done'),
    { t: 'submitting', id: 'done', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'done', fp: 'fp1', job_id: 'j1', at: '' },
    {
      t: 'ended',
      id: 'done',
      fp: 'fp1',
      job_id: 'j1',
      status: 'succeeded',
      image_url: 'http://s/r1',
      processing_time_ms: 5,
      error: null,
    },
    {
      t: 'downloaded',
      id: 'done',
      fp: 'fp1',
      job_id: 'j1',
      output: 'results/done.jpg',
      sha256: 'h',
      bytes: 3,
      mtime_ms: 9,
    },
    item('dup'),
    { t: 'submitting', id: 'dup', fp: 'fp1', at: '' },
    { t: 'incomplete', id: 'dup', fp: 'fp1', error: { code: 'submit_unknown', message: 'reset' } },
    { t: 'submitting', id: 'dup', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'dup', fp: 'fp1', job_id: 'j2', at: '' },
    item('acc'),
    { t: 'submitting', id: 'acc', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'acc', fp: 'fp1', job_id: 'j3', at: '' },
    { t: 'incomplete', id: 'acc', fp: 'fp1', error: { code: 'job_timeout', message: 'slow' } },
    item('succ'),
    { t: 'submitting', id: 'succ', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'succ', fp: 'fp1', job_id: 'j4', at: '' },
    {
      t: 'ended',
      id: 'succ',
      fp: 'fp1',
      job_id: 'j4',
      status: 'succeeded',
      image_url: 'http://s/r4',
      processing_time_ms: 7,
      error: null,
    },
    { t: 'incomplete', id: 'succ', fp: 'fp1', error: { code: 'download_failed', message: '404' } },
    item('fail'),
    { t: 'submitting', id: 'fail', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'fail', fp: 'fp1', job_id: 'j5', at: '' },
    {
      t: 'ended',
      id: 'fail',
      fp: 'fp1',
      job_id: 'j5',
      status: 'failed',
      image_url: null,
      processing_time_ms: null,
      error: e,
    },
    item('ref'),
    { t: 'submitting', id: 'ref', fp: 'fp1', at: '' },
    { t: 'refused', id: 'ref', fp: 'fp1', error: { code: 'validation_error', message: 'no' } },
    item('rej'),
    { t: 'rejected', id: 'rej', fp: 'fp1', error: { code: 'corrupt_image', message: 'bad' } },
    item('unk'),
    { t: 'submitting', id: 'unk', fp: 'fp1', at: '' },
    item('nc'),
    { t: 'submitting', id: 'nc', fp: 'fp1', at: '' },
    { t: 'incomplete', id: 'nc', fp: 'fp1', error: { code: 'submit_unknown', message: 'x' } },
    { t: 'submitting', id: 'nc', fp: 'fp1', at: '' },
    { t: 'not_created', id: 'nc', fp: 'fp1', error: { code: 'rate_limited', message: '429' } },
    item('chg'),
    { t: 'submitting', id: 'chg', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'chg', fp: 'fp1', job_id: 'j6', at: '' },
    item('chg', 'fp2'),
    item('to'),
    { t: 'incomplete', id: 'to', fp: 'fp1', error: { code: 'max_submissions', message: 'cap' } },
    // --retry-failed: a failed job sent again on purpose, twice; no outcome was ever unknown.
    item('rf'),
    ...failedJob('rf', 'j7'),
    ...failedJob('rf', 'j8'),
    { t: 'submitting', id: 'rf', fp: 'fp1', at: '' },
    { t: 'accepted', id: 'rf', fp: 'fp1', job_id: 'j9', at: '' },
    // --retry-failed whose POST's outcome is unknown: sent after every earlier POST was answered.
    item('rfu'),
    ...failedJob('rfu', 'j10'),
    { t: 'submitting', id: 'rfu', fp: 'fp1', at: '' },
    // A lost outcome, a resend that created nothing (429), one that may have (accepted: the one
    // possible duplicate), then its failed job retried on purpose: no duplicate of the lost one.
    item('lost'),
    { t: 'submitting', id: 'lost', fp: 'fp1', at: '' },
    { t: 'submitting', id: 'lost', fp: 'fp1', at: '' },
    { t: 'not_created', id: 'lost', fp: 'fp1', error: { code: 'rate_limited', message: '429' } },
    ...failedJob('lost', 'j11'),
    { t: 'submitting', id: 'lost', fp: 'fp1', at: '' },
    { t: 'incomplete', id: 'lost', fp: 'fp1', error: { code: 'submit_unknown', message: 'reset' } },
    // Two POSTs, neither answered (two crashes in a row): the second is a possible duplicate.
    item('twice'),
    { t: 'submitting', id: 'twice', fp: 'fp1', at: '' },
    { t: 'submitting', id: 'twice', fp: 'fp1', at: '' },
    // A lost outcome, then a resend the service refused (400): failed, no second job.
    item('ncr'),
    { t: 'submitting', id: 'ncr', fp: 'fp1', at: '' },
    { t: 'submitting', id: 'ncr', fp: 'fp1', at: '' },
    { t: 'refused', id: 'ncr', fp: 'fp1', error: { code: 'validation_error', message: 'no' } },
  ];
}

/** A POST whose job was accepted and failed. */
function failedJob(id: string, jobId: string): JournalRecord[] {
  return [
    { t: 'submitting', id, fp: 'fp1', at: '' },
    { t: 'accepted', id, fp: 'fp1', job_id: jobId, at: '' },
    {
      t: 'ended',
      id,
      fp: 'fp1',
      job_id: jobId,
      status: 'failed',
      image_url: null,
      processing_time_ms: null,
      error: { code: 'x', message: 'y' },
    },
  ];
}

describe('journal', () => {
  it('folds records into the phases the resume rules need', () => {
    const states = foldJournal(sampleRecords());
    const phase = (id: string) => states.get(id)!;
    expect(phase('done')).toMatchObject({ phase: 'downloaded', jobId: 'j1', submissions: 1, sha256: 'h' });
    expect(phase('dup')).toMatchObject({ phase: 'accepted', jobId: 'j2', submissions: 2 });
    expect(phase('acc')).toMatchObject({ phase: 'accepted', jobId: 'j3', error: { code: 'job_timeout' } });
    expect(phase('succ')).toMatchObject({ phase: 'succeeded', imageUrl: 'http://s/r4' });
    expect(phase('fail')).toMatchObject({ phase: 'failed', error: { code: 'x' } });
    expect(phase('ref')).toMatchObject({ phase: 'failed', submissions: 0, jobId: null });
    expect(phase('rej')).toMatchObject({ phase: 'rejected' });
    expect(phase('unk')).toMatchObject({
      phase: 'unknown',
      submissions: 1,
      error: { code: 'submit_unknown' },
    });
    expect(phase('nc')).toMatchObject({ phase: 'new', submissions: 1 });
    // A changed fingerprint is a new item: nothing of the old job carries over.
    expect(phase('chg')).toMatchObject({ phase: 'new', fp: 'fp2', jobId: null, submissions: 0 });
    // Possible duplicates: only POSTs sent while an earlier one's outcome was unknown.
    const resends = (id: string) => [states.get(id)!.submissions, states.get(id)!.ambiguousResends];
    expect(resends('done')).toEqual([1, 0]);
    expect(resends('dup')).toEqual([2, 1]);
    expect(resends('nc')).toEqual([1, 0]);
    expect(resends('rf')).toEqual([3, 0]);
    expect(resends('rfu')).toEqual([2, 0]);
    expect(resends('lost')).toEqual([3, 1]);
    // Its last POST (the retry) is unanswered, but was not sent over an unknown outcome.
    expect(phase('lost')).toMatchObject({ phase: 'unknown', outcomeLost: false });
    expect(resends('twice')).toEqual([2, 1]);
    expect(phase('twice')).toMatchObject({ phase: 'unknown', outcomeLost: true });
    expect(phase('ncr')).toMatchObject({
      phase: 'failed',
      submissions: 1,
      ambiguousResends: 0,
      outcomeLost: true,
    });
    expect(phase('rfu')).toMatchObject({ phase: 'unknown', outcomeLost: false });
    const possible = [...states.values()].filter((s) => reportItem(s).ambiguous_resends > 0).map((s) => s.id);
    expect(possible).toEqual(['dup', 'lost', 'twice']);
  });

  it('compaction keeps exactly the same states, and the last run and plan', () => {
    const records = sampleRecords();
    const fold = new JournalFold();
    for (const record of records) fold.add(record);
    const compacted = [...compactRecords(fold.states.values(), fold.last)];
    expect(compacted.length).toBeLessThanOrEqual(records.length);
    const again = new JournalFold();
    for (const record of compacted) again.add(record);
    expect([...again.states.values()]).toEqual([...fold.states.values()]);
    expect(again.last).toEqual(fold.last);
    expect(shouldCompact(10, 10)).toBe(false);
    expect(shouldCompact(50_000, 1000)).toBe(true);
  });

  it('an item whose records lie far apart (more items in between than the fold keeps unpacked) folds the same', () => {
    const n = 3000;
    const ids = Array.from({ length: n }, (_, i) => `k${i}`);
    const fold = new JournalFold();
    // Phase by phase over the whole catalogue: every item leaves the fold's window between its records.
    for (const id of ids) fold.add(item(id));
    for (const id of ids) fold.add({ t: 'submitting', id, fp: 'fp1', at: '' });
    for (const id of ids) fold.add({ t: 'accepted', id, fp: 'fp1', job_id: `j-${id}`, at: '' });
    for (const id of ids.slice(0, 10)) fold.add(item(id, 'fp2'));
    const states = [...fold.states.values()];
    expect(states.map((s) => s.id)).toEqual(ids);
    expect(states[5]).toMatchObject({ fp: 'fp2', phase: 'new', jobId: null, submissions: 0 });
    expect(states[2999]).toMatchObject({ fp: 'fp1', phase: 'accepted', jobId: 'j-k2999', submissions: 1 });
  });

  it('appends with group commit and reads back; a torn last line is cut with a report, not a crash', async () => {
    const file = tmp.file('journal.jsonl');
    const writer = await JournalWriter.open(file);
    await Promise.all(sampleRecords().map((r, i) => writer.append(r, { sync: i % 3 === 0 })));
    await writer.close();
    await appendFile(file, '{"t":"accepted","id":"unk","fp":"fp1","job_');
    const { records, tornLine } = await readJournal(file);
    expect(records).toEqual(sampleRecords());
    expect(tornLine).toBe(sampleRecords().length + 1);
    // The torn tail was cut: the next append starts on a clean line.
    const again = await JournalWriter.open(file);
    await again.append({ t: 'rejected', id: 'to', fp: 'fp1', error: { code: 'a', message: 'b' } });
    await again.close();
    expect((await readJournal(file)).records).toHaveLength(sampleRecords().length + 1);
  });

  it('the lean fold of `report` gives every item the same report row as the full fold', () => {
    const records: JournalRecord[] = [
      ...sampleRecords(),
      // An output under another name than results/<id>.<ext> (a merged or older report).
      item('odd'),
      { t: 'submitting', id: 'odd', fp: 'fp1', at: '' },
      { t: 'accepted', id: 'odd', fp: 'fp1', job_id: 'j9', at: '' },
      {
        t: 'ended',
        id: 'odd',
        fp: 'fp1',
        job_id: 'j9',
        status: 'succeeded',
        image_url: 'http://s/r9',
        processing_time_ms: 2.5,
        error: null,
      },
      {
        t: 'downloaded',
        id: 'odd',
        fp: 'fp1',
        job_id: 'j9',
        output: 'results/elsewhere/odd.png',
        sha256: 'ab'.repeat(32),
        bytes: 3,
        mtime_ms: 9,
      },
    ];
    const full = new JournalFold();
    const compact = new JournalFold({ lean: true });
    for (const record of records) {
      full.add(record);
      compact.add(record);
    }
    expect([...compact.states.keys()]).toEqual([...full.states.keys()]);
    for (const state of full.states.values())
      expect(reportItem(compact.states.get(state.id)!), state.id).toEqual(reportItem(state));
    expect(compact.last).toEqual(full.last);
    expect(compact.states.get('nope')).toBeUndefined();
    // Lean: nothing a report does not show.
    expect(compact.states.get('succ')).toMatchObject({ imageUrl: null, src: null });
  });

  it('group commit: records appended together share one fsync, and each sync append waits for its own', async () => {
    const writer = await JournalWriter.open(tmp.file('journal.jsonl'));
    const appends = Array.from({ length: 500 }, (_, i) =>
      writer.append({ t: 'submitting', id: `k${i}`, fp: 'fp1', at: '' }, { sync: true }),
    );
    await Promise.all(appends);
    expect(writer.stats.records).toBe(500);
    // The first record goes out alone; the 499 queued behind its fsync share the next one.
    expect(writer.stats.syncs).toBeLessThanOrEqual(3);
    await writer.append({ t: 'submitting', id: 'k', fp: 'fp1', at: '' }, { sync: true });
    expect(writer.stats.syncs).toBeGreaterThan(1);
    await writer.append({ t: 'submitting', id: 'k', fp: 'fp1', at: '' });
    await writer.close();
    expect(writer.stats).toMatchObject({ records: 502 });
  });

  it('a damaged line in the middle is corruption: StateError naming the line', async () => {
    const file = tmp.file('journal.jsonl');
    const lines = sampleRecords().map((r) => JSON.stringify(r));
    lines.splice(3, 0, '{"t":"accepted", garbage');
    await writeFile(file, `${lines.join('\n')}\n`);
    const error = await readJournal(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateError);
    expect((error as Error).message).toContain(':4:');
    // Read-only readers do not repair.
    await writeFile(file, '{"t":"run"}\n{"t":"ite');
    await readJournal(file, { repair: false });
    expect(await readFile(file, 'utf8')).toBe('{"t":"run"}\n{"t":"ite');
  });

  it('once an append fails (disk full), every later append fails too', async () => {
    const writer = await JournalWriter.open('/dev/full');
    await expect(writer.append(item('a'), { sync: true })).rejects.toBeInstanceOf(StateError);
    await expect(writer.append(item('b'))).rejects.toThrow(/cannot append/);
    await writer.close();
  });
});
