import { chmod, writeFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { flagLabel } from '../../src/commands/command-table.js';
import { runFlagOptions, serviceConfig } from '../../src/config.js';
import { UsageError } from '../../src/errors.js';
import { resolvePlanOptions } from '../../src/pipeline/options.js';
import { intFlag, secondsFlag } from '../../src/util/validate.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-config-');

describe('configuration', () => {
  it('reads the key from KITCHEN_API_KEY, and the URL from --base-url before KITCHEN_API_BASE_URL', () => {
    const env = { KITCHEN_API_KEY: ' sk_env \n', KITCHEN_API_BASE_URL: 'https://env.example' };
    expect(serviceConfig({}, env)).toEqual({
      apiKey: 'sk_env',
      baseUrl: 'https://env.example',
      warnings: [],
    });
    expect(serviceConfig({ 'base-url': 'https://flag.example' }, env).baseUrl).toBe('https://flag.example');
    expect(() => serviceConfig({ 'base-url': 'ftp://x' }, {})).toThrow(UsageError);
  });

  it('--api-key-file trims the trailing newline and warns when the file is world-readable', async () => {
    const file = tmp.file('key');
    await writeFile(file, 'sk_from_file\n');
    await chmod(file, 0o600);
    expect(serviceConfig({ 'api-key-file': file }, { KITCHEN_API_KEY: 'sk_env' })).toMatchObject({
      apiKey: 'sk_from_file',
      warnings: [],
    });
    await chmod(file, 0o644);
    const { warnings } = serviceConfig({ 'api-key-file': file }, {});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/readable by every user/);
    expect(warnings[0]).not.toContain('sk_from_file');
    await writeFile(file, '\n');
    expect(() => serviceConfig({ 'api-key-file': file }, {})).toThrow(/empty/);
    expect(() => serviceConfig({ 'api-key-file': tmp.file('nope') }, {})).toThrow(/cannot read/);
  });

  it('numeric flags are checked with the flag named', () => {
    expect(intFlag('concurrency', '4')).toBe(4);
    expect(intFlag('concurrency', undefined)).toBeUndefined();
    for (const bad of ['1.5', 'x', ''])
      expect(() => intFlag('concurrency', bad), bad).toThrow(/--concurrency/);
    // Out of range: refused by the run options, under the flag's name.
    for (const bad of ['0', '-1', '1001']) {
      const input = runFlagOptions('m.csv', '/w', { concurrency: bad });
      expect(() => resolvePlanOptions(input, flagLabel), bad).toThrow(
        /^--concurrency: expected a whole number from 1 to 1000/,
      );
    }
    expect(secondsFlag('job-timeout', '1.5')).toBe(1500);
    for (const bad of ['0', '-3', 'soon'])
      expect(() => secondsFlag('job-timeout', bad), bad).toThrow(/--job-timeout/);
  });
});
