/**
 * Issue 29, item 7d: a JavaScript caller of `runBatch()` gets no type check, so a misspelt option key
 * must be refused (a UsageError naming it by its path, with the closest valid key), in every nested
 * options object, while the keys that are allowed (`logger`, `signals`, `onEvent`, ...) still pass.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { runBatch } from '../../src/index.js';
import { type RunOptions, resolvePlanOptions, resolveRunOptions } from '../../src/pipeline/options.js';

const base = {
  manifest: 'manifests/nightly.csv',
  cwd: '/work',
  service: { baseUrl: 'https://api.example.com', apiKey: 'sk_test' },
};

/** Options as a JavaScript caller may write them: any shape. */
const untyped = (options: Record<string, unknown>) => options as unknown as RunOptions;

describe('misspelt option keys (item 7d)', () => {
  it('runBatch({ limits: { concurency } }) throws a UsageError naming limits.concurency and limits.concurrency', async () => {
    const failure = runBatch(untyped({ ...base, limits: { concurency: 4 } }));
    await expect(failure).rejects.toBeInstanceOf(UsageError);
    await expect(failure).rejects.toThrow(
      /^unknown option limits\.concurency; did you mean limits\.concurrency\?$/,
    );
  });

  it('every nested options object is checked the same way, by its path', () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ manifests: 'x.csv' }, 'manifests', 'manifest'],
      [{ onevent: () => {} }, 'onevent', 'onEvent'],
      [{ limits: { maxSubmission: 3 } }, 'limits.maxSubmission', 'limits.maxSubmissions'],
      [{ limits: { shard: { index: 1, count: 2, cuont: 2 } } }, 'limits.shard.cuont', 'limits.shard.count'],
      [{ preflight: { maxSides: 1024 } }, 'preflight.maxSides', 'preflight.maxSide'],
      [{ resume: { retryFaild: true } }, 'resume.retryFaild', 'resume.retryFailed'],
      [{ timing: { graceMS: 10 } }, 'timing.graceMS', 'timing.graceMs'],
      [{ signals: { stopp: new AbortController().signal } }, 'signals.stopp', 'signals.stop'],
      [{ output: { htm: false } }, 'output.htm', 'output.html'],
      [{ review: { treshold: 0.3 } }, 'review.treshold', 'review.threshold'],
      [{ service: { ...base.service, apikey: 'x' } }, 'service.apikey', 'service.apiKey'],
      [
        { service: { ...base.service, timeouts: { conect: 5 } } },
        'service.timeouts.conect',
        'service.timeouts.connect',
      ],
      [
        { service: { ...base.service, retry: { retrys: 2 } } },
        'service.retry.retrys',
        'service.retry.retries',
      ],
      [
        { service: { ...base.service, governor: { maxrate: 2 } } },
        'service.governor.maxrate',
        'service.governor.maxRate',
      ],
    ];
    for (const [over, key, closest] of cases) {
      const run = () => resolveRunOptions(untyped({ ...base, ...over }));
      expect(run, key).toThrow(UsageError);
      expect(run, key).toThrow(`unknown option ${key}; did you mean ${closest}?`);
    }
    // plan's options (no service) are checked the same way.
    expect(() => resolvePlanOptions(untyped({ manifest: 'm.csv', limits: { concurency: 2 } }))).toThrow(
      'unknown option limits.concurency; did you mean limits.concurrency?',
    );
  });

  it('a key close to none lists what the object takes', () => {
    expect(() => resolveRunOptions(untyped({ ...base, output: { colourful: true } }))).toThrow(
      'unknown option output.colourful (output takes: html, logLevel)',
    );
  });

  it('the keys that are allowed pass: logger, signals, onEvent, tuning of the service', () => {
    const controller = new AbortController();
    const resolved = resolveRunOptions({
      ...base,
      out: 'out',
      logger: pino({ level: 'silent' }),
      signals: { stop: controller.signal, abort: controller.signal },
      onEvent: () => {},
      limits: {
        concurrency: 2,
        shard: { index: 1, count: 2 },
        maxDurationMs: 60_000,
        maxDurationGraceMs: 1000,
      },
      preflight: { keepMetadata: false, stripMetadata: true, maxSide: 2048 },
      resume: { retryFailed: true, retryAmbiguous: false, verify: true },
      timing: { graceMs: 10, reportIntervalMs: 100, progressIntervalMs: 100 },
      output: { html: false, logLevel: 'warn' },
      review: { enabled: false, threshold: 0.4 },
      service: {
        ...base.service,
        unreachableMs: 1000,
        timeouts: { connect: 1, request: 2, upload: 3, download: 4 },
        retry: {
          retries: 1,
          baseMs: 10,
          capMs: 100,
          maxRetryTimeMs: 1000,
          pollAttempts: 3,
          random: Math.random,
        },
        governor: { initialRate: 2, maxRate: 4, now: () => 0, onChange: () => {} },
      },
    });
    expect(resolved.limits.concurrency).toBe(2);
    expect(resolved.service.retry?.retries).toBe(1);
  });
});
