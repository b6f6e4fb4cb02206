import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { flagLabel } from '../../src/commands/command-table.js';
import { runFlagOptions } from '../../src/config.js';
import { UsageError } from '../../src/errors.js';
import {
  defaultOutDir,
  isResolved,
  type RunOptions,
  resolvePlanOptions,
  resolveRunOptions,
  withService,
} from '../../src/pipeline/options.js';

const base: RunOptions = {
  manifest: 'manifests/nightly.csv',
  cwd: '/work',
  service: { baseUrl: 'https://api.example.com', apiKey: 'sk_test' },
};

describe('run options: defaults and checks in one place', () => {
  it('fills every default', () => {
    const o = resolveRunOptions(base);
    expect(o).toMatchObject({
      manifest: 'manifests/nightly.csv',
      cwd: '/work',
      outDir: '/work/output/nightly',
      manifestDir: '/work/manifests',
      service: { baseUrl: 'https://api.example.com', apiKey: 'sk_test', unreachableMs: 120_000 },
      preflight: { keepMetadata: false, maxSide: 4096 },
      limits: { concurrency: 8, maxSubmissions: null, jobTimeoutMs: 1_800_000, shard: null },
      resume: { retryFailed: false, retryAmbiguous: false, verify: false },
      timing: { graceMs: 5000, reportIntervalMs: 30_000, progressIntervalMs: 1000 },
      output: { html: true, logLevel: 'info' },
    });
    expect(typeof o.onEvent).toBe('function');
    expect(defaultOutDir('/w', 'a/b/cat.v2.jsonl')).toBe(path.resolve('/w/output/cat.v2'));
    expect(resolveRunOptions({ ...base, out: 'elsewhere' }).outDir).toBe('/work/elsewhere');
  });

  it('refuses bad values in one message form, naming the option', () => {
    const cases: Array<[Partial<RunOptions>, RegExp]> = [
      [
        { limits: { concurrency: 0 } },
        /^limits\.concurrency: expected a whole number from 1 to 1000, got 0$/,
      ],
      [
        { limits: { concurrency: 2.5 } },
        /^limits\.concurrency: expected a whole number from 1 to 1000, got 2\.5$/,
      ],
      [
        { limits: { maxSubmissions: -1 } },
        /^limits\.maxSubmissions: expected a whole number of at least 0, got -1$/,
      ],
      [{ limits: { jobTimeoutMs: 0 } }, /^limits\.jobTimeoutMs: expected a number of ms above 0, got 0$/],
      [
        { limits: { shard: { index: 3, count: 2 } } },
        /^limits\.shard: expected K\/N with 1 ≤ K ≤ N \(e\.g\. 1\/4\), got "3\/2"$/,
      ],
      [
        { preflight: { maxSide: 10 } },
        /^preflight\.maxSide: expected a whole number from 64 to 16384, got 10$/,
      ],
      [
        { output: { logLevel: 'loud' } },
        /^output\.logLevel: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"$/,
      ],
      [
        { resume: { verify: 'yes' as unknown as boolean } },
        /^resume\.verify: expected true or false, got "yes"$/,
      ],
      [
        { service: { baseUrl: 'ftp://x', apiKey: 'k' } },
        /^service\.baseUrl: expected an http\(s\) URL without credentials/,
      ],
      [
        { service: { baseUrl: 'https://u:p@x', apiKey: 'k' } },
        /^service\.baseUrl: expected an http\(s\) URL without credentials/,
      ],
      [{ service: { baseUrl: 'https://x', apiKey: '' } }, /^no API key: set KITCHEN_API_KEY/],
      [{ service: { baseUrl: '', apiKey: 'k' } }, /^no service URL: set KITCHEN_API_BASE_URL/],
    ];
    for (const [over, message] of cases) {
      expect(() => resolveRunOptions({ ...base, ...over }), message.source).toThrow(message);
      expect(() => resolveRunOptions({ ...base, ...over }), message.source).toThrow(UsageError);
    }
  });

  it('the CLI names its flags in the same messages', () => {
    const input = (values: Parameters<typeof runFlagOptions>[2]) => runFlagOptions('m.csv', '/w', values);
    expect(() => resolvePlanOptions(input({ concurrency: '0' }), flagLabel)).toThrow(
      /^--concurrency: expected a whole number from 1 to 1000, got 0$/,
    );
    expect(() => resolvePlanOptions(input({ shard: '3/2' }), flagLabel)).toThrow(/^--shard: expected K\/N/);
    expect(() => resolvePlanOptions(input({ 'log-level': 'loud' }), flagLabel)).toThrow(
      /^--log-level: expected one of/,
    );
    expect(() => resolvePlanOptions(input({ 'max-side': '9' }), flagLabel)).toThrow(/^--max-side: expected/);
    // Removing metadata is the default: the old flag is accepted, but not beside its opposite.
    expect(resolvePlanOptions(input({ 'strip-metadata': true }), flagLabel).preflight.keepMetadata).toBe(
      false,
    );
    expect(resolvePlanOptions(input({ 'keep-metadata': true }), flagLabel).preflight.keepMetadata).toBe(true);
    expect(() =>
      resolvePlanOptions(input({ 'strip-metadata': true, 'keep-metadata': true }), flagLabel),
    ).toThrow(/^--strip-metadata: expected not together with --keep-metadata/);
    // Flags that are not even numbers are refused while they are read.
    expect(() => input({ 'max-submissions': 'lots' })).toThrow(
      /^--max-submissions: expected a whole number, got "lots"$/,
    );
    expect(() => input({ 'job-timeout': '-5' })).toThrow(
      /^--job-timeout: expected a positive number of seconds, got "-5"$/,
    );
    const ok = resolvePlanOptions(input({ concurrency: '3', 'job-timeout': '1.5', verify: true }), flagLabel);
    expect(ok).toMatchObject({
      limits: { concurrency: 3, jobTimeoutMs: 1500 },
      resume: { verify: true },
      service: null,
    });
  });

  it('resolved options are checked once: passing them again returns them as they are', () => {
    const plan = resolvePlanOptions({ manifest: 'm.csv', cwd: '/w' });
    const run = withService(plan, { baseUrl: 'http://127.0.0.1:1', apiKey: 'k' });
    expect(isResolved(run)).toBe(true);
    expect(resolveRunOptions(run)).toBe(run);
    expect(isResolved({ ...run })).toBe(false);
    expect(() => withService(plan, undefined)).toThrow(/no service/);
  });
});
