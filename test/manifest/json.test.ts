import { describe, expect, it } from 'vitest';
import { readManifest } from '../../src/manifest/index.js';
import { describeJsonError, lineColumnAt, locateItems } from '../../src/manifest/json-text.js';
import { useTempDir } from '../helpers/tmp.js';
import { manifestError } from './helpers.js';

const tmp = useTempDir('kb-manifest-');

describe('JSON manifest', () => {
  it('reads an array, one item per style, with each item line', async () => {
    await tmp.write(
      'm.json',
      `[
  {"image": "images/k1.jpg", "style": ["modern", "rustic"]},

  {
    "id": "k2", "image": "images/k2.jpg",
    "style": "japandi|industrial", "prompt": "keep the window"
  },
  {"image": "c1.png", "module": "kitchen-configurator", "configuration": {"door_style": "shaker"}}
]
`,
    );
    const { items, rows, warnings } = await readManifest('m.json', { cwd: tmp.dir });
    expect(rows).toBe(3);
    expect(warnings).toEqual([]);
    expect(items.map((i) => `${i.id}@${i.source.line}`)).toEqual([
      'k1__modern@2',
      'k1__rustic@2',
      'k2__japandi@4',
      'k2__industrial@4',
      'c1@8',
    ]);
    expect(items[2]?.prompt).toBe('keep the window');
    expect(items[4]).toMatchObject({
      module: 'kitchen-configurator',
      configuration: { door_style: 'shaker' },
    });
    expect(items[4]?.style).toBeUndefined();
  });

  it('applies defaults to items that do not set the field; an item value or null overrides', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify(
        {
          defaults: { style: 'modern', prompt: 'bright' },
          items: [
            { image: 'a.jpg' },
            { image: 'b.jpg', style: ['rustic', 'modern'] },
            { image: 'c.jpg', prompt: null },
          ],
        },
        null,
        2,
      ),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.style, i.prompt, i.source.line])).toEqual([
      ['a__modern', 'modern', 'bright', 7],
      ['b__rustic', 'rustic', 'bright', 10],
      ['b__modern', 'modern', 'bright', 10],
      ['c__modern', 'modern', undefined, 17],
    ]);
  });

  it('a defaults module applies too, and wrong-module fields are rejected per item', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify({
        defaults: { module: 'kitchen-configurator' },
        items: [
          { image: 'a.png' },
          { image: 'b.png', prompt: 'nice' },
          { image: 'c.jpg', module: 'change-style' },
        ],
      }),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.module, i.rejection?.code])).toEqual([
      ['a', 'kitchen-configurator', undefined],
      ['b', 'kitchen-configurator', 'invalid_item'],
      ['c', 'change-style', 'invalid_item'],
    ]);
    expect(items[1]?.rejection?.message).toMatch(/prompt is for module change-style only/);
    expect(items[2]?.rejection?.message).toBe('style is missing; module change-style needs a style key');
  });

  it('a default applies only to the items whose module takes it: a mixed manifest with a default style', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify({
        defaults: { style: 'modern', prompt: 'bright', configuration: { door_style: 'shaker' } },
        items: [
          { image: 'a.jpg' },
          { image: 'c.png', module: 'kitchen-configurator' },
          { image: 'd.png', module: 'kitchen-configurator', configuration: { door_style: 'slab' } },
        ],
      }),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => [i.id, i.module, i.style, i.prompt, i.configuration, i.rejection])).toEqual([
      ['a__modern', 'change-style', 'modern', 'bright', undefined, undefined],
      ['c', 'kitchen-configurator', undefined, undefined, { door_style: 'shaker' }, undefined],
      ['d', 'kitchen-configurator', undefined, undefined, { door_style: 'slab' }, undefined],
    ]);
  });

  it('a rejection caused by a default says the value came from "defaults"', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify({
        defaults: { module: 'kitchen-configurator', prompt: 42 },
        items: [
          { image: 'a.png', style: 'modern' },
          { image: 'b.jpg', module: 'change-style', style: 'modern' },
        ],
      }),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    expect(items.map((i) => i.rejection?.message)).toEqual([
      'style is for module change-style only; kitchen-configurator takes no style; the module came from "defaults"',
      'prompt must be text (got a number); the prompt came from "defaults"',
    ]);
  });

  it('rejects wrong types per item (invalid_item / invalid_configuration) and goes on', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify([
        { image: 'a.jpg', style: 5 },
        { image: 'b.jpg', style: ['modern', 7] },
        { image: 'c.png', module: 'kitchen-configurator', configuration: [1, 2] },
        { image: 'd.png', module: 'kitchen-configurator', configuration: '{"a": }' },
        { image: 'e.jpg', style: 'modern', configuration: { a: 1 } },
        { image: 'f.jpg', module: 'paint-walls', style: 'modern' },
        { image: 42, style: 'modern' },
        { id: 'noimg', style: 'modern' },
        { image: 'g.jpg', style: 'modern' },
      ]),
    );
    const { items } = await readManifest('m.json', { cwd: tmp.dir });
    const brief = items.map((i) => [i.id, i.rejection?.code ?? 'ok', i.rejection?.message ?? '']);
    expect(brief).toEqual([
      ['a', 'invalid_item', 'style must be a style key or a list of keys (got a number)'],
      ['b', 'invalid_item', 'style must be a style key or a list of keys (entry 2 is a number)'],
      ['c', 'invalid_configuration', 'configuration is not a JSON object (got an array)'],
      [
        'd',
        'invalid_configuration',
        expect.stringMatching(/^configuration is not valid JSON: .* at line 1 column 7$/),
      ],
      [
        'e__modern',
        'invalid_item',
        'configuration is for module kitchen-configurator only; change-style takes no configuration',
      ],
      [
        'f__modern',
        'invalid_item',
        'module "paint-walls" is unknown; use one of change-style, kitchen-configurator',
      ],
      ['line-1__modern', 'invalid_item', 'image must be a path or glob (got a number)'],
      ['noimg__modern', 'invalid_item', 'image is missing'],
      ['g__modern', 'ok', ''],
    ]);
    expect(items[7]).toMatchObject({ image: '', imagePath: '' });
  });

  it('bad JSON names line and column from the parser position', async () => {
    await tmp.write(
      'm.json',
      '[\n  {"image": "a.jpg", "style": "modern"},\n  {"image": "b.jpg",, "style": "x"}\n]\n',
    );
    const error = await manifestError(readManifest('m.json', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.json:3:21: not valid JSON: /);
    expect(error.position).toEqual({ file: 'm.json', line: 3, column: 21 });
  });

  it('bad JSON whose V8 message carries no position still gets one (strict scan)', async () => {
    await tmp.write('m.json', `[\n  {"image": "a.jpg", "style": "${'m'.repeat(60)}"},\n  x\n]`);
    const error = await manifestError(readManifest('m.json', { cwd: tmp.dir }));
    expect(error.message).toBe("m.json:3:3: not valid JSON: Unexpected token 'x'");
    // V8's echo of the input is dropped from the message.
    expect(error.message).not.toMatch(/is not valid JSON/);
  });

  it('truncated JSON points at the end', async () => {
    await tmp.write('m.json', '[\n  {"image": "a.jpg"');
    const error = await manifestError(readManifest('m.json', { cwd: tmp.dir }));
    expect(error.position.line).toBe(2);
  });

  it('a document of the wrong shape or an item that is not an object is a manifest error', async () => {
    await tmp.write('a.json', '{"rows": []}');
    let error = await manifestError(readManifest('a.json', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^a\.json:1: expected an array of items or/);
    await tmp.write('b.json', '[\n  {"image": "a.jpg", "style": "m"},\n  "b.jpg"\n]');
    error = await manifestError(readManifest('b.json', { cwd: tmp.dir }));
    expect(error.message).toBe(
      'b.json:3: item 2 is a string; every item must be an object like {"image": "..."}',
    );
  });

  it('warns once about an unknown field', async () => {
    await tmp.write(
      'm.json',
      JSON.stringify([
        { image: 'a.jpg', style: 'm', colour: 'red' },
        { image: 'b.jpg', style: 'm', colour: 'blue' },
      ]),
    );
    const { warnings } = await readManifest('m.json', { cwd: tmp.dir });
    expect(warnings).toEqual([
      'm.json:1: unknown field "colour" is ignored (known: image, module, style, prompt, configuration, id)',
    ]);
  });
});

describe('JSONL manifest', () => {
  it('reads one item per line, skipping blank lines, with CRLF and a BOM', async () => {
    await tmp.write(
      'm.jsonl',
      '\uFEFF{"image": "a.jpg", "style": "modern"}\r\n\r\n   \r\n{"image": "b.png", "module": "kitchen-configurator", "configuration": "{\\"units\\": 3}"}\r\n',
    );
    const { items, rows } = await readManifest('m.jsonl', { cwd: tmp.dir });
    expect(rows).toBe(2);
    expect(items.map((i) => `${i.id}@${i.source.line}`)).toEqual(['a__modern@1', 'b@4']);
    expect(items[1]?.configuration).toEqual({ units: 3 });
  });

  it('.ndjson is the same format', async () => {
    await tmp.write('m.ndjson', '{"image": "a.jpg", "style": "modern"}\n');
    const { items } = await readManifest('m.ndjson', { cwd: tmp.dir });
    expect(items.map((i) => i.id)).toEqual(['a__modern']);
  });

  it('a bad line is a manifest error naming that line and column', async () => {
    await tmp.write(
      'm.jsonl',
      '{"image": "a.jpg", "style": "m"}\n\n{"image": "b.jpg" "style": "m"}\n{"image": "c.jpg"}\n',
    );
    const error = await manifestError(readManifest('m.jsonl', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.jsonl:3:19: not valid JSON: /);
  });

  it('a line that is JSON but not an object is a manifest error', async () => {
    await tmp.write('m.jsonl', '{"image": "a.jpg", "style": "m"}\n["b.jpg"]\n');
    const error = await manifestError(readManifest('m.jsonl', { cwd: tmp.dir }));
    expect(error.message).toMatch(/^m\.jsonl:2: the line is an array/);
  });
});

describe('json-text helpers', () => {
  it('lineColumnAt counts CRLF as one line break', () => {
    expect(lineColumnAt('ab\r\ncd\nef', 8)).toEqual({ line: 3, column: 2 });
    expect(lineColumnAt('ab\r\ncd', 4)).toEqual({ line: 2, column: 1 });
  });

  it('locateItems finds element starts of the array or of the last "items" key', () => {
    expect(locateItems('[1, {"a": [2, 3]}, "x]"]')).toEqual([1, 4, 19]);
    expect(locateItems('{"items": [1], "defaults": {"items": [9]}, "items": [ 2 , 3]}')).toEqual([54, 58]);
    expect(locateItems('{"it\\u0065ms": [true]}')).toEqual([16]);
    expect(locateItems('"nope"')).toEqual([]);
  });

  it('describeJsonError strips the echoed input and keeps the position', () => {
    const text = '{"secret": "sk_live_x", oops}';
    let problem: ReturnType<typeof describeJsonError> | undefined;
    try {
      JSON.parse(text);
    } catch (error) {
      problem = describeJsonError(text, error);
    }
    expect(problem?.message).not.toContain('sk_live_x');
    expect(problem?.offset).toBe(24);
    expect(problem?.position).toEqual({ line: 1, column: 25 });
  });
});
