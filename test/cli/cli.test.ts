import { type ChildProcess, spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BIN = path.join(ROOT, 'src/bin.ts');
// Absolute, so a child started in a temp folder still finds tsx.
const TSX = import.meta.resolve('tsx');
const children = new Set<ChildProcess>();

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI (through tsx, so no build is needed) as a child process. */
function cli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', TSX, BIN, ...args], {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, KITCHEN_API_KEY: '', KITCHEN_API_BASE_URL: '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kb-cli-'));
  await cp(path.join(ROOT, 'manifests'), path.join(dir, 'manifests'), { recursive: true });
});
afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the kitchen-batch CLI', () => {
  it('prints help, and refuses unknown commands and bad options with exit 2 before any network call', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('kitchen-batch run <manifest>');
    expect((await cli(['frobnicate'])).code).toBe(2);
    for (const bad of [
      ['--concurrency', '0'],
      ['--shard', '3/2'],
      ['--job-timeout', '-5'],
      ['--max-submissions', 'lots'],
      ['--log-level', 'loud'],
    ]) {
      const ran = await cli(['run', 'manifests/sample.csv', '--base-url', 'http://127.0.0.1:9', ...bad], {
        cwd: dir,
        env: { KITCHEN_API_KEY: 'k' },
      });
      expect(ran.code, bad.join(' ')).toBe(2);
      expect(ran.stderr, bad.join(' ')).toContain(bad[0]!);
    }
    const nokey = await cli(['run', 'manifests/sample.csv', '--base-url', 'http://127.0.0.1:9', '--json'], {
      cwd: dir,
    });
    expect(nokey.code).toBe(2);
    expect(nokey.stderr).toMatch(/KITCHEN_API_KEY/);
    // --json: scripts get one JSON object on stdout even when the run cannot start.
    expect(JSON.parse(nokey.stdout)).toMatchObject({ exit_code: 2, error: { code: 'usage' } });
  });

  it('a manifest error exits 2 naming the line; plan exits 1 when items are rejected', async () => {
    await writeFile(path.join(dir, 'broken.csv'), 'id,image,style\nk1,"manifests/images/k1.jpg,modern\n');
    const broken = await cli(['plan', 'broken.csv'], { cwd: dir });
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/broken\.csv:2/);
    await writeFile(
      path.join(dir, 'partly.csv'),
      'id,image,style\nok,manifests/images/k1-white-shaker.jpg,modern\ngone,nope.jpg,modern\n',
    );
    const partly = await cli(['plan', 'partly.csv', '--json'], { cwd: dir });
    expect(partly.code).toBe(1);
    const plan = JSON.parse(partly.stdout) as { summary: { rejected: number; submit: number } };
    expect(plan.summary).toMatchObject({ rejected: 1, submit: 1 });
  });

  it('run --sandbox on the sample manifest exits 0 with every result; plan, report and a rerun agree', async () => {
    const run = await cli(['run', 'manifests/sample.csv', '--sandbox', '--json', '--no-progress'], {
      cwd: dir,
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const summary = JSON.parse(run.stdout) as { totals: { items: number; succeeded: number } };
    expect(summary.totals.succeeded).toBe(summary.totals.items);
    const out = path.join(dir, 'output/sample');
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8'));
    expect(report.items).toHaveLength(summary.totals.items);
    const html = await readFile(path.join(out, 'report.html'), 'utf8');
    expect(html).toContain('<html');

    const plan = await cli(['plan', 'manifests/sample.csv'], { cwd: dir });
    expect(plan.code).toBe(0);
    expect(plan.stdout).toMatch(/0 to submit/);

    await rm(path.join(out, 'report.json'));
    const rebuilt = await cli(['report', 'output/sample'], { cwd: dir });
    expect(rebuilt.code).toBe(0);
    const again = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8'));
    expect(again.items).toEqual(report.items);
    expect(again.run.totals).toEqual(report.run.totals);
  });

  it('sandbox --port 0 prints its URL and serves the API; styles lists the keys', async () => {
    const child = spawn(process.execPath, ['--import', TSX, BIN, 'sandbox', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, KITCHEN_API_KEY: 'sk_cli_test_key' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    const url = await new Promise<string>((resolve, reject) => {
      let buf = '';
      child.stdout.on('data', (d) => {
        buf += d;
        const line = buf.split('\n')[0];
        if (buf.includes('\n') && line) resolve(line.trim());
      });
      child.on('close', (code) => reject(new Error(`sandbox exited ${code}`)));
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const denied = await fetch(`${url}/v1/styles`);
    expect(denied.status).toBe(401);
    const styles = await cli(['styles', '--base-url', url], { env: { KITCHEN_API_KEY: 'sk_cli_test_key' } });
    expect(styles.code).toBe(0);
    expect(styles.stdout).toContain('scandinavian');
    child.kill('SIGINT');
    await new Promise((r) => child.once('close', r));
  });
});
