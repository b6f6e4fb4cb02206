import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { intFlag, secondsFlag, serviceConfig } from '../../src/config.js';
import { UsageError } from '../../src/errors.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kb-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

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
    const file = path.join(dir, 'key');
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
    expect(() => serviceConfig({ 'api-key-file': path.join(dir, 'nope') }, {})).toThrow(/cannot read/);
  });

  it('numeric flags are checked with the flag named', () => {
    expect(intFlag('concurrency', '4', 1)).toBe(4);
    expect(intFlag('concurrency', undefined, 1)).toBeUndefined();
    for (const bad of ['0', '-1', '1.5', 'x', ''])
      expect(() => intFlag('concurrency', bad, 1), bad).toThrow(/--concurrency/);
    expect(secondsFlag('job-timeout', '1.5')).toBe(1500);
    for (const bad of ['0', '-3', 'soon'])
      expect(() => secondsFlag('job-timeout', bad), bad).toThrow(/--job-timeout/);
  });
});
