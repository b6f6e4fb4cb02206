/**
 * Issue 29, item 7: errors name the cause that is really there. The manifest's absence before a
 * missing service (b), the worker's missing service variable and nothing else (c), and the sandbox's
 * own line on Ctrl-C (e). The CLI runs in process (`main`), the sandbox as a real child process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { EXIT, ManifestError } from '../../src/errors.js';
import { runBatch } from '../../src/index.js';
import { killAllClis, spawnCli, textSink, waitFor } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-causes-');
afterEach(killAllClis);

/** Runs the CLI in this process with exactly `env` (no KITCHEN_* of the test process). */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env, cwd: tmp.dir });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe('a manifest that is not there is reported first (item 7b)', () => {
  it('run missing.csv without a service: exit 2 naming the manifest, not the service URL', async () => {
    for (const [what, extra, env] of [
      ['no service at all', [], {}],
      ['no key', ['--base-url', 'http://127.0.0.1:9'], {}],
      ['no base URL', [], { KITCHEN_API_KEY: 'k' }],
      ['a key file that is not there either', ['--api-key-file', 'nokey.txt'], {}],
    ] as const) {
      const result = await cli(['run', 'missing.csv', ...extra], env);
      expect(result.code, what).toBe(EXIT.usage);
      expect(result.stderr, what).toMatch(/^kitchen-batch: missing\.csv: cannot read the manifest: ENOENT/);
      expect(result.stderr, what).not.toMatch(/service URL|API key|KITCHEN_API|nokey/);
    }
    const json = await cli(['run', 'missing.csv', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ exit_code: 2, error: { code: 'manifest_error' } });
    // A manifest of a type no reader takes is a manifest error too, before the service.
    const typed = await cli(['run', 'catalogue.txt']);
    expect(typed.code).toBe(EXIT.usage);
    expect(typed.stderr).toMatch(/catalogue\.txt: unsupported manifest type/);
  });

  it('plan missing.csv says the same, with or without a service', async () => {
    for (const [what, extra, env] of [
      ['no service', [], {}],
      ['half a service', ['--base-url', 'http://127.0.0.1:9'], {}],
      [
        'a key file that is not there',
        ['--api-key-file', 'nokey.txt'],
        { KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' },
      ],
    ] as const) {
      const result = await cli(['plan', 'missing.csv', ...extra], env);
      expect(result.code, what).toBe(EXIT.usage);
      expect(result.stderr, what).toMatch(/^kitchen-batch: missing\.csv: cannot read the manifest: ENOENT/);
    }
  });

  it('runBatch() without a service in its options or the environment: the same ManifestError', async () => {
    const saved = { url: process.env.KITCHEN_API_BASE_URL, key: process.env.KITCHEN_API_KEY };
    delete process.env.KITCHEN_API_BASE_URL;
    delete process.env.KITCHEN_API_KEY;
    try {
      const failure = runBatch({ manifest: 'missing.csv', cwd: tmp.dir });
      await expect(failure).rejects.toBeInstanceOf(ManifestError);
      await expect(failure).rejects.toThrow(/^missing\.csv: cannot read the manifest: ENOENT/);
    } finally {
      if (saved.url !== undefined) process.env.KITCHEN_API_BASE_URL = saved.url;
      if (saved.key !== undefined) process.env.KITCHEN_API_KEY = saved.key;
    }
  });

  it('a bad flag value is still refused before the manifest is looked for', async () => {
    const result = await cli(['run', 'missing.csv', '--concurrency', '0']);
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toMatch(/^kitchen-batch: --concurrency: expected/);
  });
});

describe('a worker without the service names exactly what is missing (item 7c)', () => {
  const redis = ['worker', '--redis', 'redis://127.0.0.1:1'];

  it('only the key missing: names KITCHEN_API_KEY and --api-key-file, not the base URL', async () => {
    const result = await cli(redis, { KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' });
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toContain('KITCHEN_API_KEY');
    expect(result.stderr).toContain('--api-key-file');
    expect(result.stderr).not.toMatch(/KITCHEN_API_BASE_URL|--base-url/);
  });

  it('only the base URL missing: names KITCHEN_API_BASE_URL and --base-url, not the key', async () => {
    const result = await cli(redis, { KITCHEN_API_KEY: 'k' });
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toContain('KITCHEN_API_BASE_URL');
    expect(result.stderr).toContain('--base-url');
    expect(result.stderr).not.toMatch(/KITCHEN_API_KEY|--api-key-file/);
  });

  it('both missing: names both, each with its flag', async () => {
    const result = await cli(redis);
    expect(result.code).toBe(EXIT.usage);
    for (const name of ['KITCHEN_API_KEY', '--api-key-file', 'KITCHEN_API_BASE_URL', '--base-url']) {
      expect(result.stderr).toContain(name);
    }
  });
});

describe('the sandbox on Ctrl-C (item 7e)', () => {
  it('prints its own line, not the run\'s "saving state", and exits 0', async () => {
    const sandbox = spawnCli(['sandbox', '--port', '0']);
    await waitFor(
      () => {
        if (sandbox.exitedYet()) throw new Error(`sandbox exited\n${sandbox.stderr()}`);
        return sandbox.stdout().includes('\n');
      },
      { what: "the sandbox's URL on stdout", timeoutMs: 45_000 },
    );
    sandbox.kill('SIGINT');
    const ended = await sandbox.exited;
    expect(ended.stderr).toContain('kitchen-batch: SIGINT: stopping the sandbox');
    expect(ended.stderr).not.toMatch(/in-flight|saving state/);
    expect(ended.code).toBe(0);
  });
});
