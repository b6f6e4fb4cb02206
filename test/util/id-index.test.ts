import { describe, expect, it } from 'vitest';
import { IdIndex } from '../../src/util/id-index.js';

describe('IdIndex: ids to numbers in typed arrays', () => {
  it('stores, overwrites and finds values across many growths; unknown ids are absent', () => {
    const index = new IdIndex();
    const n = 50_000;
    for (let i = 0; i < n; i++) index.set(`kitchen-${i}__japandi`, i);
    index.set('kitchen-7__japandi', 4_000_000_000);
    expect(index.size).toBe(n);
    expect(index.get('kitchen-0__japandi')).toBe(0);
    expect(index.get('kitchen-49999__japandi')).toBe(49_999);
    expect(index.get('kitchen-7__japandi')).toBe(4_000_000_000);
    let found = 0;
    for (let i = n; i < 2 * n; i++) if (index.get(`kitchen-${i}__japandi`) !== undefined) found++;
    expect(found).toBe(0);
  });
});
