/**
 * Worker mode as a new user drives it (issue 29): two named workers on a real Redis and the sandbox;
 * a row whose style is misspelt and jobs that fail at the service. What must hold: the rejection is in
 * `report --redis` as a rejection, the workers exit 0 once the queue is drained whatever the items'
 * outcomes, `status` names the workers and gives the outcomes beside the queue states, and the failed
 * items go back with `enqueue --retry-failed` (not `worker --retry-failed`, which says where it is).
 */
import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { killAllClis, spawnCli, waitFor } from '../helpers/cli.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';
import { HAS_REDIS, type TestRedis } from '../support/redis.js';
import { catalogue, cli, exitOf, useRedis } from './world.js';

let redis: TestRedis;
const cleanups: Array<() => Promise<void>> = [];

describe.skipIf(!HAS_REDIS)('worker mode as a new user drives it (two workers, real Redis)', () => {
  redis = useRedis();
  afterEach(async () => {
    await killAllClis();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  /**
   * A catalogue of four kitchens and one misspelt style, enqueued; every job fails at the service;
   * two workers `alpha` and `beta` drain the queue. Their names as `status` gave them while they
   * worked, and their exit codes.
   */
  async function failedNight() {
    const key = canaryKey();
    // Jobs of 4 s: both workers stay connected long enough for a `status` (a CLI start, a SCAN of the
    // queues, then the queue's view) to see them on a loaded machine.
    const sandbox = await sandboxForTest({ apiKey: key, processingMs: 4000, jitterMs: 100, queuedMs: 50 });
    const c = await catalogue(4);
    cleanups.push(c.remove);
    await appendFile(c.manifest, 'typo,images/k0.jpg,change-style,scandinavain\n');
    const enqueued = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out]);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const env = { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url };
    const worker = (name: string) =>
      spawnCli(['worker', '--redis', redis.url, '--name', name, '--until-drained'], { env });
    sandbox.setFaults({ failRate: 1 });
    const workers = [worker('alpha'), worker('beta')];
    const named = await waitFor(
      async () => {
        const status = JSON.parse(
          (await cli(['status', '--redis', redis.url, '--queue', 'kitchen-batch', '--json'])).stdout,
        );
        return status.workers.length === 2 ? (status.workers as string[]) : null;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'two workers connected' },
    );
    const codes = await Promise.all(workers.map((w) => exitOf(w)));
    const stderr = workers.map((w) => w.stderr()).join('');
    return { c, sandbox, env, worker, named, codes, stderr };
  }

  /** report.json as `report --redis` writes it, and its exit code. */
  async function redisReport(out: string) {
    const built = await cli(['report', '--redis', redis.url, '--json']);
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
    return { code: built.code, report };
  }

  it('#1 a worker\'s rejection is a rejection in report --redis, not "not submitted yet"', async () => {
    const night = await failedNight();
    expect(night.stderr).toMatch(/rejected +typo__scandinavain: unknown_style/);
    const { code, report } = await redisReport(night.c.out);
    expect(code).toBe(1);
    expect(report.run.totals).toMatchObject({ items: 5, failed: 4, rejected: 1, incomplete: 0 });
    expect(report.items.find((i) => i.id === 'typo__scandinavain')).toMatchObject({
      status: 'rejected',
      error: { code: 'unknown_style' },
    });
  }, 60_000);

  it('#2 enqueue --retry-failed puts the failed items back and workers send them again; worker --retry-failed says where it is', async () => {
    const night = await failedNight();
    const { c, sandbox, env, worker } = night;
    // report.html's advice for a failed item is the worker mode's way to retry it.
    await redisReport(c.out);
    const html = await readFile(path.join(c.out, 'report.html'), 'utf8');
    expect(html).toContain('Enqueue the manifest again with --retry-failed');
    const wrong = await cli(['worker', '--redis', redis.url, '--retry-failed'], env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(
      /unknown option --retry-failed for worker: .*enqueue <manifest> --retry-failed/,
    );
    // Enqueueing again without --retry-failed leaves the failed as they are; with it, they go back.
    const again = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ already_done: 5, retried_failed: 0 });
    sandbox.setFaults({ failRate: 0 });
    const retry = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--retry-failed']);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stdout).toMatch(/1 already done, 4 failed put back \(--retry-failed\)/);
    const second = [worker('gamma'), worker('delta')];
    expect(await Promise.all(second.map((w) => exitOf(w)))).toEqual([0, 0]);
    const { report } = await redisReport(c.out);
    // Deliberate resubmissions of failed jobs are not possible duplicate charges.
    expect(report.run.totals).toMatchObject({ items: 5, succeeded: 4, rejected: 1, possible_duplicates: 0 });
    for (const item of report.items.filter((i) => i.id !== 'typo__scandinavain'))
      expect(item).toMatchObject({ status: 'succeeded', submissions: 2 });
    // Each failed item was sent once more, deliberately: eight jobs in all.
    expect(sandbox.stats.jobs).toBe(8);
  }, 90_000);

  it('#3 worker --until-drained exits 0 once drained although items failed; report --redis exits 1', async () => {
    const night = await failedNight();
    expect(night.codes, night.stderr).toEqual([0, 0]);
    expect(night.stderr).toMatch(/failed +k\d__modern: generation_failed/);
    expect((await redisReport(night.c.out)).code).toBe(1);
  }, 60_000);

  it('#4 status names the workers by --name and gives the outcomes beside the queue states', async () => {
    const night = await failedNight();
    expect(night.named).toEqual(['alpha', 'beta']);
    const text = await cli(['status', '--redis', redis.url]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^items: 5: 5 completed$/m);
    expect(text.stdout).toMatch(/^outcomes: 0 succeeded, 4 failed, 1 rejected, 0 incomplete$/m);
    const json = JSON.parse((await cli(['status', '--redis', redis.url, '--json'])).stdout);
    expect(json).toMatchObject({
      items: 5,
      counts: { completed: 5 },
      outcomes: { succeeded: 0, failed: 4, rejected: 1, incomplete: 0 },
    });
  }, 60_000);
});
