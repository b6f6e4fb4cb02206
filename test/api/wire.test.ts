import { describe, expect, it } from 'vitest';
import { parseErrorBody, parseJobEnvelope, parseStyles, WireError } from '../../src/api/wire.js';

const base = {
  id: 'job_1',
  module: 'change-style',
  created_at: '2026-01-01T10:00:00.000+01:00',
  updated_at: '2026-01-01T10:00:01.000+01:00',
};

describe('parseJobEnvelope', () => {
  it('reads a queued create response and keeps unknown fields in raw', () => {
    const job = parseJobEnvelope({ job: { ...base, status: 'queued', eta_s: 4 }, links: { self: 'x' } });
    expect(job).toEqual({
      id: 'job_1',
      module: 'change-style',
      status: 'queued',
      createdAt: base.created_at,
      updatedAt: base.updated_at,
      imageUrl: null,
      processingTimeMs: null,
      error: null,
      raw: { ...base, status: 'queued', eta_s: 4 },
    });
  });

  it('reads a succeeded poll with its result URL and processing time', () => {
    const job = parseJobEnvelope(
      {
        job: {
          id: 'job_1',
          status: 'succeeded',
          result: { image_url: 'https://s/x.jpg' },
          processing_time_ms: 1234.4,
        },
      },
      'job_1',
    );
    expect(job).toMatchObject({
      status: 'succeeded',
      imageUrl: 'https://s/x.jpg',
      processingTimeMs: 1234,
      module: null,
    });
  });

  it('keeps a failed job failed even when its error is incomplete', () => {
    expect(
      parseJobEnvelope({ job: { id: 'j', status: 'failed', error: { code: 'nsfw', message: 'no' } } }).error,
    ).toEqual({ code: 'nsfw', message: 'no' });
    const bare = parseJobEnvelope({ job: { id: 'j', status: 'failed' } });
    expect(bare.status).toBe('failed');
    expect(bare.error?.code).toBe('unknown_failure');
    expect(bare.error?.message).toMatch(/without an error message/);
  });

  it('ignores a nonsense processing_time_ms rather than failing the job', () => {
    for (const ptm of [-1, 'fast', Number.NaN, null]) {
      const job = parseJobEnvelope({
        job: { id: 'j', status: 'succeeded', result: { image_url: 'u' }, processing_time_ms: ptm },
      });
      expect(job.processingTimeMs).toBeNull();
    }
  });

  it('accepts a server timestamp in the future (clock skew is not an error)', () => {
    const job = parseJobEnvelope({
      job: { id: 'j', status: 'queued', created_at: '2099-01-01T00:00:00+00:00' },
    });
    expect(job.createdAt).toBe('2099-01-01T00:00:00+00:00');
  });

  it.each([
    [null, /expected a JSON object with "job", got null/],
    [[], /got an array/],
    ['job', /got string/],
    [{}, /no "job" object \(got undefined\)/],
    [{ job: [] }, /no "job" object \(got an array\)/],
    [{ job: { status: 'queued' } }, /job\.id is missing/],
    [{ job: { id: '', status: 'queued' } }, /job\.id is missing/],
    [{ job: { id: 7, status: 'queued' } }, /job\.id is missing/],
    [{ job: { id: 'j' } }, /job j: job\.status is missing/],
    [{ job: { id: 'j', status: 'exploded' } }, /unknown job\.status "exploded"/],
    [{ job: { id: 'j', status: 'SUCCEEDED' } }, /unknown job\.status/],
    [{ job: { id: 'j', status: 'succeeded' } }, /succeeded but job\.result\.image_url is missing/],
    [{ job: { id: 'j', status: 'succeeded', result: { image_url: '' } } }, /image_url is missing/],
    [{ job: { id: 'j', status: 'succeeded', result: 'https://x' } }, /image_url is missing/],
  ])('rejects %j with a WireError saying what is wrong', (body, message) => {
    expect(() => parseJobEnvelope(body)).toThrow(WireError);
    expect(() => parseJobEnvelope(body)).toThrow(message);
  });

  it('rejects a poll answer for another job', () => {
    expect(() => parseJobEnvelope({ job: { id: 'job_2', status: 'queued' } }, 'job_1')).toThrow(
      'asked for job job_1 but the response is for job job_2',
    );
  });

  it('truncates an absurd status in its message', () => {
    expect(() => parseJobEnvelope({ job: { id: 'j', status: 'x'.repeat(500) } })).toThrow(
      new RegExp(`"${'x'.repeat(40)}"`),
    );
  });
});

describe('parseStyles', () => {
  const objects = [
    { key: 'modern', name: 'Modern' },
    { key: 'japandi', name: 'Japandi' },
  ];
  const expected = [
    { key: 'modern', name: 'Modern' },
    { key: 'japandi', name: 'Japandi' },
  ];

  it('reads an array of strings, bare or wrapped', () => {
    const keys = [
      { key: 'modern', name: null },
      { key: 'japandi', name: null },
    ];
    expect(parseStyles(['modern', 'japandi'])).toEqual(keys);
    for (const wrapper of ['styles', 'data', 'items']) {
      expect(parseStyles({ [wrapper]: ['modern', 'japandi'] })).toEqual(keys);
    }
  });

  it('reads arrays of objects keyed key, id or slug, bare or wrapped, with any name field', () => {
    expect(parseStyles(objects)).toEqual(expected);
    for (const wrapper of ['styles', 'data', 'items']) {
      expect(parseStyles({ [wrapper]: objects, total: 2 })).toEqual(expected);
    }
    expect(
      parseStyles([
        { id: 'modern', display_name: 'Modern' },
        { slug: 'japandi', title: 'Japandi' },
      ]),
    ).toEqual(expected);
    expect(parseStyles([{ key: 'modern', label: 'Modern' }, { key: 'japandi' }])).toEqual([
      { key: 'modern', name: 'Modern' },
      { key: 'japandi', name: null },
    ]);
  });

  it('takes the first wrapper that holds an array', () => {
    expect(parseStyles({ styles: 'n/a', data: ['modern'] })).toEqual([{ key: 'modern', name: null }]);
  });

  it.each([
    [null],
    ['modern'],
    [42],
    [{}],
    [{ catalogue: { count: 8 } }],
    [{ styles: { modern: 'Modern' } }],
    [[{ name: 'Modern' }]],
    [[{ key: 7 }]],
    [['modern', 7]],
    [['modern', '']],
    [[['modern']]],
  ])('returns null for %j (shape not understood)', (body) => {
    expect(parseStyles(body)).toBeNull();
  });
});

describe('parseErrorBody', () => {
  it('reads { error: { code, message } } and tolerates the rest', () => {
    expect(parseErrorBody({ error: { code: 'unauthorized', message: 'bad key' } })).toEqual({
      code: 'unauthorized',
      message: 'bad key',
    });
    expect(parseErrorBody({ error: { code: 'x' } })).toEqual({ code: 'x', message: null });
    expect(parseErrorBody({ message: 'plain' })).toEqual({ code: null, message: 'plain' });
    expect(parseErrorBody({ error: 'string' })).toEqual({ code: null, message: null });
    expect(parseErrorBody('<html>')).toEqual({ code: null, message: null });
    expect(parseErrorBody(null)).toEqual({ code: null, message: null });
  });
});
