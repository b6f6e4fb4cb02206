import { describe, expect, it } from 'vitest';
import { httpError, protocolError, transportError } from '../../src/api/errors.js';
import { backoffDelay, isRetryable, MAX_RETRY_AFTER_MS, retryDelay } from '../../src/api/policy.js';

const POST = { method: 'POST', path: '/v1/modules/change-style' };
const GET = { method: 'GET', path: '/v1/jobs/job_1' };
const noBody = { code: null, message: null };

describe('backoffDelay', () => {
  it('is full jitter: uniform in [0, min(cap, base·2^attempt)], floored at 50 ms', () => {
    const top = () => 0.999_999;
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(a, { random: top }))).toEqual([
      500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000,
    ]);
    expect(backoffDelay(3, { random: () => 0.5 })).toBe(2000);
    expect(backoffDelay(3, { random: () => 0.25, baseMs: 100, capMs: 1000 })).toBe(200);
    expect(backoffDelay(10, { random: top, baseMs: 100, capMs: 1000 })).toBe(1000);
    // Never a 0 ms busy loop, even when the random source says 0.
    expect(backoffDelay(0, { random: () => 0 })).toBe(50);
  });

  it('stays within bounds for many draws and for absurd attempt numbers', () => {
    let seed = 1;
    const random = () => {
      seed = (seed * 16807) % 2147483647;
      return (seed - 1) / 2147483646;
    };
    for (let attempt = 0; attempt < 40; attempt++) {
      const ceiling = Math.min(30_000, 500 * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const ms = backoffDelay(attempt, { random });
        expect(ms).toBeGreaterThanOrEqual(50);
        expect(ms).toBeLessThanOrEqual(ceiling);
      }
    }
    expect(backoffDelay(10_000, { random: () => 0.999 })).toBe(29_970);
    expect(Number.isFinite(backoffDelay(Number.MAX_SAFE_INTEGER))).toBe(true);
  });

  it('spreads: draws at one attempt are not all equal', () => {
    const draws = new Set(Array.from({ length: 50 }, () => backoffDelay(6)));
    expect(draws.size).toBeGreaterThan(10);
  });
});

describe('isRetryable', () => {
  const cases: Array<[string, () => unknown, { submit: boolean; poll: boolean }]> = [
    ['429', () => httpError(POST, 429, noBody, 1000), { submit: true, poll: true }],
    ['503', () => httpError(POST, 503, noBody, undefined), { submit: true, poll: true }],
    ['500', () => httpError(POST, 500, noBody, undefined), { submit: false, poll: true }],
    ['502', () => httpError(POST, 502, noBody, undefined), { submit: false, poll: true }],
    ['504', () => httpError(POST, 504, noBody, undefined), { submit: false, poll: true }],
    [
      'ECONNREFUSED',
      () => transportError(POST, 'ECONNREFUSED', undefined, null),
      { submit: true, poll: true },
    ],
    ['ENOTFOUND', () => transportError(POST, 'ENOTFOUND', undefined, null), { submit: true, poll: true }],
    ['EAI_AGAIN', () => transportError(POST, 'EAI_AGAIN', undefined, null), { submit: true, poll: true }],
    [
      'connect timeout',
      () => transportError(POST, 'ETIMEDOUT', 'connect', null),
      { submit: true, poll: true },
    ],
    ['ECONNRESET', () => transportError(POST, 'ECONNRESET', undefined, null), { submit: false, poll: true }],
    [
      'request timeout',
      () => transportError(POST, 'ETIMEDOUT', 'request', null),
      { submit: false, poll: true },
    ],
    ['EPIPE', () => transportError(POST, 'EPIPE', undefined, null), { submit: false, poll: true }],
    [
      'unknown transport',
      () => transportError(POST, undefined, undefined, null),
      { submit: false, poll: true },
    ],
    ['malformed body', () => protocolError(POST, 'not JSON', 200), { submit: false, poll: true }],
    ...[400, 401, 403, 404, 410, 413, 415, 422].map(
      (status): [string, () => unknown, { submit: boolean; poll: boolean }] => [
        String(status),
        () => httpError(POST, status, noBody, undefined),
        { submit: false, poll: false },
      ],
    ),
    ['a plain Error', () => new Error('boom'), { submit: false, poll: false }],
    ['a string', () => 'boom', { submit: false, poll: false }],
  ];

  it.each(cases)('%s', (_name, make, expected) => {
    const error = make();
    expect(isRetryable(error, 'submit')).toBe(expected.submit);
    for (const kind of ['poll', 'download', 'styles'] as const)
      expect(isRetryable(error, kind)).toBe(expected.poll);
  });

  it('an abort of our own (not an ApiError) is never retried', () => {
    const reason = new DOMException('aborted', 'AbortError');
    expect(isRetryable(reason, 'poll')).toBe(false);
  });
});

describe('retryDelay', () => {
  it('uses the service’s Retry-After when it has one', () => {
    expect(retryDelay(httpError(GET, 429, noBody, 4000), 0)).toEqual({ ms: 4000, capped: false });
    expect(retryDelay(httpError(GET, 503, noBody, 1500), 5)).toEqual({ ms: 1500, capped: false });
  });

  it('caps an absurd Retry-After and says so', () => {
    expect(MAX_RETRY_AFTER_MS).toBe(15 * 60_000);
    expect(retryDelay(httpError(GET, 429, noBody, 86_400_000), 0)).toEqual({
      ms: MAX_RETRY_AFTER_MS,
      capped: true,
    });
    expect(retryDelay(httpError(GET, 429, noBody, MAX_RETRY_AFTER_MS), 0)).toEqual({
      ms: MAX_RETRY_AFTER_MS,
      capped: false,
    });
  });

  it('falls back to jittered backoff without Retry-After, and for non-API errors', () => {
    const random = () => 0.5;
    expect(retryDelay(httpError(GET, 429, noBody, undefined), 2, { random })).toEqual({
      ms: 1000,
      capped: false,
    });
    expect(retryDelay(transportError(GET, 'ECONNRESET', undefined, null), 0, { random })).toEqual({
      ms: 250,
      capped: false,
    });
    expect(retryDelay(new Error('x'), 1, { random: () => 0 })).toEqual({ ms: 50, capped: false });
  });
});

describe('ApiError classification', () => {
  it('sets transient, auth, rateLimited and mayHaveCreatedJob from the status alone', () => {
    const e401 = httpError(POST, 401, { code: 'unauthorized', message: 'bad key' }, undefined);
    expect(e401).toMatchObject({
      auth: true,
      transient: false,
      mayHaveCreatedJob: false,
      code: 'unauthorized',
    });
    expect(e401.message).toBe('POST /v1/modules/change-style: HTTP 401 unauthorized: bad key');
    expect(httpError(POST, 403, noBody, undefined)).toMatchObject({ auth: true, transient: false });
    expect(httpError(POST, 429, noBody, undefined)).toMatchObject({
      rateLimited: true,
      transient: true,
      auth: false,
    });
    expect(httpError(POST, 501, noBody, undefined)).toMatchObject({
      transient: true,
      mayHaveCreatedJob: true,
    });
    expect(httpError(POST, 418, noBody, undefined)).toMatchObject({ transient: false, code: 'http_418' });
    expect(httpError(POST, 500, noBody, undefined).message).toContain('no error message in the response');
  });
});
