/**
 * Issue 31: flags are read against their one declaration (src/commands/command-table.ts), refused in
 * the contract's words (docs/contract.md#help-and-version), and their values checked by the shared
 * validators with one message form, the worker's as `run`'s.
 */
import { describe, expect, it } from 'vitest';
import { flagLabel } from '../../src/commands/command-table.js';
import { parseFlags } from '../../src/commands/parse.js';
import { runFlagOptions } from '../../src/config.js';
import { UsageError } from '../../src/errors.js';
import { resolvePlanOptions } from '../../src/pipeline/options.js';
import { fractionFlag } from '../../src/util/validate.js';
import { cli } from '../worker/world.js';

/** The message `parseFlags` refuses `args` of `command` with. */
function refusal(command: Parameters<typeof parseFlags>[0], args: string[]): string {
  try {
    parseFlags(command, args);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`${command} ${args.join(' ')} was not refused`);
}

describe('flags read against their declaration', () => {
  it('gives typed values and the other words in order', () => {
    const { values, positionals } = parseFlags('run', [
      'a.csv',
      '--concurrency=4',
      '-v',
      '--json',
      '--',
      '--x',
    ]);
    expect(values).toEqual({ concurrency: '4', verbose: true, json: true });
    expect(positionals).toEqual(['a.csv', '--x']);
  });

  it('refuses in the contract words, pointing to the help page', () => {
    const pointer = '\n(kitchen-batch help run lists its options)';
    expect(refusal('run', ['--concurency', '4'])).toBe(
      `unknown option --concurency for run; did you mean --concurrency?${pointer}`,
    );
    expect(refusal('run', ['-x'])).toBe(`unknown option -x for run${pointer}`);
    expect(refusal('run', ['--out'])).toBe(`option --out needs a value${pointer}`);
    expect(refusal('run', ['--out', '--json'])).toBe(
      `option --out needs a value (one that starts with "-" is written --out=--json)${pointer}`,
    );
    expect(refusal('run', ['--json=yes'])).toBe(`option --json takes no value${pointer}`);
    expect(refusal('worker', ['--retry-failed'])).toMatch(
      /^unknown option --retry-failed for worker: in worker mode .*enqueue <manifest> --retry-failed/,
    );
    expect(parseFlags('sandbox', ['--date-skew-ms=-500']).values).toEqual({ 'date-skew-ms': '-500' });
  });

  it('checks --review-threshold as text, for run and worker alike: the value as typed, not NaN', () => {
    const refused = (raw: string) => () =>
      resolvePlanOptions(runFlagOptions('m.csv', '/w', { 'review-threshold': raw }), flagLabel);
    for (const raw of ['abc', '', '1.5', '-0.1']) {
      const message = `--review-threshold: expected a number from 0 to 1, got ${JSON.stringify(raw)}`;
      expect(refused(raw), raw).toThrow(message);
      expect(() => fractionFlag('review-threshold', raw), raw).toThrow(message);
    }
    expect(fractionFlag('review-threshold', '0.35')).toBe(0.35);
  });

  it('the worker refuses a --log-level as run does, before anything is opened', async () => {
    const env = { KITCHEN_API_KEY: 'unused-key', KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' };
    const run = await cli(['run', 'manifests/sample.csv', '--sandbox', '--log-level', 'loud'], {});
    const worker = await cli(['worker', '--redis', 'redis://127.0.0.1:1', '--log-level', 'loud'], env);
    expect(run.code).toBe(2);
    expect(worker.code).toBe(2);
    expect(run.stderr).toMatch(/^kitchen-batch: --log-level: expected one of fatal, error/);
    expect(worker.stderr).toBe(run.stderr);
  });
});
