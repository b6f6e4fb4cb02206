/**
 * The metrics endpoint of `worker` and `run` (`--metrics-port`): Debian's Prometheus scrapes a real
 * worker (a child process) working for a real sandbox through a real Redis, and the values read
 * back through Prometheus's HTTP API are compared with what the sandbox and the report counted;
 * `promtool check metrics` on `/metrics`; the probes' rules (`/readyz` 503 from SIGTERM on while
 * `/livez` answers, `/livez` 503 once Redis has been gone longer than its limit).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer as createNetServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import { type CliProcess, killAllClis, runCli, spawnCli, waitFor } from '../helpers/cli.js';
import { canaryKey, QUICK_JOBS, sandboxForTest } from '../helpers/sandbox.js';
import { tempDir } from '../helpers/tmp.js';
import { freePort } from '../support/ports.js';
import { HAS_REDIS } from '../support/redis.js';
import { catalogue, cli, exitOf, itemStates, useRedis } from '../worker/world.js';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const cleanups: Array<() => Promise<void>> = [];

/** The endpoint's base URL, from the line the command prints when it listens. */
async function endpointOf(child: CliProcess): Promise<string> {
  const match = await waitFor(() => /metrics: serving (http:\/\/[^/]+)\/metrics/.exec(child.stderr()), {
    what: `the metrics endpoint's address in:\n${child.stderr()}`,
    // A CLI child starts in about 2 s; on a loaded machine it was seen to take over 30 s.
    timeoutMs: 90_000,
  });
  return match[1]!;
}

async function get(url: string): Promise<{ status: number; body: string; type: string }> {
  const response = await fetch(url);
  return {
    status: response.status,
    body: await response.text(),
    type: response.headers.get('content-type') ?? '',
  };
}

/** The value of one series in text format (`name{labels} value`), or undefined. */
function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1).split(' ')[0]);
}

/** Requests the sandbox answered, by method, path prefix and status. */
function answered(sandbox: Sandbox, method: string, prefix: string, status: (s: number) => boolean): number {
  return sandbox.stats.requests.filter(
    (r) => r.method === method && r.path.startsWith(prefix) && status(r.status),
  ).length;
}

/** A Prometheus scraping `target` every second, with temp config and storage; its query API. */
async function prometheus(target: string) {
  const dir = await tempDir('kb-prom-');
  cleanups.push(dir.remove);
  await writeFile(
    dir.file('prometheus.yml'),
    `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kitchen-batch\n    static_configs:\n      - targets: ['${target}']\n`,
  );
  const port = await freePort();
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${dir.file('prometheus.yml')}`,
      `--storage.tsdb.path=${dir.file('data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  cleanups.push(async () => {
    child.kill('SIGKILL');
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/-/ready`).catch(() => null))?.ok, {
    what: 'Prometheus ready',
    timeoutMs: 30_000,
    intervalMs: 200,
  });
  /** One instant query's samples: labels and value. */
  const query = async (promql: string) => {
    const response = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const json = (await response.json()) as {
      status: string;
      data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
    };
    expect(json.status, promql).toBe('success');
    return json.data.result.map((r) => ({ metric: r.metric, at: r.value[0], value: Number(r.value[1]) }));
  };
  return { query };
}

describe.skipIf(!HAS_REDIS)('the metrics endpoint (real Redis, worker and run as child processes)', () => {
  const redis = useRedis();
  afterEach(async () => {
    await killAllClis();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  /** A sandbox, `n` items enqueued, and a worker with `--metrics-port 0` to start. */
  async function world(n: number, sandboxOptions: Parameters<typeof sandboxForTest>[0] = QUICK_JOBS) {
    const key = canaryKey();
    const sandbox = await sandboxForTest({ apiKey: key, ...sandboxOptions });
    const c = await catalogue(n);
    cleanups.push(c.remove);
    const enqueued = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const env = { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url };
    const worker = (extra: string[] = [], more: Record<string, string> = {}) =>
      spawnCli(['worker', '--redis', redis.url, '--name', 'w1', '--metrics-port', '0', ...extra], {
        env: { ...env, ...more },
      });
    return { key, sandbox, c, worker, env };
  }

  it.skipIf(!existsSync(PROMETHEUS))(
    'Prometheus scrapes a worker: items, submissions and polls read back through its API equal what the sandbox and the report counted',
    async () => {
      const N = 6;
      const w = await world(N);
      const worker = w.worker(['--concurrency', '3']);
      const base = await endpointOf(worker);
      const prom = await prometheus(base.replace('http://', ''));
      await waitFor(
        async () =>
          [...(await itemStates(redis.url)).values()].filter((s) => s.phase === 'downloaded').length === N,
        {
          what: `${N} items downloaded:\n${worker.stderr()}`,
          timeoutMs: 60_000,
          intervalMs: 200,
        },
      );
      // The worker's counters move when an item ends; a scrape that began after the last one has them.
      const doneAt = Date.now() / 1000 + 0.5;
      await waitFor(async () => (await prom.query('kitchen_batch_build_info')).some((s) => s.at > doneAt), {
        what: 'a scrape after the work',
        timeoutMs: 20_000,
        intervalMs: 250,
      });
      await new Promise((resolve) => setTimeout(resolve, 2500));
      const one = async (promql: string) => {
        const samples = await prom.query(promql);
        expect(samples.length, promql).toBe(1);
        return samples[0]!.value;
      };
      const report = await cli(['report', '--redis', redis.url, '--json']);
      expect(report.code, report.stderr).toBe(0);
      const totals = (JSON.parse(report.stdout) as { totals: { succeeded: number } }).totals;
      expect(totals.succeeded).toBe(N);
      expect(await one('kitchen_batch_items_total{outcome="succeeded"}')).toBe(totals.succeeded);
      // Every accepted POST is one submission; every GET of a job one poll.
      const accepted = answered(w.sandbox, 'POST', '/v1/modules/', (s) => s === 202);
      expect(accepted).toBe(w.sandbox.stats.jobs);
      expect(await one('kitchen_batch_api_requests_total{endpoint="submit",status="2xx"}')).toBe(accepted);
      expect(await one('kitchen_batch_submissions_total')).toBe(accepted);
      expect(await one('kitchen_batch_jobs_in_flight')).toBe(0);
      expect(await one('kitchen_batch_job_duration_seconds_count')).toBe(N);
      expect(await one('sum(kitchen_batch_api_requests_total{endpoint="poll"})')).toBe(
        answered(w.sandbox, 'GET', '/v1/jobs/', (s) => s > 0),
      );
      // Each result is staged once in the output folder; every source was read from a local file.
      expect(await one('kitchen_batch_store_requests_total{store="output",kind="file",op="stage"}')).toBe(N);
      expect(
        await one('sum(kitchen_batch_store_requests_total{store="source",kind="file"})'),
      ).toBeGreaterThanOrEqual(N);
      expect(await prom.query('kitchen_batch_store_errors_total')).toEqual([]);
      expect(await one('kitchen_batch_queue_jobs{queue="kitchen-batch",state="waiting"}')).toBe(0);
      expect(await one('kitchen_batch_queue_jobs{queue="kitchen-batch",state="active"}')).toBe(0);
      expect(await one('kitchen_batch_queue_oldest_waiting_age_seconds')).toBe(0);
      expect(await one('up{job="kitchen-batch"}')).toBe(1);

      // The endpoint's own text passes promtool's lint and carries prom-client's content type.
      const metrics = await get(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.type).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(metrics.body.includes(w.key)).toBe(false);
      if (existsSync(PROMTOOL)) {
        const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: metrics.body, encoding: 'utf8' });
        expect(check.status, check.stdout + check.stderr).toBe(0);
      }
      worker.kill('SIGTERM');
      expect(await exitOf(worker)).toBe(130);
    },
    150_000,
  );

  it('the queue gauges count the waiting and the active jobs, and the oldest waiting job has an age', async () => {
    const w = await world(4, { processingMs: 30_000, jitterMs: 0, queuedMs: 50 });
    const worker = w.worker(['--concurrency', '1']);
    const base = await endpointOf(worker);
    await waitFor(() => w.sandbox.stats.jobs === 1, {
      what: '1 job submitted',
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const text = (await get(`${base}/metrics`)).body;
    expect(value(text, 'kitchen_batch_queue_jobs{queue="kitchen-batch",state="waiting"}')).toBe(3);
    expect(value(text, 'kitchen_batch_queue_jobs{queue="kitchen-batch",state="active"}')).toBe(1);
    expect(value(text, 'kitchen_batch_queue_jobs{queue="kitchen-batch",state="failed"}')).toBe(0);
    expect(
      value(text, 'kitchen_batch_queue_oldest_waiting_age_seconds{queue="kitchen-batch"}'),
    ).toBeGreaterThan(0);
    // The accepted job is a paid submission in flight (once the worker has its 202).
    const metrics = await waitFor(
      async () => {
        const body = (await get(`${base}/metrics`)).body;
        return value(body, 'kitchen_batch_jobs_in_flight') === 1 ? body : null;
      },
      { what: 'the job in flight in the metrics', timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(value(metrics, 'kitchen_batch_submissions_total')).toBe(1);
  }, 150_000);

  it('/readyz answers 503 from SIGTERM on while /livez still answers 200, during the grace for jobs in flight', async () => {
    const w = await world(3, { processingMs: 20_000, jitterMs: 0, queuedMs: 50 });
    // Every answer takes 8 s: a submission is in flight when SIGTERM comes, and the grace waits for it.
    w.sandbox.setFaults({ slowMs: 8000 });
    const worker = w.worker(['--grace', '30']);
    const base = await endpointOf(worker);
    await waitFor(() => w.sandbox.stats.requests.some((r) => r.method === 'POST' && r.status === 0), {
      what: 'a submission in flight',
      timeoutMs: 60_000,
      intervalMs: 50,
    });
    expect((await get(`${base}/readyz`)).status).toBe(200);
    expect(await get(`${base}/livez`)).toMatchObject({ status: 200, body: 'ok\n' });
    worker.kill('SIGTERM');
    const ready = await waitFor(
      async () => {
        const r = await get(`${base}/readyz`);
        return r.status === 503 ? r : null;
      },
      { what: '/readyz 503 after SIGTERM', timeoutMs: 10_000, intervalMs: 20 },
    );
    expect(ready.body).toBe('stopping\n');
    expect(worker.exitedYet()).toBe(false);
    expect((await get(`${base}/livez`)).status).toBe(200);
    expect(await exitOf(worker, 90_000)).toBe(130);
  }, 150_000);

  it('run --metrics-port serves /metrics, /livez and /readyz while the run goes; a port in use is exit 2 naming host:port', async () => {
    const key = canaryKey();
    const sandbox = await sandboxForTest({ apiKey: key, processingMs: 3000, jitterMs: 0, queuedMs: 50 });
    const c = await catalogue(2);
    cleanups.push(c.remove);
    const env = { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url };
    const run = spawnCli(
      ['run', c.manifest, '--out', c.out, '--no-progress', '--json', '--metrics-port', '0'],
      { env },
    );
    const base = await endpointOf(run);
    // The run counts a submission when its 202 arrives, just after the sandbox counts the job.
    const metrics = await waitFor(
      async () => {
        const m = await get(`${base}/metrics`);
        return value(m.body, 'kitchen_batch_submissions_total') === 2 ? m : null;
      },
      { what: '2 submissions in /metrics', timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(metrics.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sandbox.stats.jobs).toBe(2);
    expect(await get(`${base}/livez`)).toMatchObject({ status: 200 });
    expect(await get(`${base}/readyz`)).toMatchObject({ status: 200 });
    expect((await get(`${base}/nothing`)).status).toBe(404);
    expect((await run.exited).code).toBe(0);
    // Closed at exit.
    await expect(fetch(`${base}/livez`)).rejects.toThrow();
    // A port in use: refused before any work.
    const holder = createNetServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as { port: number };
    try {
      const busy = await runCli(['run', c.manifest, '--out', `${c.out}-2`, '--metrics-port', String(port)], {
        env,
      });
      expect(busy.code).toBe(2);
      expect(busy.stderr).toContain(`127.0.0.1:${port}`);
      expect(sandbox.stats.jobs).toBe(2);
    } finally {
      holder.close();
    }
  }, 150_000);
  it('/livez answers 503 naming Redis once Redis has been gone longer than its limit; /metrics still answers', async () => {
    // Nothing enqueued: the worker waits for a run, reading Redis every 2 s. The service is a real
    // one: an unreachable service would stop the worker (exit 3) on a machine slow enough.
    const key = canaryKey();
    const sandbox = await sandboxForTest({ apiKey: key });
    const worker = spawnCli(['worker', '--redis', redis.url, '--metrics-port', '0'], {
      env: { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url, KITCHEN_LIVEZ_REDIS_SECONDS: '1' },
    });
    const base = await endpointOf(worker);
    try {
      expect((await get(`${base}/livez`)).status).toBe(200);
      // The endpoint is up before the worker's first answer from Redis; a worker that first meets
      // Redis while it is down rightly exits 3 (seen on a loaded machine). The queue's figures show
      // once it has connected.
      await waitFor(async () => (await get(`${base}/metrics`)).body.includes('kitchen_batch_queue_jobs{'), {
        what: "the worker connected to Redis (the queue's figures in /metrics)",
        timeoutMs: 20_000,
        intervalMs: 100,
      });
      // Checked while Redis is stopped; it comes back on the same port and data afterwards.
      await redis.restart(async () => {
        const down = await waitFor(
          async () => {
            const r = await get(`${base}/livez`);
            return r.status === 503 ? r : null;
          },
          { what: '/livez 503 with Redis stopped', timeoutMs: 20_000, intervalMs: 100 },
        );
        expect(down.body).toMatch(/^Redis unreachable for \d+ s \(limit 1 s\)\n$/);
        // /metrics still answers; a scrape once its cached queue figures are due counts a failed read.
        await waitFor(
          async () => {
            const metrics = await get(`${base}/metrics`);
            expect(metrics.status).toBe(200);
            return (value(metrics.body, 'kitchen_batch_queue_read_errors_total') ?? 0) > 0;
          },
          { what: 'a failed queue read counted in /metrics', timeoutMs: 20_000, intervalMs: 200 },
        );
        expect((await get(`${base}/readyz`)).status).toBe(200);
      });
      await waitFor(async () => (await get(`${base}/livez`)).status === 200, {
        what: '/livez 200 once Redis is back',
        timeoutMs: 20_000,
        intervalMs: 100,
      });
    } catch (error) {
      // If the endpoint is gone ("fetch failed"), what the worker said.
      throw new Error(`${error} (${(error as Error).cause})\nthe worker's stderr:\n${worker.stderr()}`);
    }
  }, 150_000);
});
