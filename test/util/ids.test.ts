import { describe, expect, it } from 'vitest';
import { safeId } from '../../src/util/ids.js';

describe('safeId', () => {
  it('keeps [A-Za-z0-9._-] and turns everything else into -', () => {
    expect(safeId('k1__scandinavian')).toBe('k1__scandinavian');
    expect(safeId('küche 1/a\\b')).toBe('k-che-1-a-b');
  });

  it('never yields a name that walks out of results/ or hides as a dot file', () => {
    for (const raw of ['.', '..', '../x', '.hidden', '']) {
      const id = safeId(raw);
      expect(id, raw).not.toMatch(/^\./);
      expect(id, raw).not.toContain('/');
      expect(id.length, raw).toBeGreaterThan(0);
    }
  });

  it('cuts names far over the file-name limit and keeps two long names apart with a hash', () => {
    const a = safeId(`${'x'.repeat(300)}a`);
    const b = safeId(`${'x'.repeat(300)}b`);
    expect(Buffer.byteLength(`${a}.webp`)).toBeLessThanOrEqual(255);
    expect(a).not.toBe(b);
  });
});
