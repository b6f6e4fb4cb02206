import { describe, expect, it } from 'vitest';
import type { ItemState } from '../../src/state/state.js';
import { ItemTable } from '../../src/state/table.js';

const full = (id: string, over: Partial<ItemState> = {}): ItemState => ({
  id,
  fp: '0123456789abcdef0123456789abcdef',
  image: `img/${id}.jpg`,
  module: 'change-style',
  style: 'japandi',
  src: { path: `/abs/img/${id}.jpg`, size: 1234, mtime_ms: 1700000000123.5, sha256: 'f'.repeat(64) },
  phase: 'downloaded',
  jobId: `job-${id}`,
  imageUrl: `http://127.0.0.1:9/storage/${id}.jpg`,
  processingTimeMs: 2500,
  output: `results/${id}.png`,
  sha256: 'ab'.repeat(32),
  bytes: 4567,
  mtimeMs: 1700000001000.25,
  submissions: 2,
  ambiguousResends: 1,
  outcomeLost: true,
  error: null,
  preflight: ['rotated 90°', 'metadata removed'],
  review: { score: 0.123, flags: ['rotated', 'duplicate'] },
  ...over,
});

describe('ItemTable: item states packed in columns', () => {
  it('gives back exactly what went in, for every phase and for values with no packed form', () => {
    const table = new ItemTable();
    const states: ItemState[] = [
      full('a'),
      full('b', { phase: 'failed', output: null, sha256: null, bytes: null, mtimeMs: null, imageUrl: null }),
      full('c', { phase: 'rejected', error: { code: 'corrupt_image', message: 'cut short' }, jobId: null }),
      // A fingerprint, hash or output this tool never writes is kept as it is.
      full('d', { fp: 'not-hex', sha256: 'h', output: 'results/elsewhere/d.webp', style: null }),
      full('e', { phase: 'new', processingTimeMs: null, submissions: 0, src: null, preflight: null }),
      full('f', { preflight: [], review: null }),
      full('g', { review: { score: 1, flags: [] } }),
      // Sent again on purpose (--retry-failed): no possible duplicate; and a lost outcome not resent yet.
      full('h', { submissions: 3, ambiguousResends: 0, outcomeLost: false }),
      full('i', { phase: 'new', submissions: 1, ambiguousResends: 0, outcomeLost: true }),
    ];
    for (const state of states) table.set(state);
    expect([...table.keys()]).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    expect([...table.values()]).toEqual(states);
    expect(table.fingerprint('d')).toBe('not-hex');
    expect(table.get('zz')).toBeUndefined();
  });

  it('a known id keeps its place when set again; a copy changes nothing until set back', () => {
    const table = new ItemTable();
    for (const id of ['a', 'b', 'c']) table.set(full(id));
    const b = table.get('b')!;
    b.phase = 'accepted';
    expect(table.get('b')?.phase).toBe('downloaded');
    table.set(b);
    expect(table.get('b')?.phase).toBe('accepted');
    expect([...table.keys()]).toEqual(['a', 'b', 'c']);
  });

  it('grows past its first capacity without losing anything, marks survive repacking', () => {
    const table = new ItemTable();
    for (let i = 0; i < 5000; i++)
      table.set(full(`k${i}`, { submissions: i, sha256: i.toString(16).padStart(64, '0') }));
    table.mark('k4999');
    table.set(full('k4999', { phase: 'failed' }));
    expect(table.size).toBe(5000);
    expect(table.get('k1234')).toEqual(
      full('k1234', { submissions: 1234, sha256: (1234).toString(16).padStart(64, '0') }),
    );
    expect(table.marked('k4999')).toBe(true);
    expect(table.marked('k0')).toBe(false);
  });

  it('lean: keeps only what a report shows', () => {
    const table = new ItemTable({ lean: true });
    table.set(full('a'));
    expect(table.get('a')).toEqual(full('a', { src: null, imageUrl: null, bytes: null, mtimeMs: null }));
  });
});
