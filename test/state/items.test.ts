import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { StateError } from '../../src/errors.js';
import { foldJournal } from '../../src/state/fold.js';
import { type ItemIdentity, ItemStore } from '../../src/state/items.js';
import { JournalWriter, readJournal } from '../../src/state/journal.js';
import { ItemTable } from '../../src/state/table.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-items-');

const identity = (id: string, fp = 'fp1', image = `${id}.jpg`): ItemIdentity => ({
  id,
  fp,
  image,
  module: 'change-style',
  style: 'modern',
  src: null,
});

async function open(states = new ItemTable()) {
  const file = tmp.file('journal.jsonl');
  const journal = await JournalWriter.open(file);
  const failures: unknown[] = [];
  const store = new ItemStore(journal, states, { onFailure: (e) => failures.push(e) });
  return { file, journal, store, states, failures };
}

describe('ItemStore: every change journaled and applied in one call', () => {
  it('the live state equals a replay of the journal after a whole item life and a changed item', async () => {
    const { file, journal, store, states } = await open();
    const a = await store.plan(identity('a'));
    await store.record({ t: 'submitting', id: 'a', fp: 'fp1', at: 't' }, { sync: true });
    await store.record({
      t: 'incomplete',
      id: 'a',
      fp: 'fp1',
      error: { code: 'submit_unknown', message: 'reset' },
    });
    await store.record({ t: 'submitting', id: 'a', fp: 'fp1', at: 't' }, { sync: true });
    await store.record({ t: 'accepted', id: 'a', fp: 'fp1', job_id: 'j1', at: 't' }, { sync: true });
    await store.record({
      t: 'ended',
      id: 'a',
      fp: 'fp1',
      job_id: 'j1',
      status: 'succeeded',
      image_url: 'http://s/r',
      processing_time_ms: 7,
      error: null,
    });
    await store.plan(identity('b'));
    await store.record({
      t: 'rejected',
      id: 'b',
      fp: 'fp1',
      error: { code: 'corrupt_image', message: 'cut' },
    });
    // b's row changed: a new fingerprint starts it afresh, in place.
    const b2 = await store.plan(identity('b', 'fp2'));
    await store.record({ t: 'submitting', id: 'b', fp: 'fp2', at: 't' });
    await store.record({
      t: 'not_created',
      id: 'b',
      fp: 'fp2',
      error: { code: 'rate_limited', message: '429' },
    });
    await journal.close();

    expect(a).toMatchObject({ phase: 'succeeded', submissions: 2, jobId: 'j1', imageUrl: 'http://s/r' });
    expect(b2).toMatchObject({ fp: 'fp2', phase: 'new', submissions: 0 });
    const replayed = foldJournal((await readJournal(file)).records);
    expect([...replayed.keys()]).toEqual(['a', 'b']);
    const live = () => new Map([...store.keys()].map((id) => [id, store.get(id)]));
    // In flight the flow's objects are the state; released, the packed table is.
    expect(store.open).toBe(2);
    expect(live()).toEqual(replayed);
    store.release(a);
    store.release(b2);
    expect(store.open).toBe(0);
    expect(live()).toEqual(replayed);
    expect(new Map([...states.values()].map((s) => [s.id, s]))).toEqual(replayed);
  });

  it('records an item only when it is new, changed, or its image/source moved', async () => {
    const { file, journal, store } = await open();
    await store.plan(identity('a'));
    await store.plan(identity('a'));
    await store.plan(identity('a', 'fp1', 'moved/a.jpg'));
    await store.plan(identity('a', 'fp1', 'moved/a.jpg'));
    await journal.close();
    const lines = (await readFile(file, 'utf8')).trim().split('\n');
    expect(lines.map((l) => JSON.parse(l).image)).toEqual(['a.jpg', 'moved/a.jpg']);
  });

  it('ignores records of an older fingerprint (a late answer for a replaced item)', async () => {
    const { journal, store } = await open();
    const state = await store.plan(identity('a', 'fp2'));
    await store.record({ t: 'accepted', id: 'a', fp: 'fp1', job_id: 'old', at: 't' });
    await journal.close();
    expect(state).toMatchObject({ phase: 'new', jobId: null });
  });

  it('a failed append (here: a closed journal) is reported and thrown as a StateError; the state is not changed', async () => {
    const { journal, store, failures } = await open();
    const state = await store.plan(identity('a'));
    await journal.close();
    await expect(store.record({ t: 'submitting', id: 'a', fp: 'fp1', at: 't' })).rejects.toBeInstanceOf(
      StateError,
    );
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(StateError);
    expect(state).toMatchObject({ phase: 'new', submissions: 0 });
  });

  it('wait: false applies at once, commits before any later record, and a failed commit still stops the run', async () => {
    const { file, journal, store, failures } = await open();
    const a = await store.plan(identity('a'));
    await store.record({ t: 'submitting', id: 'a', fp: 'fp1', at: 't' }, { sync: true });
    const syncs = journal.stats.syncs;
    await store.record(
      { t: 'accepted', id: 'a', fp: 'fp1', job_id: 'j1', at: 't' },
      { sync: true, wait: false },
    );
    expect(a).toMatchObject({ phase: 'accepted', jobId: 'j1' });
    await store.plan(identity('b'));
    await store.record({ t: 'submitting', id: 'b', fp: 'fp1', at: 't' }, { sync: true });
    // The awaited record's fsync covered the earlier one too: on disk, in order.
    expect(journal.stats.syncs).toBeGreaterThan(syncs);
    const lines = (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).t);
    expect(lines).toEqual(['item', 'submitting', 'accepted', 'item', 'submitting']);

    await journal.close();
    await store.record(
      { t: 'accepted', id: 'b', fp: 'fp1', job_id: 'j2', at: 't' },
      { sync: true, wait: false },
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(StateError);
  });
});
