import { readFile, stat, utimes } from 'node:fs/promises';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ensureThumbnail } from '../../src/report/thumbs.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenImage } from '../support/images.js';

describe('thumbnails', () => {
  it('a large image is shrunk to a WebP of at most `size`; a second call reuses it', async () => {
    const tmp = await tempDirForTest('kb-thumbs-');
    const source = await tmp.write('big.jpg', await kitchenImage({ width: 1200, height: 900 }));
    const job = { source, dest: tmp.file('thumbs/big.src.webp') };
    await tmp.write('thumbs/.keep', '');
    expect(await ensureThumbnail(job, 320)).toEqual({ state: 'created', file: job.dest });
    const meta = await sharp(job.dest).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 320, 240]);
    expect(await ensureThumbnail(job, 320)).toEqual({ state: 'reused', file: job.dest });
  });

  it('an image already thumbnail-sized is copied as it is, under its own extension (no decode, no encode)', async () => {
    const tmp = await tempDirForTest('kb-thumbs-');
    await tmp.write('thumbs/.keep', '');
    for (const format of ['jpeg', 'png'] as const) {
      const bytes = await kitchenImage({ width: 300, height: 200, format });
      const source = await tmp.write(`small.${format}`, bytes);
      const dest = tmp.file(`thumbs/small-${format}.out.webp`);
      const made = await ensureThumbnail({ source, dest }, 320);
      const ext = format === 'jpeg' ? 'jpg' : 'png';
      expect(made).toEqual({ state: 'created', file: dest.replace(/\.webp$/, `.${ext}`) });
      expect(await readFile(made.file)).toEqual(bytes);
      expect((await ensureThumbnail({ source, dest }, 320)).state).toBe('reused');
    }
  });

  it('a thumb newer than its source is kept whichever way it was made; a source written since gets a new one', async () => {
    const tmp = await tempDirForTest('kb-thumbs-');
    const source = await tmp.write('s.jpg', await kitchenImage({ width: 300, height: 200 }));
    const dest = tmp.file('thumbs/s.src.webp');
    const ago = (s: number) => new Date(Date.now() - s * 1000);
    await utimes(source, ago(100), ago(100));
    // A shrunk thumb made when the source was another picture: this one would be copied, but the
    // thumb is newer than the source, so it stays (no decode on a rerun's report).
    await tmp.write('thumbs/s.src.webp', await sharp(source).resize(80).webp().toBuffer());
    await utimes(dest, ago(50), ago(50));
    expect(await ensureThumbnail({ source, dest }, 320)).toEqual({ state: 'reused', file: dest });
    // The source written since: its thumb is made again, as a copy this time, and then kept.
    await utimes(source, ago(10), ago(10));
    const copy = dest.replace(/\.webp$/, '.jpg');
    expect(await ensureThumbnail({ source, dest }, 320)).toEqual({ state: 'created', file: copy });
    expect(await ensureThumbnail({ source, dest }, 320)).toEqual({ state: 'reused', file: copy });
  });

  it('a small image cut short is not copied: it fails, and the page shows a placeholder', async () => {
    const tmp = await tempDirForTest('kb-thumbs-');
    await tmp.write('thumbs/.keep', '');
    const whole = await kitchenImage({ width: 300, height: 200 });
    const source = await tmp.write('cut.jpg', whole.subarray(0, Math.floor(whole.length * 0.6)));
    const dest = tmp.file('thumbs/cut.src.webp');
    expect((await ensureThumbnail({ source, dest }, 320)).state).toBe('failed');
    await expect(stat(dest.replace(/\.webp$/, '.jpg'))).rejects.toThrow();
  });
});
