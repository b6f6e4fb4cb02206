import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { formatS3Ref, globPrefix, isS3Glob, isS3Ref, parseS3Ref } from '../../../src/storage/s3/ref.js';

describe('parseS3Ref', () => {
  it('takes the key verbatim: #, ?, +, %, spaces and unicode are not URL syntax', () => {
    const keys = [
      'a/b#c.jpg',
      'q?x=1&y=2.jpg',
      'a+b c.jpg',
      'p%20q%2F.jpg',
      'küche/ß 1.jpg',
      'a//b/',
      '../x.jpg',
    ];
    for (const key of keys) {
      expect(parseS3Ref(`s3://my-bucket/${key}`)).toEqual({ bucket: 'my-bucket', key });
      expect(formatS3Ref('my-bucket', key)).toBe(`s3://my-bucket/${key}`);
    }
  });

  it('refuses a missing bucket, a missing key, a bad bucket name and another scheme, saying which', () => {
    expect(() => parseS3Ref('s3://')).toThrow(/names no bucket/);
    expect(() => parseS3Ref('s3:///key.jpg')).toThrow(/names no bucket/);
    expect(() => parseS3Ref('s3://bucket')).toThrow(/no object key: expected s3:\/\/bucket\/key/);
    expect(() => parseS3Ref('s3://bucket/')).toThrow(/no object key/);
    expect(() => parseS3Ref('s3://b/k')).toThrow(/"b" is not a bucket name/);
    expect(() => parseS3Ref('s3://bad bucket/k')).toThrow(/not a bucket name/);
    expect(() => parseS3Ref('https://bucket/k')).toThrow(/not an S3 reference/);
    expect(() => parseS3Ref('S3://bucket/k')).toThrow(UsageError);
  });

  it('isS3Ref tells s3:// from paths and URLs', () => {
    expect(isS3Ref('s3://bucket/k')).toBe(true);
    expect(isS3Ref('s3:/bucket/k')).toBe(false);
    expect(isS3Ref('./s3://x')).toBe(false);
    expect(isS3Ref('https://x/y')).toBe(false);
  });
});

describe('isS3Glob and globPrefix', () => {
  it('detects globs as fast-glob does', () => {
    expect(isS3Glob('s3://bucket/kitchens/**/*.jpg')).toBe(true);
    expect(isS3Glob('s3://bucket/k/{a,b}.jpg')).toBe(true);
    expect(isS3Glob('s3://bucket/k/[ab].jpg')).toBe(true);
    expect(isS3Glob('s3://bucket/k/+(a|b).jpg')).toBe(true);
    expect(isS3Glob('s3://bucket/k/a#b+c d.jpg')).toBe(false);
    expect(isS3Glob({ bucket: 'bucket', key: 'plain/key.jpg' })).toBe(false);
  });

  it('gives the literal prefix up to the first glob character', () => {
    expect(globPrefix('kitchens/**/*.jpg')).toBe('kitchens/');
    expect(globPrefix('kitchens/2024/sku1*.jpg')).toBe('kitchens/2024/sku1');
    expect(globPrefix('a b/c#d/e+f*.jpg')).toBe('a b/c#d/e');
    expect(globPrefix('*.jpg')).toBe('');
    expect(globPrefix('**/x.jpg')).toBe('');
    expect(globPrefix('k/{a,b}/x.jpg')).toBe('k/');
    expect(globPrefix('k/x.jpg')).toBe('k/x.jpg');
  });
});
