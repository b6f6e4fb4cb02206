import { describe, expect, it } from 'vitest';
import { httpError, protocolError, transportError } from '../../src/api/errors.js';
import { InterruptedError, ResultDecodeError, ServiceRefusedError, StateError } from '../../src/errors.js';
import {
  type FailureContext,
  failureOutcome,
  JobTimeoutError,
  runError,
  type Stage,
  stylesFailure,
} from '../../src/stages/outcomes.js';
import { StorageError, type StorageErrorCode } from '../../src/storage/types.js';

const POST = { method: 'POST', path: '/v1/modules/change-style' };
const GET = { method: 'GET', path: '/v1/jobs/job_1' };
const body = (code: string | null = null, message: string | null = null) => ({ code, message });
const ctx = (over: Partial<FailureContext> = {}): FailureContext => ({
  stopping: false,
  unreachable: false,
  baseUrl: 'http://service.test',
  resultsDir: '/out/results',
  jobId: 'job_1',
  ...over,
});
const disk = (code: string) =>
  Object.assign(new Error(`${code}: write`), { code, syscall: 'write', path: '/out/x' });

describe('the outcome table: error → item outcome or run stop', () => {
  it('submit: 4xx refuses the item with the service words; 429/503/refused connection are service_unavailable; 5xx/reset are submit_unknown', () => {
    expect(
      failureOutcome('submit', httpError(POST, 422, body('not_a_kitchen', 'a bathroom'), undefined), ctx()),
    ).toEqual({
      kind: 'refused',
      error: { code: 'not_a_kitchen', message: 'a bathroom' },
    });
    expect(failureOutcome('submit', httpError(POST, 413, body(), undefined), ctx())).toMatchObject({
      kind: 'refused',
      error: { code: 'payload_too_large' },
    });
    for (const error of [
      httpError(POST, 429, body(), 1000),
      httpError(POST, 503, body(), undefined),
      transportError(POST, 'ECONNREFUSED', undefined, null),
    ]) {
      expect(failureOutcome('submit', error, ctx())).toMatchObject({
        kind: 'incomplete',
        error: { code: 'service_unavailable' },
      });
    }
    for (const error of [
      httpError(POST, 500, body(), undefined),
      httpError(POST, 504, body(), undefined),
      transportError(POST, 'ECONNRESET', undefined, null),
      transportError(POST, undefined, 'request', null),
    ]) {
      const outcome = failureOutcome('submit', error, ctx());
      expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'submit_unknown' } });
      expect(outcome).not.toHaveProperty('fatal');
    }
  });

  it('poll: 404/410 are job_not_found; anything else that outlived the retries is poll_failed', () => {
    for (const status of [404, 410]) {
      expect(failureOutcome('poll', httpError(GET, status, body(), undefined), ctx())).toMatchObject({
        kind: 'incomplete',
        error: { code: 'job_not_found', message: expect.stringContaining('job_1') },
      });
    }
    expect(failureOutcome('poll', protocolError(GET, 'job.status "exploded"'), ctx())).toMatchObject({
      kind: 'incomplete',
      error: { code: 'poll_failed' },
    });
    expect(failureOutcome('poll', new JobTimeoutError('job_1', 60_000), ctx())).toMatchObject({
      kind: 'incomplete',
      error: { code: 'job_timeout', message: expect.stringContaining('60 s') },
    });
  });

  it('download: storage errors (403 included: the storage takes no key) and bad bytes are download_failed; our disk is fatal', () => {
    for (const error of [
      httpError(GET, 403, body(), undefined),
      httpError(GET, 410, body(), undefined),
      new ResultDecodeError('result image does not decode'),
      new Error('EXDEV: rename'),
    ]) {
      expect(failureOutcome('download', error, ctx())).toMatchObject({
        kind: 'incomplete',
        error: { code: 'download_failed' },
      });
    }
    const full = failureOutcome('download', disk('ENOSPC'), ctx());
    expect(full.kind).toBe('fatal');
    expect(full.kind === 'fatal' && full.error).toBeInstanceOf(StateError);
    expect(full.kind === 'fatal' && full.error.message).toMatch(
      /cannot write results to \/out\/results \(ENOSPC\)/,
    );
  });

  it("download: the output store's verdicts: other bytes → output_conflict; changed bytes → download_failed; unreachable → output_unavailable and no new submissions; a refusal stops the run", () => {
    const stored = (code: StorageErrorCode) =>
      failureOutcome(
        'download',
        new StorageError(code, 'results/a.jpg', `${code}: s3://b/p/results/a.jpg`),
        ctx(),
      );
    expect(stored('object_exists')).toMatchObject({ kind: 'incomplete', error: { code: 'output_conflict' } });
    expect(stored('body_mismatch')).toMatchObject({
      kind: 'incomplete',
      error: {
        code: 'download_failed',
        message: expect.stringContaining('body_mismatch: s3://b/p/results/a.jpg'),
      },
    });
    expect(stored('body_mismatch')).not.toHaveProperty('halt');
    expect(stored('store_unavailable')).toMatchObject({
      kind: 'incomplete',
      error: { code: 'output_unavailable' },
      halt: true,
    });
    expect(stored('store_refused')).toMatchObject({ kind: 'fatal' });
  });

  it('a refused key (401/403) stops the run on submit and poll', () => {
    for (const stage of ['submit', 'poll'] as Stage[]) {
      for (const status of [401, 403]) {
        const outcome = failureOutcome(
          stage,
          httpError(POST, status, body('nope', 'revoked'), undefined),
          ctx(),
        );
        expect(outcome.kind).toBe('fatal');
        expect(outcome.kind === 'fatal' && outcome.error).toBeInstanceOf(ServiceRefusedError);
        expect(outcome.kind === 'fatal' && outcome.error.code).toBe(
          status === 403 ? 'forbidden' : 'unauthorized',
        );
      }
    }
  });

  it('transient failures while the service stays unreachable also stop the run (exit 3); 4xx say it is up', () => {
    const down = ctx({ unreachable: true });
    const reset = transportError(GET, 'ECONNREFUSED', undefined, null);
    for (const stage of ['submit', 'poll', 'download'] as Stage[]) {
      const outcome = failureOutcome(stage, reset, down);
      expect(outcome.kind).toBe('incomplete');
      expect(outcome.kind === 'incomplete' && outcome.fatal).toBeInstanceOf(ServiceRefusedError);
      expect(outcome.kind === 'incomplete' && outcome.fatal?.code).toBe('unreachable');
    }
    const answered = failureOutcome('download', httpError(GET, 404, body(), undefined), down);
    expect(answered.kind === 'incomplete' && answered.fatal).toBeUndefined();
    // An ambiguous submission never ends the run by itself.
    const unknown = failureOutcome('submit', httpError(POST, 502, body(), undefined), down);
    expect(unknown.kind === 'incomplete' && unknown.fatal).toBeUndefined();
  });

  it('while stopping: our own aborts are `stopped`; a submission answer is still recorded', () => {
    const stopping = ctx({ stopping: true });
    expect(failureOutcome('poll', new InterruptedError('stop'), stopping)).toEqual({ kind: 'stopped' });
    expect(failureOutcome('download', httpError(GET, 404, body(), undefined), stopping)).toEqual({
      kind: 'stopped',
    });
    expect(failureOutcome('poll', httpError(GET, 503, body(), undefined), stopping)).toEqual({
      kind: 'stopped',
    });
    expect(failureOutcome('submit', new InterruptedError('stop'), stopping)).toEqual({ kind: 'stopped' });
    expect(failureOutcome('submit', httpError(POST, 500, body(), undefined), stopping)).toMatchObject({
      kind: 'incomplete',
      error: { code: 'submit_unknown' },
    });
  });

  it('anything else is the run’s end, with a message a user can act on', () => {
    expect(failureOutcome('poll', new TypeError('boom'), ctx())).toMatchObject({
      kind: 'fatal',
      error: { code: 'internal', message: expect.stringMatching(/^unexpected error: TypeError: boom/) },
    });
    const state = new StateError('journal_write_failed', 'cannot append');
    expect(failureOutcome('submit', state, ctx())).toEqual({ kind: 'fatal', error: state });
    expect(runError(disk('EROFS'), '/out')).toMatchObject({
      code: 'disk',
      message: expect.stringContaining('cannot write in /out (EROFS on /out/x)'),
    });
  });
});

describe('styles failures', () => {
  const GET_STYLES = { method: 'GET', path: '/v1/styles' };
  it('a refused key or an unreachable service cannot start the run; other refusals leave styles unchecked', () => {
    expect(stylesFailure(httpError(GET_STYLES, 401, body(), undefined), 'http://s')).toMatchObject({
      kind: 'fatal',
      error: { code: 'unauthorized' },
    });
    expect(
      stylesFailure(transportError(GET_STYLES, 'ECONNREFUSED', undefined, null), 'http://s'),
    ).toMatchObject({
      kind: 'fatal',
      error: { code: 'unreachable', message: expect.stringContaining('cannot be reached') },
    });
    expect(stylesFailure(httpError(GET_STYLES, 404, body(), undefined), 'http://s')).toMatchObject({
      kind: 'unchecked',
      message: expect.stringContaining('styles are not checked'),
    });
  });
});
