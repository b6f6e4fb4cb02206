/**
 * `image_url` and `image_link` (product feeds: Google Merchant's `image_link`) taken as `image` when
 * there is no `image`: precedence image > image_url > image_link, per header in CSV and per object
 * in JSON and JSONL; the names not taken are warned about as ignored.
 */
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/manifest/index.js';
import { useTempDir } from '../helpers/tmp.js';
import { manifestError } from './helpers.js';

const tmp = useTempDir('kb-manifest-columns-');

describe('CSV image columns', () => {
  it('image_link alone is the image (a Google Merchant feed)', async () => {
    await tmp.write(
      'feed.csv',
      'id,title,image_link,style\nsku1,Oak kitchen,https://cdn.example/sku1.jpg,modern\n',
    );
    const { items, warnings } = await readManifest('feed.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image])).toEqual([['sku1__modern', 'https://cdn.example/sku1.jpg']]);
    expect(warnings).toEqual([
      'feed.csv:1: unknown column "title" is ignored (known: image, module, style, prompt, configuration, id)',
    ]);
  });

  it('image_url wins over image_link, which is warned about as ignored', async () => {
    await tmp.write(
      'm.csv',
      'image_link,Image_URL,style\nhttps://x.example/link.jpg,https://x.example/url.jpg,modern\n',
    );
    const { items, warnings } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => i.image)).toEqual(['https://x.example/url.jpg']);
    expect(warnings).toEqual([
      'm.csv:1: column "image_link" is ignored: "image_url" is the image (precedence: image, image_url, image_link)',
    ]);
  });

  it('image wins over both; a local image stays a local path', async () => {
    await tmp.write(
      'm.csv',
      'image_url,image,image_link,style\nhttps://x.example/u.jpg,pics/k1.jpg,https://x.example/l.jpg,modern\n',
    );
    const { items, warnings } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.imagePath])).toEqual([
      ['k1__modern', 'pics/k1.jpg', tmp.file('pics/k1.jpg')],
    ]);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^m\.csv:1: column "image_url" is ignored: "image" is the image/);
    expect(warnings[1]).toMatch(/^m\.csv:1: column "image_link" is ignored: "image" is the image/);
  });

  it('none of the three: a manifest error listing the accepted names', async () => {
    await tmp.write('m.csv', 'id,picture,style\nk1,a.jpg,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toBe(
      'm.csv:1: the header has no "image" column (accepted: "image", "image_url", "image_link")',
    );
  });
});

describe('JSON and JSONL image fields, per object', () => {
  it('JSONL: each line takes its own image name by precedence', async () => {
    await tmp.write(
      'm.jsonl',
      [
        '{"image_link": "https://x.example/a.jpg", "style": "modern"}',
        '{"image_url": "https://x.example/b.jpg", "image_link": "https://x.example/no.jpg", "style": "modern"}',
        '{"image": "c.jpg", "image_url": "https://x.example/no.jpg", "style": "modern"}',
        '{"image": null, "image_url": "https://x.example/d.jpg", "style": "modern"}',
        '{"style": "modern", "id": "none"}',
      ].join('\n'),
    );
    const { items, warnings } = await readManifest('m.jsonl', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.rejection?.code])).toEqual([
      ['a__modern', 'https://x.example/a.jpg', undefined],
      ['b__modern', 'https://x.example/b.jpg', undefined],
      ['c__modern', 'c.jpg', undefined],
      ['d__modern', 'https://x.example/d.jpg', undefined],
      ['none__modern', '', 'invalid_item'],
    ]);
    // Warned once per name, at its first unused occurrence.
    expect(warnings).toEqual([
      'm.jsonl:2: field "image_link" is ignored: the item has its image already (precedence: image, image_url, image_link)',
      'm.jsonl:3: field "image_url" is ignored: the item has its image already (precedence: image, image_url, image_link)',
    ]);
  });

  it('JSON with defaults: an item’s own image_url wins over a default image', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify({
        defaults: { image: 'fallback.jpg', style: 'modern' },
        items: [
          { image_url: 'https://x.example/own.jpg' },
          { id: 'plain' },
          { image_link: 'https://x.example/l.jpg' },
        ],
      }),
    );
    const { items, warnings } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image])).toEqual([
      ['own__modern', 'https://x.example/own.jpg'],
      ['plain__modern', 'fallback.jpg'],
      ['l__modern', 'https://x.example/l.jpg'],
    ]);
    expect(warnings).toEqual([]);
  });

  it('JSON: image_link in defaults is the default image', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify({
        defaults: { image_link: 'https://x.example/d.jpg' },
        items: [{ id: 'k1', style: 'modern' }],
      }),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.rejection])).toEqual([
      ['k1__modern', 'https://x.example/d.jpg', undefined],
    ]);
  });
});
