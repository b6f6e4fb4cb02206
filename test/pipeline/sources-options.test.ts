/**
 * The library's side of issue 32's source access: `sources` of the run options, checked by
 * `resolveRunOptions` as the other nested options are (its keys, its values, one message form),
 * with the environment the caller gives (else `process.env`) for what it leaves out.
 */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { DEFAULT_MAX_SOURCE_BYTES } from '../../src/limits.js';
import { type RunOptions, resolveRunOptions } from '../../src/pipeline/options.js';
import { resolveSourceAccess } from '../../src/pipeline/source-access.js';

const base: RunOptions = {
  manifest: 'manifests/nightly.csv',
  cwd: '/work',
  service: { baseUrl: 'https://api.example.com', apiKey: 'sk_test' },
};

/** The message `fn` throws, checked to be a usage error (exit 2). */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('run options: sources', () => {
  it('defaults to the 200 MiB cap and private addresses refused, with the given environment', () => {
    const env = {};
    expect(resolveRunOptions({ ...base, sources: { env } }).sources).toEqual({
      maxBytes: DEFAULT_MAX_SOURCE_BYTES,
      allowPrivate: false,
      env,
    });
  });

  it('takes maxBytes and allowPrivate as given, over the environment', () => {
    const env = { KITCHEN_MAX_SOURCE_BYTES: '1G', KITCHEN_ALLOW_PRIVATE_SOURCES: '1' };
    expect(resolveRunOptions({ ...base, sources: { env } }).sources).toMatchObject({
      maxBytes: 2 ** 30,
      allowPrivate: true,
    });
    expect(
      resolveRunOptions({ ...base, sources: { env, maxBytes: 4096, allowPrivate: false } }).sources,
    ).toMatchObject({ maxBytes: 4096, allowPrivate: false });
  });

  it('reads process.env when the caller gives no environment', () => {
    const before = process.env.KITCHEN_MAX_SOURCE_BYTES;
    process.env.KITCHEN_MAX_SOURCE_BYTES = '64K';
    try {
      expect(resolveRunOptions(base).sources.maxBytes).toBe(65_536);
      expect(resolveRunOptions(base).sources.env).toBe(process.env);
    } finally {
      if (before === undefined) delete process.env.KITCHEN_MAX_SOURCE_BYTES;
      else process.env.KITCHEN_MAX_SOURCE_BYTES = before;
    }
  });

  it('refuses a bad value in the one message form, naming the option path', () => {
    const env = {};
    expect(refusal(() => resolveRunOptions({ ...base, sources: { env, maxBytes: 500 } }))).toBe(
      'sources.maxBytes: expected a whole number of at least 1024, got 500',
    );
    expect(refusal(() => resolveRunOptions({ ...base, sources: { env, maxBytes: 1.5e6 + 0.5 } }))).toMatch(
      /^sources\.maxBytes: expected a whole number/,
    );
    expect(
      refusal(() =>
        resolveRunOptions({ ...base, sources: { env, allowPrivate: 'yes' as unknown as boolean } }),
      ),
    ).toBe('sources.allowPrivate: expected true or false, got "yes"');
    expect(
      refusal(() => resolveRunOptions({ ...base, sources: { env: 'x' as unknown as NodeJS.ProcessEnv } })),
    ).toBe('sources.env: expected an object of environment variables, got "x"');
    expect(refusal(() => resolveRunOptions({ ...base, sources: 5 as unknown as object }))).toBe(
      'sources: expected an object, got 5',
    );
  });

  it('refuses an unknown key of sources with the closest one', () => {
    const input = { ...base, sources: { maxByte: 5000 } } as unknown as RunOptions;
    expect(refusal(() => resolveRunOptions(input))).toBe(
      'unknown option sources.maxByte; did you mean sources.maxBytes?',
    );
  });

  it('the worker resolves the same way (runWorker and the worker command use resolveSourceAccess)', () => {
    expect(resolveSourceAccess({ env: { KITCHEN_MAX_SOURCE_BYTES: '2M' } })).toMatchObject({
      maxBytes: 2 * 2 ** 20,
      allowPrivate: false,
    });
    expect(refusal(() => resolveSourceAccess({ env: {}, maxBytes: 0 }))).toBe(
      'sources.maxBytes: expected a whole number of at least 1024, got 0',
    );
  });
});
