/**
 * Image references that are not local files, read without any server: http(s) URLs taken as
 * written, `s3://` references taken verbatim (nothing is listed or fetched for a plain reference),
 * and the `image_url` / `image_link` columns of product feeds.
 */
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/manifest/index.js';
import { useTempDir } from '../helpers/tmp.js';
import { manifestError } from './helpers.js';

const tmp = useTempDir('kb-manifest-remote-');

describe('http(s) URLs in image', () => {
  it('takes a URL as written, query kept, id from the decoded file name of its path', async () => {
    await tmp.write(
      'm.csv',
      [
        'id,image,style',
        ',https://cdn.example/p/K%201.jpg?sig=abc123&Expires=99 ,modern',
        'own,http://cdn.example/a/b.png,modern|rustic',
        ',HTTPS://CDN.example/x/sku-7.webp#frag,modern',
      ].join('\n'),
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.imagePath, i.rejection])).toEqual([
      [
        'K-1__modern',
        'https://cdn.example/p/K%201.jpg?sig=abc123&Expires=99',
        'https://cdn.example/p/K%201.jpg?sig=abc123&Expires=99',
        undefined,
      ],
      ['own__modern', 'http://cdn.example/a/b.png', 'http://cdn.example/a/b.png', undefined],
      ['own__rustic', 'http://cdn.example/a/b.png', 'http://cdn.example/a/b.png', undefined],
      [
        'sku-7__modern',
        'HTTPS://CDN.example/x/sku-7.webp#frag',
        'HTTPS://CDN.example/x/sku-7.webp#frag',
        undefined,
      ],
    ]);
  });

  it('never globs a URL: * and ? are the URL’s own', async () => {
    await tmp.write('imgs/a.jpg', '');
    await tmp.write('m.jsonl', '{"image": "https://cdn.example/imgs/*.jpg?x=1", "style": "modern"}\n');
    const { items } = await readManifest('m.jsonl', { cwd: tmp.dir });
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ id: '-__modern', image: 'https://cdn.example/imgs/*.jpg?x=1' });
    expect(items[0]?.rejection).toBeUndefined();
  });

  it('a URL with no file name needs the row’s id; the rejection shows it redacted', async () => {
    await tmp.write(
      'm.csv',
      'id,image,style\n,https://cdn.example/?sig=SECRETSIG,modern\nhome,https://cdn.example/,modern\n',
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.rejection?.code])).toEqual([
      ['line-2__modern', 'invalid_item'],
      ['home__modern', undefined],
    ]);
    expect(items[0]?.rejection?.message).toBe(
      'https://cdn.example/?sig=*** names no file to take an item id from; give the row an id',
    );
  });

  it('duplicate ids from URLs: the error shows the URLs redacted', async () => {
    await tmp.write(
      'm.csv',
      'image,style\nhttps://a.example/k1.jpg?X-Amz-Signature=SECRET1,modern\nhttps://b.example/k1.jpg?token=SECRET2,modern\n',
    );
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toContain('"k1__modern": lines 2 and 3');
    expect(error.message).toContain('https://a.example/k1.jpg?X-Amz-Signature=***');
    expect(error.message).not.toMatch(/SECRET/);
  });
});

describe('s3:// references in image', () => {
  it('takes keys verbatim (#, ?, +, spaces, %), id from the key’s file name', async () => {
    await tmp.write(
      'm.jsonl',
      [
        '{"image": "s3://kitchen/kitchens/sku #1.jpg", "style": "modern"}',
        '{"image": "s3://kitchen/a+b c/K%201.png", "style": "modern"}',
        '{"image": "s3://kitchen/deep/path/with#hash/x.y.jpg", "id": "mine", "style": "modern"}',
      ].join('\n'),
    );
    // An S3 environment that reaches nothing: a plain reference is neither listed nor fetched here.
    const access = { maxBytes: 1, allowPrivate: false, env: { AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9' } };
    const { items } = await readManifest('m.jsonl', { cwd: tmp.dir, access });
    expect(items.map((i) => [i.id, i.image, i.imagePath])).toEqual([
      ['sku--1__modern', 's3://kitchen/kitchens/sku #1.jpg', 's3://kitchen/kitchens/sku #1.jpg'],
      ['K-201__modern', 's3://kitchen/a+b c/K%201.png', 's3://kitchen/a+b c/K%201.png'],
      [
        'mine__modern',
        's3://kitchen/deep/path/with#hash/x.y.jpg',
        's3://kitchen/deep/path/with#hash/x.y.jpg',
      ],
    ]);
    expect(items.every((i) => i.rejection === undefined)).toBe(true);
  });

  it('a malformed s3 reference rejects its row (invalid_item), the rest goes on', async () => {
    await tmp.write(
      'm.csv',
      'image,style\ns3://kitchen,modern\ns3://x/k.jpg,modern\ns3://kitchen/ok.jpg,modern\n',
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.rejection?.code])).toEqual([
      ['line-2__modern', 'invalid_item'],
      ['line-3__modern', 'invalid_item'],
      ['ok__modern', undefined],
    ]);
    expect(items[0]?.rejection?.message).toMatch(/names a bucket but no object key/);
    expect(items[1]?.rejection?.message).toMatch(/is not a bucket name/);
  });
});
