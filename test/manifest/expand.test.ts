import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/manifest/index.js';
import { useTempDir } from '../helpers/tmp.js';
import { manifestError, touch } from './helpers.js';

const tmp = useTempDir('kb-manifest-');

describe('globs', () => {
  it('expands a glob to every matching file, sorted, ids from file names (prefixed by the row id)', async () => {
    await touch(tmp, 'imgs/b.jpg', 'imgs/a.jpg', 'imgs/c.png', 'imgs/sub/d.jpg', 'imgs/notes.txt');
    await tmp.write('m.csv', 'id,image,style\n,imgs/*.jpg,modern|rustic\nset,"imgs/**/*.{jpg,png}",modern\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image])).toEqual([
      ['a__modern', 'imgs/a.jpg'],
      ['a__rustic', 'imgs/a.jpg'],
      ['b__modern', 'imgs/b.jpg'],
      ['b__rustic', 'imgs/b.jpg'],
      ['set-a__modern', 'imgs/a.jpg'],
      ['set-b__modern', 'imgs/b.jpg'],
      ['set-c__modern', 'imgs/c.png'],
      ['set-d__modern', 'imgs/sub/d.jpg'],
    ]);
    expect(items[0]?.imagePath).toBe(path.join(tmp.dir, 'imgs', 'a.jpg'));
    expect(items.every((i) => i.rejection === undefined && i.source.line > 1)).toBe(true);
  });

  it('resolves globs and paths against the manifest folder, not the cwd', async () => {
    await touch(tmp, 'project/pics/k1.jpg');
    await tmp.write('project/m.jsonl', '{"image": "pics/*.jpg", "style": "modern"}\n');
    const { items } = await readManifest('project/m.jsonl', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.imagePath])).toEqual([
      ['k1__modern', 'pics/k1.jpg', path.join(tmp.dir, 'project', 'pics', 'k1.jpg')],
    ]);
  });

  it('a glob that matches nothing → file_not_found, named by the row id or the pattern', async () => {
    await tmp.write('m.csv', 'id,image,style\n,missing/*.jpg,modern\nk9,nothing/*.png,modern|rustic\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.imagePath, i.rejection?.code])).toEqual([
      ['missing--.jpg__modern', 'missing/*.jpg', '', 'file_not_found'],
      ['k9__modern', 'nothing/*.png', '', 'file_not_found'],
      ['k9__rustic', 'nothing/*.png', '', 'file_not_found'],
    ]);
    expect(items[0]?.rejection?.message).toMatch(/^no file matches the glob "missing\/\*\.jpg"/);
  });

  it('a file literally named like a pattern is a path, not an empty glob', async () => {
    await touch(tmp, 'k[1].jpg');
    await tmp.write('m.csv', 'image,style\nk[1].jpg,modern\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image, i.rejection])).toEqual([['k-1-__modern', 'k[1].jpg', undefined]]);
  });

  it('a plain path that does not exist is left to preflight (not stat-ed here)', async () => {
    await tmp.write('m.csv', 'image,style\nnot/there.jpg,modern\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items[0]).toMatchObject({ id: 'there__modern', image: 'not/there.jpg' });
    expect(items[0]?.rejection).toBeUndefined();
  });

  it('an absolute path stays as given; a path outside the folder stays relative with ..', async () => {
    const abs = path.join(tmp.dir, 'elsewhere', 'k5.jpg');
    await tmp.write(
      'sub/m.json',
      JSON.stringify([
        { image: abs, style: 'modern' },
        { image: '../x/k6.jpg', style: 'modern' },
      ]),
    );
    const { items } = await readManifest(path.join(tmp.dir, 'sub', 'm.json'));
    expect(items.map((i) => [i.image, i.imagePath])).toEqual([
      [abs, abs],
      ['../x/k6.jpg', path.join(tmp.dir, 'x', 'k6.jpg')],
    ]);
  });
});

describe('ids', () => {
  it('are made safe for file names: spaces, slashes, leading dots', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify([
        { id: 'my kitchen', image: 'a.jpg', style: 'mid century' },
        { id: '..', image: 'b.jpg', style: 'modern' },
        { id: '../../etc/passwd', image: 'c.jpg', module: 'kitchen-configurator' },
        { id: 7, image: 'd.jpg', style: 'modern' },
      ]),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => i.id)).toEqual([
      'my-kitchen__mid-century',
      '--__modern',
      '---..-etc-passwd',
      '7__modern',
    ]);
    for (const item of items) expect(item.id).toMatch(/^[A-Za-z0-9._-]+$/);
  });
});

describe('duplicate ids (one manifest error naming every duplicate with both rows)', () => {
  it('exact duplicates', async () => {
    await tmp.write('m.csv', 'id,image,style\nk1,a.jpg,modern\nk2,b.jpg,modern\n\nk1,c.jpg,rustic|modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(
      /^m\.csv:5: a duplicate item id .*\n {2}- "k1__modern": lines 2 and 5, images "a.jpg" and "c.jpg"; give one of the rows another id \(the id column\)$/,
    );
    expect(error.code).toBe('duplicate_id');
  });

  it('the same id after sanitising', async () => {
    await tmp.write('m.csv', 'id,image,style\nk 1,a.jpg,modern\nk/1,b.jpg,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:3: a duplicate item id .*\n {2}- "k-1__modern": lines 2 and 3/);
  });

  it('ids that differ only in case (one file on macOS)', async () => {
    await tmp.write(
      'm.jsonl',
      '{"image": "K1.jpg", "style": "modern"}\n{"image": "x.jpg", "style": "modern"}\n{"image": "k1.png", "style": "modern"}\n',
    );
    const error = await manifestError(readManifest('m.jsonl', { cwd: tmp.dir }));
    expect(error.message).toMatch(
      /^m\.jsonl:3: a duplicate item id .*\n {2}- "k1__modern" \(same as "K1__modern" when case is ignored\): lines 1 and 3/,
    );
  });

  it('files of one glob that share a stem take the extension into their ids (a glob row cannot name them)', async () => {
    await touch(tmp, 'imgs/k1.jpg', 'imgs/k1.png', 'imgs/K2.webp', 'imgs/k2.jpg', 'imgs/k3.jpg');
    await tmp.write('m.csv', 'image,style\nimgs/*,modern\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.image])).toEqual([
      ['K2-webp__modern', 'imgs/K2.webp'],
      ['k1-jpg__modern', 'imgs/k1.jpg'],
      ['k1-png__modern', 'imgs/k1.png'],
      ['k2-jpg__modern', 'imgs/k2.jpg'],
      ['k3__modern', 'imgs/k3.jpg'],
    ]);
  });

  it('every duplicate is named at once, each with the advice that fits it', async () => {
    await touch(tmp, 'a/k1.jpg', 'b/k1.jpg', 'a/k2.jpg', 'b/k2.jpg', 'x.jpg');
    await tmp.write('m.csv', 'id,image,style\n,*/*.jpg,modern\nx,x.jpg,modern\nx,x.jpg,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message.split('\n')).toEqual([
      'm.csv:2: 3 duplicate item ids (each id names one result file):',
      '  - "k1__modern": line 2, images "a/k1.jpg" and "b/k1.jpg"; files in different folders share a name: give each folder a row of its own with an id (used as a prefix)',
      '  - "k2__modern": line 2, images "a/k2.jpg" and "b/k2.jpg"; files in different folders share a name: give each folder a row of its own with an id (used as a prefix)',
      '  - "x__modern": lines 3 and 4; give one of the rows another id (the id column)',
    ]);
  });

  it('a long list of duplicates is cut after 20, with the count of the rest', async () => {
    const rows = Array.from({ length: 30 }, (_, i) => `d${i},a.jpg,modern\nd${i},a.jpg,modern`);
    await tmp.write('m.csv', `id,image,style\n${rows.join('\n')}\n`);
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    const lines = error.message.split('\n');
    expect(lines[0]).toContain('30 duplicate item ids');
    expect(lines).toHaveLength(22);
    expect(lines[21]).toBe('  - and 10 more');
  });

  it('rejected items take part too', async () => {
    await tmp.write('m.csv', 'id,image,module,style\nk1,a.jpg,bogus,modern\nk1,b.jpg,,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/"k1__modern": lines 2 and 3/);
  });

  it('the same image with different styles is not a duplicate; a style listed twice is used once', async () => {
    await tmp.write('m.csv', 'image,style\na.jpg,modern|rustic|modern\n');
    const { items, warnings } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => i.id)).toEqual(['a__modern', 'a__rustic']);
    expect(warnings).toEqual(['m.csv:2: a style is listed twice in this row; it is used once']);
  });
});

describe('row checks in CSV', () => {
  it('missing image cell, missing style, empty style list, prompt/configuration on the wrong module', async () => {
    await tmp.write(
      'm.csv',
      [
        'id,image,module,style,prompt,configuration',
        'r1,,,modern,,',
        'r2,b.jpg,,,,',
        'r3,c.jpg,,|,,',
        'r4,d.png,kitchen-configurator,,bright,',
        'r5,e.png,kitchen-configurator,modern,,',
        'r6,f.jpg,change-style,modern,,"{""a"":1}"',
      ].join('\n'),
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.rejection?.code, i.rejection?.message])).toEqual([
      ['r1__modern', 'invalid_item', 'image is missing'],
      ['r2', 'invalid_item', 'style is missing; module change-style needs a style key'],
      ['r3', 'invalid_item', 'style is empty; module change-style needs a style key'],
      ['r4', 'invalid_item', 'prompt is for module change-style only; kitchen-configurator takes no prompt'],
      ['r5', 'invalid_item', 'style is for module change-style only; kitchen-configurator takes no style'],
      [
        'r6__modern',
        'invalid_item',
        'configuration is for module kitchen-configurator only; change-style takes no configuration',
      ],
    ]);
  });
});
