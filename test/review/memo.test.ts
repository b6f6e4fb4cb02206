/**
 * The review's source memory (src/review/memo.ts) under the access pattern of a run: sources handed
 * over in manifest order by the preflight, each looked up once per style by reviews that lag behind.
 */
import { describe, expect, it } from 'vitest';
import { RECENT, SourceMemo, STALE_AFTER } from '../../src/review/memo.js';

const STYLES = 6;

/**
 * Sources 0..n-1 handed over one by one; the reviews of source i - lag come as source i is handed
 * over (`used(i)` false: its items failed, nobody looks it up). A miss decodes the source and
 * remembers it, as the review does. Returns the sources found on their first look-up.
 */
function scan(memo: SourceMemo<number>, n: number, lag: number, used: (i: number) => boolean = () => true) {
  let hits = 0;
  let lookups = 0;
  let made = 0;
  let largest = 0;
  for (let i = 0; i < n + lag; i++) {
    if (i < n) {
      memo.offer(`s${i}`, () => {
        made++;
        return i;
      });
    }
    const reviewed = i - lag;
    if (reviewed >= 0 && used(reviewed)) {
      lookups++;
      const found = memo.get(`s${reviewed}`);
      if (found !== undefined) {
        expect(found).toBe(reviewed);
        hits++;
      } else memo.remember(`s${reviewed}`, reviewed);
      // The other styles find it: decoded or handed over, it is among the recent ones now.
      for (let style = 1; style < STYLES; style++) expect(memo.get(`s${reviewed}`)).toBe(reviewed);
    }
    largest = Math.max(largest, memo.size);
  }
  return { hits, lookups, made, largest };
}

describe('source memory', () => {
  it('finds every source when the reviews lag by fewer sources than it holds', () => {
    const memo = new SourceMemo<number>(512);
    const { hits, lookups, largest } = scan(memo, 3000, 300);
    expect(hits).toBe(lookups);
    expect(largest).toBeLessThanOrEqual(512);
  });

  it('keeps finding its size in sources when the lag outgrows it, where least-recently-used found none', () => {
    const capacity = 192;
    const lag = 400;
    const memo = new SourceMemo<number>(capacity);
    const { hits, lookups, made, largest } = scan(memo, 4000, lag);
    // The sources kept are the next to be used: about (capacity - RECENT) of every `lag`.
    const expected = ((capacity - RECENT) / lag) * lookups;
    expect(hits).toBeGreaterThan(0.9 * expected);
    expect(hits).toBeLessThanOrEqual(lookups);
    // A source not kept was never made (its signature costs CPU).
    expect(made).toBe(hits);
    expect(largest).toBeLessThanOrEqual(capacity);
  });

  it('gives up on sources nobody looks up once the reviews are well past them', () => {
    const memo = new SourceMemo<number>(256);
    // One source in seven has no result to review (its items failed): its entry is never used.
    const used = (i: number) => i % 7 !== 3;
    const { hits, lookups, largest } = scan(memo, 20 * STALE_AFTER, 100, used);
    // Were those entries kept for ever, they would fill the memory and every later source would miss.
    expect(hits).toBeGreaterThan(0.97 * lookups);
    expect(largest).toBeLessThanOrEqual(256);
  });

  it('forgets a source on delete, wherever it was', () => {
    const memo = new SourceMemo<number>(128);
    memo.offer('a', () => 1);
    memo.remember('b', 2);
    memo.delete('a');
    memo.delete('b');
    expect(memo.get('a')).toBeUndefined();
    expect(memo.get('b')).toBeUndefined();
    expect(memo.size).toBe(0);
  });
});
