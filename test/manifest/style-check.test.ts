import { describe, expect, it } from 'vitest';
import { checkStyle, suggestStyles } from '../../src/manifest/index.js';
import type { Item } from '../../src/types.js';

const KEYS = ['scandinavian', 'modern', 'mid-century', 'industrial', 'rustic', 'japandi', 'modern-farmhouse'];

const item = (over: Partial<Item> = {}): Item => ({
  id: 'k1__scandi',
  image: 'k1.jpg',
  imagePath: '/tmp/k1.jpg',
  module: 'change-style',
  style: 'scandi',
  source: { file: 'm.csv', line: 2 },
  ...over,
});

describe('suggestStyles', () => {
  it('puts case/separator-equal keys first, then prefixes, then near misses', () => {
    expect(suggestStyles('Mid Century', KEYS)).toEqual(['mid-century']);
    expect(suggestStyles('scandi', KEYS)).toEqual(['scandinavian']);
    expect(suggestStyles('modren', KEYS)).toEqual(['modern']);
    expect(suggestStyles('modern', KEYS)).toEqual(['modern', 'modern-farmhouse']);
    expect(suggestStyles('industriel', KEYS)).toEqual(['industrial']);
  });

  it('gives nothing for an unrelated word, and honours max', () => {
    expect(suggestStyles('baroque', KEYS)).toEqual([]);
    expect(suggestStyles('', KEYS)).toEqual([]);
    expect(suggestStyles('m', ['ma', 'mb', 'mc', 'md'], 2)).toEqual(['ma', 'mb']);
  });
});

describe('checkStyle', () => {
  const valid = new Set(KEYS);

  it('rejects an unknown style with a suggestion', () => {
    const checked = checkStyle(item(), valid);
    expect(checked.rejection).toEqual({
      code: 'unknown_style',
      message: 'style "scandi" is not offered by the service; did you mean "scandinavian"?',
    });
    expect(checked).not.toBe(item());
  });

  it('offers several suggestions in words, or lists keys when nothing is close', () => {
    expect(checkStyle(item({ style: 'modrn' }), new Set(['modern', 'modena'])).rejection?.message).toBe(
      'style "modrn" is not offered by the service; did you mean "modern" or "modena"?',
    );
    expect(checkStyle(item({ style: 'baroque' }), valid).rejection?.message).toBe(
      'style "baroque" is not offered by the service (offered: industrial, japandi, mid-century, modern, modern-farmhouse, rustic, scandinavian)',
    );
  });

  it('leaves the item alone when the style is valid, the list is unknown, or it does not apply', () => {
    const ok = item({ style: 'modern' });
    expect(checkStyle(ok, valid)).toBe(ok);
    const unknownList = item();
    expect(checkStyle(unknownList, null)).toBe(unknownList);
    const configurator = item({ module: 'kitchen-configurator' });
    delete configurator.style;
    expect(checkStyle(configurator, valid)).toBe(configurator);
    const rejected = item({ rejection: { code: 'file_not_found', message: 'gone' } });
    expect(checkStyle(rejected, valid)).toBe(rejected);
  });

  it('is case-sensitive: the service keys are exact', () => {
    expect(checkStyle(item({ style: 'Modern' }), valid).rejection?.message).toBe(
      'style "Modern" is not offered by the service; did you mean "modern" or "modern-farmhouse"?',
    );
  });
});
