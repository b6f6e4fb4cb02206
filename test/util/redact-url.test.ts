import { describe, expect, it } from 'vitest';
import { redactUrl, redactUrlsInText } from '../../src/util/redact-url.js';

describe('redactUrl', () => {
  it('hides the values of an S3 pre-signed URL, keeps Expires and the rest byte for byte', () => {
    const url =
      'https://bucket.s3.eu-west-1.amazonaws.com/k%20itchens/a+b.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
      '&X-Amz-Credential=AKIAEXAMPLE%2F20261126%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20261126T160000Z' +
      '&X-Amz-Expires=900&X-Amz-Security-Token=FQoGZXIvYXdzEXAMPLE&X-Amz-SignedHeaders=host' +
      '&X-Amz-Signature=0123456789abcdef';
    expect(redactUrl(url)).toBe(
      'https://bucket.s3.eu-west-1.amazonaws.com/k%20itchens/a+b.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
        '&X-Amz-Credential=***&X-Amz-Date=20261126T160000Z&X-Amz-Expires=900&X-Amz-Security-Token=***' +
        '&X-Amz-SignedHeaders=host&X-Amz-Signature=***',
    );
  });

  it('compares names case-insensitively and covers Signature, sig, token, key; Expires stays', () => {
    expect(redactUrl('http://cdn.example/a.jpg?Expires=1700000000&Signature=abc~def&Key-Pair-Id=K1')).toBe(
      'http://cdn.example/a.jpg?Expires=1700000000&Signature=***&Key-Pair-Id=K1',
    );
    expect(redactUrl('https://x.blob.core.windows.net/c/a.png?sv=2022&SIG=zzz&TOKEN=t&KEY=k&keep=1')).toBe(
      'https://x.blob.core.windows.net/c/a.png?sv=2022&SIG=***&TOKEN=***&KEY=***&keep=1',
    );
    expect(redactUrl('https://x/a?x-amz-signature=1&x%2Damz%2Dsignature=2')).toBe(
      'https://x/a?x-amz-signature=***&x%2Damz%2Dsignature=***',
    );
  });

  it('drops userinfo, even a password holding @ or :', () => {
    expect(redactUrl('https://user:p@ss:w@images.example.com:8443/a.jpg?a=1')).toBe(
      'https://images.example.com:8443/a.jpg?a=1',
    );
    expect(redactUrl('http://token@host/x')).toBe('http://host/x');
    // An @ in the path is not userinfo.
    expect(redactUrl('https://host/users/@me/a.jpg')).toBe('https://host/users/@me/a.jpg');
  });

  it('redacts key=value fragments and leaves plain ones', () => {
    expect(redactUrl('https://h/a.jpg#access_token=abc&x=1')).toBe('https://h/a.jpg#access_token=***&x=1');
    expect(redactUrl('https://h/a.jpg#top')).toBe('https://h/a.jpg#top');
  });

  it('leaves everything that is not an http(s) URL untouched and never throws', () => {
    const odd = [
      's3://bucket/kitchens/a#1?sig=x+y.jpg',
      '/data/kitchens/a?token=1.jpg',
      'kitchens/**/*.jpg',
      '',
      'https://',
      'http://[::1',
      'https://h/a?%E0%A4%A=1&sig=%ZZ',
      'HTTPS://H/A?SIG=1',
    ];
    for (const text of odd) expect(() => redactUrl(text), text).not.toThrow();
    expect(redactUrl(odd[0]!)).toBe(odd[0]);
    expect(redactUrl(odd[1]!)).toBe(odd[1]);
    expect(redactUrl(odd[6]!)).toBe('https://h/a?%E0%A4%A=1&sig=***');
    expect(redactUrl(odd[7]!)).toBe('HTTPS://H/A?SIG=***');
    expect(redactUrl(undefined as unknown as string)).toBeUndefined();
  });
});

describe('redactUrlsInText', () => {
  it('redacts every URL inside a message and keeps the sentence around it', () => {
    const text = 'GET https://u:p@h/a.jpg?sig=abc failed (see "http://h/b?token=t"), then https://h/c?key=k.';
    expect(redactUrlsInText(text)).toBe(
      'GET https://h/a.jpg?sig=*** failed (see "http://h/b?token=***"), then https://h/c?key=***.',
    );
  });

  it('leaves text without http URLs, s3 URIs included, as it was', () => {
    const text = 's3://bucket/a?sig=1#x: NoSuchKey';
    expect(redactUrlsInText(text)).toBe(text);
  });
});
