import { afterEach, describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/util/retry-after.js';

const SERVER_NOW = Date.parse('Wed, 21 Oct 2015 07:28:00 GMT');
/** A local clock two hours ahead of the server (docs/faults.md J.44). */
const SKEWED_LOCAL = SERVER_NOW + 2 * 3600_000;
const DATE = 'Wed, 21 Oct 2015 07:28:00 GMT';

describe('parseRetryAfter', () => {
  const tz = process.env.TZ;
  afterEach(() => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  });

  it('reads delta-seconds', () => {
    expect(parseRetryAfter({ 'retry-after': '1' })).toBe(1000);
    expect(parseRetryAfter({ 'retry-after': '120' })).toBe(120_000);
    expect(parseRetryAfter({ 'retry-after': ' 3 ' })).toBe(3000);
    expect(parseRetryAfter({ 'retry-after': '1.5' })).toBe(1500);
    expect(parseRetryAfter({ 'retry-after': ['7', '9'] })).toBe(7000);
  });

  it('reads an HTTP-date against the response Date header, not the local clock', () => {
    const headers = { 'retry-after': 'Wed, 21 Oct 2015 07:28:30 GMT', date: DATE };
    expect(parseRetryAfter(headers, SKEWED_LOCAL)).toBe(30_000);
    expect(parseRetryAfter(headers, SERVER_NOW - 3600_000)).toBe(30_000);
  });

  it('reads the obsolete RFC 850 and asctime forms, asctime as GMT whatever the local zone', () => {
    process.env.TZ = 'America/New_York';
    expect(parseRetryAfter({ 'retry-after': 'Wednesday, 21-Oct-15 07:28:30 GMT', date: DATE })).toBe(30_000);
    expect(parseRetryAfter({ 'retry-after': 'Wed Oct 21 07:28:30 2015', date: DATE })).toBe(30_000);
    process.env.TZ = 'Asia/Tokyo';
    expect(parseRetryAfter({ 'retry-after': 'Wed Oct 21 07:28:30 2015', date: DATE })).toBe(30_000);
  });

  it('falls back to the local clock when the Date header is absent or unreadable', () => {
    const at = 'Wed, 21 Oct 2015 07:28:10 GMT';
    expect(parseRetryAfter({ 'retry-after': at }, SERVER_NOW)).toBe(10_000);
    expect(parseRetryAfter({ 'retry-after': at, date: 'yesterday' }, SERVER_NOW)).toBe(10_000);
  });

  it('prefers retry-after-ms, and ignores a bad retry-after-ms', () => {
    expect(parseRetryAfter({ 'retry-after-ms': '250', 'retry-after': '5' })).toBe(250);
    expect(parseRetryAfter({ 'retry-after-ms': '12.5' })).toBe(12.5);
    expect(parseRetryAfter({ 'retry-after-ms': 'soon', 'retry-after': '5' })).toBe(5000);
    expect(parseRetryAfter({ 'retry-after-ms': '0', 'retry-after': '5' })).toBe(5000);
    expect(parseRetryAfter({ 'retry-after-ms': '-100', 'retry-after': '5' })).toBe(5000);
  });

  it('returns undefined for anything unusable, so the caller backs off instead of looping at 0 ms', () => {
    const unusable = [
      undefined,
      '',
      '   ',
      'soon',
      '-5',
      '0',
      '0.0',
      '+5',
      '1e3',
      'Infinity',
      'NaN',
      // V8's Date.parse reads these as dates in 2099; they are not HTTP-dates.
      'abc 2099',
      'Dec 2099',
      '2099-01-01T00:00:00Z',
      // A date in the past, and one equal to the server's now.
      'Wed, 21 Oct 2015 07:27:00 GMT',
      DATE,
      'Wed, 32 Oct 2015 07:28:30 GMT',
    ];
    for (const value of unusable) {
      const headers = value === undefined ? { date: DATE } : { 'retry-after': value, date: DATE };
      expect(parseRetryAfter(headers, SKEWED_LOCAL), JSON.stringify(value)).toBeUndefined();
    }
    expect(parseRetryAfter({})).toBeUndefined();
  });

  it('does not cap a huge value: the caller caps and logs it', () => {
    expect(parseRetryAfter({ 'retry-after': '86400' })).toBe(86_400_000);
  });
});
