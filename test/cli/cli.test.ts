import { execFile } from 'node:child_process';
import { cp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killAllClis, REPO_ROOT, runCli, spawnCli, waitFor } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';

const tmp = useTempDir('kb-cli-', 'suite');
beforeAll(async () => {
  await cp(path.join(REPO_ROOT, 'manifests'), tmp.file('manifests'), { recursive: true });
});
afterEach(killAllClis);

describe('the kitchen-batch CLI', () => {
  it('npx kitchen-batch runs the built bin from the repository root (README quick start): dist/bin.js is executable', async () => {
    // `npm ci` builds dist/ (prepare); tsc writes files without the executable bit, which `npx` needs.
    const bin = path.join(REPO_ROOT, 'dist', 'bin.js');
    expect((await stat(bin)).mode & 0o111, `${bin} is not executable: run npm run build`).not.toBe(0);
    const { stdout } = await promisify(execFile)('npx', ['--no-install', 'kitchen-batch', '--version'], {
      cwd: REPO_ROOT,
    });
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('prints help, and refuses unknown commands and bad options with exit 2 before any network call', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/\n {2}run +plan, preflight, submit/);
    expect((await runCli(['frobnicate'])).code).toBe(2);
    for (const bad of [
      ['--concurrency', '0'],
      ['--shard', '3/2'],
      ['--job-timeout', '-5'],
      ['--max-submissions', 'lots'],
      ['--log-level', 'loud'],
    ]) {
      const ran = await runCli(['run', 'manifests/sample.csv', '--base-url', 'http://127.0.0.1:9', ...bad], {
        cwd: tmp.dir,
        env: { KITCHEN_API_KEY: 'k' },
      });
      expect(ran.code, bad.join(' ')).toBe(2);
      expect(ran.stderr, bad.join(' ')).toContain(bad[0]!);
    }
    const nokey = await runCli(
      ['run', 'manifests/sample.csv', '--base-url', 'http://127.0.0.1:9', '--json'],
      { cwd: tmp.dir },
    );
    expect(nokey.code).toBe(2);
    expect(nokey.stderr).toMatch(/KITCHEN_API_KEY/);
    // --json: scripts get one JSON object on stdout even when the run cannot start.
    expect(JSON.parse(nokey.stdout)).toMatchObject({ exit_code: 2, error: { code: 'usage' } });
  });

  it('a manifest error exits 2 naming the line; plan exits 1 when items are rejected', async () => {
    await writeFile(tmp.file('broken.csv'), 'id,image,style\nk1,"manifests/images/k1.jpg,modern\n');
    const broken = await runCli(['plan', 'broken.csv'], { cwd: tmp.dir });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/broken\.csv:2/);
    await writeFile(
      tmp.file('partly.csv'),
      'id,image,style\nok,manifests/images/k1-white-shaker.jpg,modern\ngone,nope.jpg,modern\n',
    );
    const partly = await runCli(['plan', 'partly.csv', '--json'], { cwd: tmp.dir });
    expect(partly.code).toBe(1);
    const plan = JSON.parse(partly.stdout) as { summary: { rejected: number; submit: number } };
    expect(plan.summary).toMatchObject({ rejected: 1, submit: 1 });
  });

  it('run --sandbox on the sample manifest exits 0 with every result; plan, report and a rerun agree', async () => {
    const run = await runCli(['run', 'manifests/sample.csv', '--sandbox', '--json', '--no-progress'], {
      cwd: tmp.dir,
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const summary = JSON.parse(run.stdout) as { totals: { items: number; succeeded: number } };
    expect(summary.totals.succeeded).toBe(summary.totals.items);
    const out = tmp.file('output/sample');
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8'));
    expect(report.items).toHaveLength(summary.totals.items);
    const html = await readFile(path.join(out, 'report.html'), 'utf8');
    expect(html).toContain('<html');

    const plan = await runCli(['plan', 'manifests/sample.csv'], { cwd: tmp.dir });
    expect(plan.code).toBe(0);
    expect(plan.stdout).toMatch(/0 to submit/);

    await rm(path.join(out, 'report.json'));
    const rebuilt = await runCli(['report', 'output/sample'], { cwd: tmp.dir });
    expect(rebuilt.code).toBe(0);
    const again = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8'));
    expect(again.items).toEqual(report.items);
    expect(again.run.totals).toEqual(report.run.totals);
  });

  it('sandbox --port 0 prints its URL and serves the API; styles lists the keys', async () => {
    const sandbox = spawnCli(['sandbox', '--port', '0'], { env: { KITCHEN_API_KEY: 'sk_cli_test_key' } });
    const url = await waitFor(
      () => {
        if (sandbox.exitedYet()) throw new Error(`sandbox exited\n${sandbox.stderr()}`);
        const buf = sandbox.stdout();
        const line = buf.split('\n')[0];
        return buf.includes('\n') && line ? line.trim() : null;
      },
      { what: "the sandbox's URL on stdout", timeoutMs: 45_000 },
    );
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const denied = await fetch(`${url}/v1/styles`);
    expect(denied.status).toBe(401);
    const styles = await runCli(['styles', '--base-url', url], {
      env: { KITCHEN_API_KEY: 'sk_cli_test_key' },
    });
    expect(styles.code).toBe(0);
    expect(styles.stdout).toContain('scandinavian');
    sandbox.kill('SIGINT');
    await sandbox.exited;
  });
});
