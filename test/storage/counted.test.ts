/**
 * The store counters' seam (`storage/counted.ts`): every output operation and every source read is
 * told to the listener with a fixed vocabulary, failures included, and nothing from data (no key,
 * path or URL) reaches it.
 */
import { writeFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { countedOutput, type StoreOp } from '../../src/storage/counted.js';
import { LocalOutputStore } from '../../src/storage/local-output.js';
import { createSources, defaultSourceAccess } from '../../src/storage/sources.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-counted-');

describe('counted stores', () => {
  it('counts output operations by kind and op, failures as ok: false, a listing once when it ends', async () => {
    const seen: StoreOp[] = [];
    const output = countedOutput(new LocalOutputStore(tmp.file('out')), (op) => seen.push(op));
    await output.put('results/secret-id.jpg', 'bytes');
    expect(await output.head('results/secret-id.jpg')).not.toBeNull();
    await expect(output.get('results/missing.jpg')).rejects.toThrow();
    const listed = [];
    for await (const object of output.list('results/')) listed.push(object.key);
    expect(listed).toEqual(['results/secret-id.jpg']);
    expect(seen).toEqual([
      { store: 'output', kind: 'file', op: 'put', ok: true },
      { store: 'output', kind: 'file', op: 'head', ok: true },
      { store: 'output', kind: 'file', op: 'get', ok: false },
      { store: 'output', kind: 'file', op: 'list', ok: true },
    ]);
    expect(JSON.stringify(seen)).not.toContain('secret-id');
  });

  it('counts source reads by the reference form, a missing file as a failed open', async () => {
    const seen: StoreOp[] = [];
    const sources = createSources({ ...defaultSourceAccess(), onStoreOp: (op) => seen.push(op) });
    try {
      await writeFile(tmp.file('a.jpg'), 'x');
      await (await sources.open(tmp.file('a.jpg'))).bytes();
      await expect(sources.stat(tmp.file('missing.jpg'))).rejects.toThrow();
      expect(seen).toEqual([
        { store: 'source', kind: 'file', op: 'open', ok: true },
        { store: 'source', kind: 'file', op: 'stat', ok: false },
      ]);
    } finally {
      sources.close();
    }
  });

  it('is the store itself when nobody listens', () => {
    const output = new LocalOutputStore(tmp.file('out'));
    expect(countedOutput(output, undefined)).toBe(output);
  });
});
