/**
 * Issue 32's source flags on `run`, `plan`, `enqueue` and `worker`: `--max-source-bytes` (sizes with
 * units, refused in validate.ts's message form), `--allow-private-sources`, their environment twins
 * (the flag wins), and the help pages that list them. Every refusal here happens before a manifest,
 * a service or a Redis is reached: no server is needed.
 */
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { COMMANDS, flagLabel, SOURCE_FLAGS } from '../../src/commands/command-table.js';
import { runFlagOptions } from '../../src/config.js';
import { DEFAULT_MAX_SOURCE_BYTES } from '../../src/limits.js';
import { resolvePlanOptions } from '../../src/pipeline/options.js';
import { parseByteSize } from '../../src/pipeline/source-access.js';
import { ALLOW_PRIVATE_FLAG } from '../../src/storage/http/guard.js';
import { textSink } from '../helpers/cli.js';

/** Runs the CLI in this process with exactly `env` (nothing of the test's own environment). */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env, cwd: process.cwd() });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** The sources a `run` command line resolves to, under `env`. */
function runSources(flags: string[], env: NodeJS.ProcessEnv) {
  const values: Record<string, string | boolean> = {};
  for (let i = 0; i < flags.length; i++) {
    const name = flags[i]!.slice(2);
    if (name === 'allow-private-sources') values[name] = true;
    else values[name] = flags[++i]!;
  }
  return resolvePlanOptions(runFlagOptions('m.csv', '/w', values, env), flagLabel).sources;
}

describe('--max-source-bytes', () => {
  it('takes bytes, or K/M/G (and KiB/MiB/GiB, KB/MB/GB) as 1024-based units', () => {
    const cases: Array<[string, number]> = [
      ['1024', 1024],
      ['209715200', 200 * 2 ** 20],
      ['512k', 512 * 1024],
      ['512K', 512 * 1024],
      ['50M', 50 * 2 ** 20],
      ['50MiB', 50 * 2 ** 20],
      ['50MB', 50 * 2 ** 20],
      ['2G', 2 * 2 ** 30],
      ['2gib', 2 * 2 ** 30],
      ['1.5K', 1536],
      [' 3 M ', 3 * 2 ** 20],
    ];
    for (const [raw, bytes] of cases)
      expect([raw, parseByteSize('--max-source-bytes', raw)]).toEqual([raw, bytes]);
  });

  it('refuses what is not a size, or under 1 KiB, naming the flag and the value as typed', () => {
    for (const raw of ['', 'abc', '50X', '-5M', '0', '1023', '1.5', '1e6', '5 M B', '0.5K']) {
      expect(() => parseByteSize('--max-source-bytes', raw)).toThrow(
        `--max-source-bytes: expected a whole number of bytes of at least 1024, or a size with a unit K, M or G (1024-based) such as 50M, got ${JSON.stringify(raw)}`,
      );
    }
  });

  it('on the command line of run, plan, enqueue and worker: exit 2 before anything is read', async () => {
    for (const args of [
      ['run', 'no-such.csv', '--max-source-bytes', '50X'],
      ['plan', 'no-such.csv', '--max-source-bytes', '50X'],
      ['enqueue', 'no-such.csv', '--redis', 'redis://127.0.0.1:1', '--max-source-bytes', '50X'],
      ['worker', '--redis', 'redis://127.0.0.1:1', '--max-source-bytes', '50X'],
    ]) {
      const result = await cli(args, { KITCHEN_API_KEY: 'k', KITCHEN_API_BASE_URL: 'http://127.0.0.1:1' });
      expect([args[0], result.code]).toEqual([args[0], 2]);
      expect(result.stderr).toContain('--max-source-bytes: expected a whole number of bytes');
      expect(result.stderr).toContain('got "50X"');
    }
  });

  it('a mistyped flag gets the closest one', async () => {
    const result = await cli(['run', 'm.csv', '--max-source-byte', '5M']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'unknown option --max-source-byte for run; did you mean --max-source-bytes?',
    );
  });
});

describe('flags and environment', () => {
  it('defaults: 200 MiB, private addresses refused', () => {
    expect(runSources([], {})).toMatchObject({ maxBytes: DEFAULT_MAX_SOURCE_BYTES, allowPrivate: false });
  });

  it('KITCHEN_MAX_SOURCE_BYTES and KITCHEN_ALLOW_PRIVATE_SOURCES=1 apply without the flags', () => {
    const env = { KITCHEN_MAX_SOURCE_BYTES: '10M', KITCHEN_ALLOW_PRIVATE_SOURCES: '1' };
    expect(runSources([], env)).toMatchObject({ maxBytes: 10 * 2 ** 20, allowPrivate: true, env });
    // Only `1` turns it on.
    expect(runSources([], { KITCHEN_ALLOW_PRIVATE_SOURCES: 'yes' }).allowPrivate).toBe(false);
  });

  it('the flag wins over the environment, even over a variable that is not a size', () => {
    expect(runSources(['--max-source-bytes', '50M'], { KITCHEN_MAX_SOURCE_BYTES: '10M' }).maxBytes).toBe(
      50 * 2 ** 20,
    );
    expect(runSources(['--max-source-bytes', '50M'], { KITCHEN_MAX_SOURCE_BYTES: 'lots' }).maxBytes).toBe(
      50 * 2 ** 20,
    );
    expect(runSources(['--allow-private-sources'], {}).allowPrivate).toBe(true);
  });

  it('a bad KITCHEN_MAX_SOURCE_BYTES is refused naming the variable (exit 2 for run and worker)', async () => {
    expect(() => runSources([], { KITCHEN_MAX_SOURCE_BYTES: 'lots' })).toThrow(
      'KITCHEN_MAX_SOURCE_BYTES: expected a whole number of bytes of at least 1024',
    );
    const env = { KITCHEN_MAX_SOURCE_BYTES: '12', KITCHEN_API_KEY: 'k', KITCHEN_API_BASE_URL: 'http://x' };
    for (const args of [
      ['run', 'no-such.csv'],
      ['worker', '--redis', 'redis://127.0.0.1:1'],
    ]) {
      const result = await cli(args, env);
      expect([args[0], result.code]).toEqual([args[0], 2]);
      expect(result.stderr).toContain('KITCHEN_MAX_SOURCE_BYTES: expected a whole number of bytes');
      expect(result.stderr).toContain('got "12"');
    }
  });
});

describe('declared once', () => {
  it('--allow-private-sources is the flag the address guard names in its refusals', () => {
    expect(`--${Object.keys(SOURCE_FLAGS)[1]}`).toBe(ALLOW_PRIVATE_FLAG);
  });

  it('run, plan, enqueue and worker take both flags; run options name them in messages', () => {
    for (const command of ['run', 'plan', 'enqueue', 'worker'] as const) {
      expect(Object.keys(COMMANDS[command].flags)).toEqual(
        expect.arrayContaining(['max-source-bytes', 'allow-private-sources']),
      );
    }
    expect(flagLabel('sources.maxBytes')).toBe('--max-source-bytes');
    expect(flagLabel('sources.allowPrivate')).toBe('--allow-private-sources');
  });

  it('help run (and enqueue, worker) shows them with the default and the variables', async () => {
    for (const command of ['run', 'enqueue', 'worker']) {
      const help = await cli(['help', command]);
      expect(help.code).toBe(0);
      // The page wraps its help column; read it as one line.
      const page = help.stdout.replace(/\s+/g, ' ');
      expect(page).toMatch(
        /--max-source-bytes SIZE a remote source .*?KITCHEN_MAX_SOURCE_BYTES\) \(default 200M\)/,
      );
      expect(page).toContain('(or KITCHEN_MAX_SOURCE_BYTES)');
      expect(page).toContain('--allow-private-sources let sources on loopback and private addresses');
      expect(page).toContain('(or KITCHEN_ALLOW_PRIVATE_SOURCES=1)');
    }
  });
});
