import { appendFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { compactRecords } from '../../src/state/compact.js';
import { JournalWriter, loadJournal, readJournal } from '../../src/state/journal.js';
import type { JournalRecord, SourceIdentity } from '../../src/state/records.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-journal-src-');

const SHA = 'a'.repeat(64);

const item = (id: string, src: SourceIdentity): JournalRecord => ({
  t: 'item',
  id,
  fp: `fp-${id}`,
  image: src?.path ?? `${id}.jpg`,
  module: 'change-style',
  style: 'modern',
  src,
});

describe('the journal keeps what a conditional rerun of a remote source needs', () => {
  it('round-trips etag, last_modified and version_id; an older record without them still reads', async () => {
    const url: SourceIdentity = {
      path: 'https://cdn.example/k1.jpg?X-Amz-Signature=abc',
      size: 1234,
      mtime_ms: 1_700_000_000_000,
      sha256: SHA,
      etag: '"v1"',
      last_modified: 'Tue, 14 Nov 2023 22:13:20 GMT',
    };
    const object: SourceIdentity = {
      path: 's3://bucket/kitchens/k2.jpg',
      size: 99,
      mtime_ms: 1_700_000_000_000,
      sha256: SHA,
      etag: '"0123456789abcdef0123456789abcdef"',
      version_id: '3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY',
    };
    const file = tmp.file('journal.jsonl');
    const writer = await JournalWriter.open(file);
    await writer.append(item('url', url));
    await writer.append(item('s3', object));
    await writer.close();
    // A record as journals before remote sources wrote it: no validators at all.
    const old = { path: '/imgs/k3.jpg', size: 5, mtime_ms: 7, sha256: SHA };
    await appendFile(file, `${JSON.stringify(item('old', old))}\n`);

    const { records } = await readJournal(file);
    expect(records.map((r) => (r.t === 'item' ? r.src : null))).toEqual([url, object, old]);
    const { fold } = await loadJournal(file);
    expect(fold.states.get('url')?.src).toEqual(url);
    expect(fold.states.get('s3')?.src).toEqual(object);
    expect(fold.states.get('old')?.src).toEqual(old);
    expect(Object.keys(fold.states.get('old')?.src ?? {})).toEqual(['path', 'size', 'mtime_ms', 'sha256']);
    // Compaction rewrites the item records from the states: the validators survive it.
    const compacted = [...compactRecords(fold.states.values(), {})];
    const srcOf = (id: string) =>
      compacted.find((r): r is Extract<JournalRecord, { t: 'item' }> => r.t === 'item' && r.id === id)?.src;
    expect(srcOf('url')).toEqual(url);
    expect(srcOf('s3')).toEqual(object);
  });

  it('two styles of one source share its identity; a changed ETag is another identity', async () => {
    const src = { path: 'https://cdn.example/k.jpg', size: 1, mtime_ms: 2, sha256: SHA, etag: '"v1"' };
    const file = tmp.file('journal.jsonl');
    const writer = await JournalWriter.open(file);
    await writer.append(item('a', src));
    await writer.append(item('b', { ...src }));
    await writer.append(item('c', { ...src, etag: '"v2"' }));
    await writer.close();
    const { fold } = await loadJournal(file);
    const [a, b, c] = ['a', 'b', 'c'].map((id) => fold.states.get(id)?.src);
    expect(a).toEqual(src);
    expect(b).toEqual(src);
    expect(c).toEqual({ ...src, etag: '"v2"' });
  });
});
