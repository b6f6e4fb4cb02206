/**
 * libvips' operation cache (src/image/sharp-cache.ts): the executable turns it off, whether sharp
 * is loaded already or only later (loadSharp() loads it on the first image); a library caller's process
 * keeps its own setting.
 */
import sharp from 'sharp';
import { afterEach, describe, expect, it, vi } from 'vitest';

describe("libvips' operation cache", () => {
  afterEach(() => {
    // sharp's default back (the setting is libvips', shared by every module instance).
    sharp.cache(true);
    vi.resetModules();
  });

  it('is left alone until the executable drops it; dropped, it is off at once', async () => {
    const { dropSharpCache } = await import('../../src/image/sharp-cache.js');
    const loaded = await (await import('../../src/image/sharp.js')).loadSharp();
    expect(loaded.cache().memory.max).toBeGreaterThan(0);
    dropSharpCache();
    expect(loaded.cache().memory.max).toBe(0);
  });

  it('dropped before sharp is loaded, it is off as soon as sharp is', async () => {
    const { dropSharpCache } = await import('../../src/image/sharp-cache.js');
    dropSharpCache();
    expect(sharp.cache().memory.max).toBeGreaterThan(0);
    const loaded = await (await import('../../src/image/sharp.js')).loadSharp();
    expect(loaded.cache().memory.max).toBe(0);
  });
});
