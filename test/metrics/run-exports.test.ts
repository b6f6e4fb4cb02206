/**
 * `run --pushgateway / --metrics-file / --ping-url` against real servers: Debian's pushgateway
 * binary on a free port, promtool for the textfile, and a node http server recording pings.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { killAllClis, REPO_ROOT, runCli, spawnCli, waitFor } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';
import { freePort } from '../support/ports.js';

const PUSHGATEWAY = '/usr/bin/prometheus-pushgateway';
const PROMTOOL = '/usr/bin/promtool';
const API_KEY = 'sk_metrics_test_secret_7f3a';

const tmp = useTempDir('kb-metrics-', 'suite');
afterEach(killAllClis);
beforeAll(async () => {
  await cp(path.join(REPO_ROOT, 'manifests'), tmp.file('manifests'), { recursive: true });
  // One good row and one whose image is not there: rejected, exit 1.
  const sample = (await readFile(tmp.file('manifests/sample.csv'), 'utf8')).split('\n');
  await writeFile(
    tmp.file('manifests/bad.csv'),
    `${sample[0]}\n${sample[1]}\nmissing,images/not-there.jpg,change-style,scandinavian,,\n`,
  );
});

/** A ping server recording each request's path and headers. */
async function pingServer(): Promise<{ url: string; seen: string[]; raw: string[]; server: Server }> {
  const seen: string[] = [];
  const raw: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    raw.push(`${req.url} ${JSON.stringify(req.headers)}`);
    res.end('OK');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/ping/abc`, seen, raw, server };
}

const runArgs = (manifest: string, out: string, more: string[]) => [
  'run',
  manifest,
  '--sandbox',
  '--no-progress',
  '--json',
  '--out',
  out,
  ...more,
];
const env = { KITCHEN_API_KEY: API_KEY };

/** The value of one series in text format (`name{labels} value`), or undefined. */
function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1).split(' ')[0]);
}

describe.skipIf(!existsSync(PUSHGATEWAY))('run --pushgateway (real pushgateway)', () => {
  let gateway: ChildProcess;
  let base = '';
  beforeAll(async () => {
    const port = await freePort();
    gateway = spawn(PUSHGATEWAY, [`--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
    base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/-/ready`).catch(() => null))?.ok, {
      what: 'the pushgateway ready',
      timeoutMs: 20_000,
    });
  });
  afterAll(() => {
    if (gateway.pid) process.kill(gateway.pid, 'SIGKILL');
  });

  it('pushes items and submissions equal to report.json; a failed run keeps the last success; no key', async () => {
    const grouping = ['--pushgateway', base, '--metrics-label', 'catalogue=sample'];
    const ok = await runCli(runArgs('manifests/sample.csv', 'out-ok', grouping), {
      cwd: tmp.dir,
      env,
      timeoutMs: 90_000,
    });
    expect(ok.code, ok.stderr).toBe(0);
    const totals = JSON.parse(ok.stdout).totals;
    const first = await (await fetch(`${base}/metrics`)).text();
    const group = 'catalogue="sample",instance="",job="kitchen-batch"';
    const items = (outcome: string, code: string, text: string) =>
      value(
        text,
        `kitchen_batch_items_total{${group.replace('instance=""', `code="${code}",instance=""`)},outcome="${outcome}"}`,
      );
    expect(items('succeeded', '', first)).toBe(totals.succeeded);
    expect(value(first, `kitchen_batch_submissions_total{${group}}`)).toBe(totals.items);
    const success = value(first, `kitchen_batch_last_success_timestamp_seconds{${group}}`);
    expect(success).toBeGreaterThan(0);
    expect(first).toContain('kitchen_batch_build_info{');
    // Every request of the run, by endpoint and answer, adds up to report.json's count.
    const stats = JSON.parse(ok.stdout).stats;
    expect(sum(first, 'kitchen_batch_api_requests_total{', 'job="kitchen-batch"')).toBe(stats.requests);
    expect(sum(first, 'kitchen_batch_api_requests_total{', 'endpoint="submit"')).toBe(totals.items);

    const bad = await runCli(runArgs('manifests/bad.csv', 'out-bad', grouping), {
      cwd: tmp.dir,
      env,
      timeoutMs: 90_000,
    });
    expect(bad.code, bad.stderr).toBe(1);
    const second = await (await fetch(`${base}/metrics`)).text();
    expect(value(second, `kitchen_batch_last_success_timestamp_seconds{${group}}`)).toBe(success);
    // The failed run's items replace the first run's (POST replaces the families it pushes).
    const badTotals = JSON.parse(bad.stdout).totals;
    expect(sum(second, 'kitchen_batch_items_total{', 'outcome="rejected"')).toBe(badTotals.rejected);
    expect(sum(second, 'kitchen_batch_items_total{', 'outcome="succeeded"')).toBe(badTotals.succeeded);
    expect(second).not.toContain(API_KEY);
  });

  it('a pushgateway that is down is a warning; the exit code stays 0', async () => {
    const down = `http://127.0.0.1:${await freePort()}`;
    const run = await runCli(runArgs('manifests/sample.csv', 'out-down', ['--pushgateway', down]), {
      cwd: tmp.dir,
      env,
      timeoutMs: 90_000,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`warning: cannot push metrics to ${down}/metrics/job/kitchen-batch`);
    // The same warning is in run.log, as a monitoring_warning line.
    const log = (await readFile(tmp.file('out-down/run.log'), 'utf8')).split('\n').filter(Boolean);
    const warned = log.map((line) => JSON.parse(line) as { event?: string; msg?: string });
    expect(
      warned.some(
        (l) => l.event === 'monitoring_warning' && l.msg?.startsWith(`cannot push metrics to ${down}/`),
      ),
      log.join('\n'),
    ).toBe(true);
  });
});

/** The sum of the series of a family (`prefix`) whose labels include `label`. */
function sum(text: string, prefix: string, label: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(prefix) && l.includes(label))
    .reduce((total, l) => total + Number(l.split(' ').at(-1)), 0);
}

describe('run --metrics-file', () => {
  it.skipIf(!existsSync(PROMTOOL))('writes a file promtool check metrics accepts', async () => {
    const file = tmp.file('run.prom');
    const run = await runCli(runArgs('manifests/sample.csv', 'out-file', ['--metrics-file', file]), {
      cwd: tmp.dir,
      env,
      timeoutMs: 90_000,
    });
    expect(run.code, run.stderr).toBe(0);
    const text = await readFile(file, 'utf8');
    expect(value(text, 'kitchen_batch_submissions_total')).toBe(9);
    expect(value(text, 'kitchen_batch_last_success_timestamp_seconds')).toBeGreaterThan(0);
    const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
    expect(text).not.toContain(API_KEY);
  });
});

describe('run --ping-url', () => {
  it('pings /start and /<exit code> for a run that succeeds (0), fails (1) and is interrupted (130)', async () => {
    const ping = await pingServer();
    try {
      const ok = await runCli(runArgs('manifests/sample.csv', 'out-p0', ['--ping-url', ping.url]), {
        cwd: tmp.dir,
        env,
        timeoutMs: 90_000,
      });
      expect(ok.code, ok.stderr).toBe(0);
      const bad = await runCli(runArgs('manifests/bad.csv', 'out-p1', []), {
        cwd: tmp.dir,
        env: { ...env, KITCHEN_PING_URL: ping.url },
        timeoutMs: 90_000,
      });
      expect(bad.code, bad.stderr).toBe(1);
      expect(ping.seen).toEqual([
        'GET /ping/abc/start',
        'GET /ping/abc/0',
        'GET /ping/abc/start',
        'GET /ping/abc/1',
      ]);
      const cli = spawnCli(runArgs('manifests/sample.csv', 'out-p130', ['--ping-url', ping.url]), {
        cwd: tmp.dir,
        env,
      });
      await waitFor(() => ping.seen.length === 5, { what: 'the start ping', timeoutMs: 45_000 });
      cli.kill('SIGINT');
      const stopped = await cli.exited;
      expect(stopped.code, stopped.stderr).toBe(130);
      expect(ping.seen.slice(4)).toEqual(['GET /ping/abc/start', 'GET /ping/abc/130']);
      expect(ping.raw.join('\n')).not.toContain(API_KEY);
    } finally {
      ping.server.close();
    }
  });
});
