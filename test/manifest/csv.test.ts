import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exitCodeFor } from '../../src/errors.js';
import { readManifest } from '../../src/manifest/index.js';
import { useTempDir } from '../helpers/tmp.js';
import { manifestError } from './helpers.js';

const tmp = useTempDir('kb-manifest-');

const summary = (items: { id: string; source: { line: number } }[]) =>
  items.map((i) => `${i.id}@${i.source.line}`);

describe('CSV manifest: reading', () => {
  it('accepts BOM, CRLF, blank lines, quoted commas and a quoted newline, keeping true line numbers', async () => {
    await tmp.write(
      'm.csv',
      [
        '\uFEFFid,image,style,prompt', // 1
        'k1,images/k1.jpg,modern,"bright, airy"', // 2
        '', // 3
        'k2,images/k2.jpg,rustic,"line one', // 4
        'line two"', // 5
        'k3,images/k3.jpg,modern|rustic,', // 6
        '', // 7
        '', // 8
        'k4,images/k4.jpg,modern,"a ""quoted"" word"', // 9
        '',
      ].join('\r\n'),
    );
    const result = await readManifest('m.csv', { cwd: tmp.dir });
    expect(result.rows).toBe(4);
    expect(result.warnings).toEqual([]);
    expect(summary(result.items)).toEqual([
      'k1__modern@2',
      'k2__rustic@4',
      'k3__modern@6',
      'k3__rustic@6',
      'k4__modern@9',
    ]);
    const [k1, k2, k3] = result.items;
    // The BOM must not leak into the first header: the id column is read.
    expect(k1).toMatchObject({
      id: 'k1__modern',
      image: 'images/k1.jpg',
      imagePath: path.join(tmp.dir, 'images', 'k1.jpg'),
      module: 'change-style',
      style: 'modern',
      prompt: 'bright, airy',
      source: { file: 'm.csv', line: 2 },
    });
    expect(k1?.rejection).toBeUndefined();
    expect(k2?.prompt).toBe('line one\r\nline two');
    expect(k3?.prompt).toBeUndefined();
    expect(result.items[4]?.prompt).toBe('a "quoted" word');
  });

  it('keeps line numbers right over many quoted CRLF newlines and stream chunk boundaries', async () => {
    // ~150 KB: several read-stream chunks, each row spanning three lines.
    const rows = 3000;
    const lines = ['image,style,prompt'];
    for (let i = 0; i < rows; i++)
      lines.push(`img${i}.jpg,modern,"first\r\nsecond\r\nthird ${'x'.repeat(20)}"`);
    await tmp.write('big.csv', `${lines.join('\r\n')}\r\n`);
    const result = await readManifest('big.csv', { cwd: tmp.dir });
    expect(result.rows).toBe(rows);
    result.items.forEach((item, i) => {
      expect(item.source.line).toBe(2 + 3 * i);
    });
  });

  it('treats empty cells as absent: module defaults to change-style, id to the file name', async () => {
    await tmp.write('sub/m.csv', 'image,module,style,id\n./pics/a b.jpg,,modern,\n');
    const { items } = await readManifest('sub/m.csv', { cwd: tmp.dir });
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ id: 'a-b__modern', module: 'change-style', image: 'pics/a b.jpg' });
    expect(items[0]?.imagePath).toBe(path.join(tmp.dir, 'sub', 'pics', 'a b.jpg'));
  });

  it('reads the configuration cell as JSON for kitchen-configurator', async () => {
    await tmp.write(
      'm.csv',
      [
        'id,image,module,configuration',
        'c1,c1.png,kitchen-configurator,"{""door_style"":""shaker"",""units"":[1,2]}"',
        'c2,c2.png,kitchen-configurator,',
      ].join('\n'),
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => i.id)).toEqual(['c1', 'c2']);
    expect(items[0]?.configuration).toEqual({ door_style: 'shaker', units: [1, 2] });
    expect(items[0]?.style).toBeUndefined();
    expect(items[1]?.configuration).toBeUndefined();
    expect(items.every((i) => i.rejection === undefined)).toBe(true);
  });

  it('rejects a configuration cell that is not valid JSON, with the parser position', async () => {
    await tmp.write(
      'm.csv',
      'id,image,module,configuration\nc1,c1.png,kitchen-configurator,"{""door_style"": shaker}"\nc2,c2.png,kitchen-configurator,"[1,2]"\n',
    );
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items[0]?.rejection?.code).toBe('invalid_configuration');
    expect(items[0]?.rejection?.message).toMatch(/^configuration is not valid JSON: .* at line 1 column 16$/);
    expect(items[1]?.rejection).toEqual({
      code: 'invalid_configuration',
      message: 'configuration is not a JSON object (got an array)',
    });
  });

  it('warns about unknown and unnamed columns but reads the rows', async () => {
    await tmp.write('m.csv', 'image,style,colour,\na.jpg,modern,red,x\n');
    const result = await readManifest('m.csv', { cwd: tmp.dir });
    expect(result.items.map((i) => i.id)).toEqual(['a__modern']);
    expect(result.warnings).toHaveLength(2);
    expect(result.warnings[0]).toMatch(/^m\.csv:1: unknown column "colour" is ignored/);
    expect(result.warnings[1]).toMatch(/^m\.csv:1: column 4 has no name/);
  });

  it('matches header names case-insensitively', async () => {
    await tmp.write('m.csv', 'Image, Style \na.jpg,modern\n');
    const { items } = await readManifest('m.csv', { cwd: tmp.dir });
    expect(items.map((i) => i.id)).toEqual(['a__modern']);
  });

  it('reads a header-only file as zero rows with a warning', async () => {
    await tmp.write('m.csv', 'image,style\r\n\r\n');
    const result = await readManifest('m.csv', { cwd: tmp.dir });
    expect(result.rows).toBe(0);
    expect(result.items).toEqual([]);
    expect(result.warnings).toEqual(['m.csv: the manifest has no rows; nothing to do']);
  });
});

describe('CSV manifest: errors name the line (exit 2)', () => {
  it('a quote never closed: the line the row starts on', async () => {
    await tmp.write(
      'm.csv',
      'image,style,prompt\r\na.jpg,modern,"ok\r\nstill ok"\r\n\r\nb.jpg,modern,"never closed\r\nc.jpg,x,y\r\n',
    );
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:5: bad CSV quoting: a quoted field .* never closed/);
    expect(error.position).toEqual({ file: 'm.csv', line: 5 });
    expect(exitCodeFor(error)).toBe(2);
  });

  it('a quote inside an unquoted value (INVALID_OPENING_QUOTE) names line and field', async () => {
    // The quoted CRLF before it is in the same stream chunk: csv-parse counts it as two lines.
    await tmp.write('m.csv', 'image,style,prompt\r\na.jpg,modern,"x\r\ny"\r\nb.jpg,mod"ern",z\r\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:4: bad CSV quoting: .* in field 2 \(style\)/);
  });

  it('text after a closing quote names the line', async () => {
    await tmp.write('m.csv', 'image,style\n"a.jpg"x,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:2: bad CSV quoting: text follows a closing/);
  });

  it('a row with a missing or extra field names its first line', async () => {
    await tmp.write('m.csv', 'image,style,prompt\r\na.jpg,modern,"two\r\nlines"\r\nb.jpg,modern\r\n');
    let error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:4: the row has 2 fields, the header has 3/);

    await tmp.write('m2.csv', 'image,style\na.jpg,modern\nb.jpg,modern,extra\n');
    error = await manifestError(readManifest('m2.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m2\.csv:3: the row has 3 fields, the header has 2/);
  });

  it('no image column', async () => {
    await tmp.write('m.csv', '\n\nid,style\nk1,modern\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toBe(
      'm.csv:3: the header has no "image" column (accepted: "image", "image_url", "image_link")',
    );
  });

  it('a duplicate header name, which csv-parse would silently collapse', async () => {
    await tmp.write('m.csv', 'image,style,Image\na.jpg,modern,b.jpg\n');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toBe('m.csv:1: duplicate column "image" in the header (columns 1 and 3)');
  });

  it('an empty file', async () => {
    await tmp.write('m.csv', '');
    const error = await manifestError(readManifest('m.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.csv:1: the CSV file is empty/);
  });

  it('a missing manifest file or an unsupported extension', async () => {
    let error = await manifestError(readManifest('nope.csv', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^nope\.csv: cannot read the manifest: .*ENOENT/);
    await tmp.write('m.txt', 'image\na.jpg\n');
    error = await manifestError(readManifest('m.txt', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.txt: unsupported manifest type "\.txt"/);
  });
});
