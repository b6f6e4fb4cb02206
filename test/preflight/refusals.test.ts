import { mkdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createPreflighter, describePreflight } from '../../src/preflight/index.js';
import { sha256 } from '../../src/util/fs.js';
import { craftedHeic, photo, pngBomb, preflightEnv, refused } from './helpers.js';

const env = preflightEnv();

describe('refusals', () => {
  it('truncated JPEG → corrupt_image (its header alone parses fine)', async () => {
    const full = await photo(800, 600).jpeg().toBuffer();
    const cut = full.subarray(0, Math.floor(full.length * 0.6));
    const file = await env.tmp.write('cut.jpg', cut);
    const result = refused(await env.pre.prepare(file));
    expect(result.error.code).toBe('corrupt_image');
    expect(result.error.message).toContain('cut.jpg');
    expect(result.error.message).toMatch(/damaged or cut short .*premature end of JPEG/);
    expect(result.sourceSha256).toBe(sha256(cut));
  });

  it('truncated PNG → corrupt_image', async () => {
    const full = await photo(400, 300).png().toBuffer();
    const result = refused(
      await env.pre.prepare(await env.tmp.write('cut.png', full.subarray(0, full.length >> 1))),
    );
    expect(result.error.code).toBe('corrupt_image');
  });

  it('a text file named .jpg → unsupported_format', async () => {
    const file = await env.tmp.write('notes.jpg', 'shopping list: eggs, milk\n');
    const result = refused(await env.pre.prepare(file));
    expect(result.error).toEqual({
      code: 'unsupported_format',
      message: `${file}: a text file, not an image`,
    });
  });

  it('a 0-byte file → unsupported_format', async () => {
    const file = await env.tmp.write('empty.png', '');
    const result = refused(await env.pre.prepare(file));
    expect(result.error.code).toBe('unsupported_format');
    expect(result.error.message).toMatch(/empty\.png: empty file \(0 bytes\)/);
    expect(result.sourceSha256).toBe(sha256(''));
  });

  it('random bytes → unsupported_format', async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) & 0xff));
    bytes[0] = 0; // make sure it is not sniffed as text
    const result = refused(await env.pre.prepare(await env.tmp.write('junk.webp', bytes)));
    expect(result.error.code).toBe('unsupported_format');
  });

  it('a missing file → file_not_found with no hash', async () => {
    const file = env.tmp.file('nope.jpg');
    const result = refused(await env.pre.prepare(file));
    expect(result).toEqual({
      ok: false,
      sourceSha256: null,
      sourceFile: null,
      error: { code: 'file_not_found', message: `${file}: no such file` },
    });
    expect(describePreflight(result)).toBe(`rejected (file_not_found): ${file}: no such file`);
  });

  it('a folder → file_not_found', async () => {
    const dir = env.tmp.file('folder.jpg');
    await mkdir(dir);
    expect(refused(await env.pre.prepare(dir)).error).toEqual({
      code: 'file_not_found',
      message: `${dir}: is a folder, not an image file`,
    });
  });

  it('a 30000×30000 PNG bomb → too_large, naming its size, without decoding it', async () => {
    const started = performance.now();
    const bomb = await pngBomb();
    expect(bomb.length).toBeLessThan(5_000_000); // 900 megapixels in a few MB
    const file = await env.tmp.write('bomb.png', bomb);
    const result = refused(await env.pre.prepare(file));
    expect(result.error.code).toBe('too_large');
    expect(result.error.message).toBe(
      `${file}: image is 30000×30000 pixels, over the 268 megapixel safety limit`,
    );
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  it('honours a lower limitInputPixels', async () => {
    const strict = createPreflighter({ cacheDir: env.tmp.file('cache'), limitInputPixels: 1_000_000 });
    const file = await env.tmp.write('two-mp.jpg', await photo(2000, 1000).jpeg().toBuffer());
    expect(refused(await strict.prepare(file)).error.message).toBe(
      `${file}: image is 2000×1000 pixels, over the 1 megapixel safety limit`,
    );
  });

  it('a HEIC header this sharp cannot decode → unsupported_format naming HEIC', async () => {
    const result = refused(await env.pre.prepare(await env.tmp.write('IMG_0001.HEIC', craftedHeic())));
    expect(result.error.code).toBe('unsupported_format');
    expect(result.error.message).toMatch(
      /IMG_0001\.HEIC: a HEIF\/HEIC image that this build of sharp cannot decode/,
    );
  });

  it('SVG → unsupported_format (not a photo), BMP → unsupported_format', async () => {
    const svg = await env.tmp.write(
      'plan.svg',
      '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>',
    );
    expect(refused(await env.pre.prepare(svg)).error.message).toMatch(/an SVG drawing, not a photo/);
    const bmpHeader = Buffer.alloc(64);
    bmpHeader.write('BM', 0, 'latin1');
    bmpHeader.writeUInt32LE(40, 14);
    const bmp = refused(await env.pre.prepare(await env.tmp.write('old.bmp', bmpHeader)));
    expect(bmp.error).toMatchObject({ code: 'unsupported_format' });
    expect(bmp.error.message).toMatch(/BMP image/);
  });
});

describe('options', () => {
  it.each([
    [{ maxBytes: 0 }, /preflight option maxBytes: expected a whole number of at least 1, got 0/],
    [{ maxSide: 1.5 }, /preflight option maxSide: expected a whole number of at least 1, got 1.5/],
    [
      { limitInputPixels: Number.POSITIVE_INFINITY },
      /preflight option limitInputPixels: expected a whole number of at least 1, got Infinity/,
    ],
    [{ concurrency: -1 }, /preflight option concurrency: expected a whole number of at least 1, got -1/],
  ])('refuses %o', (options, message) => {
    expect(() => createPreflighter(options)).toThrow(message);
  });
});
