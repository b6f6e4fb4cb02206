/**
 * Many runs on one Redis (issue 34, `--queue NAME`): two manifests enqueued in two queues of one
 * Redis, worked at once by workers of each queue under one API key at one sandbox. Each run ends
 * complete and apart (its report, its results, its states), the two draw from the key's one shared
 * rate, `status` lists both, and every key the runs wrote carries its queue's hash tag (or the key
 * fingerprint's, for the shared rate): ready for Redis Cluster.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { LEGACY_RUN_KEY, queueKeys } from '../../src/worker/queue.js';
import { killAllClis, spawnCli } from '../helpers/cli.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';
import { allFiles } from '../helpers/tmp.js';
import { HAS_REDIS, type TestRedis } from '../support/redis.js';
import { catalogue, cli, exitOf, useRedis } from './world.js';

let redis: TestRedis;
const cleanups: Array<() => Promise<void>> = [];

/** A catalogue of `n` items whose ids start with `prefix` (`<prefix><i>__modern`). */
async function namedCatalogue(n: number, prefix: string) {
  const c = await catalogue(n);
  cleanups.push(c.remove);
  const text = await readFile(c.manifest, 'utf8');
  await writeFile(c.manifest, text.replace(/^k(\d+),/gm, `${prefix}$1,`));
  return { ...c, ids: Array.from({ length: n }, (_, i) => `${prefix}${i}__modern`) };
}

/** Every key in the Redis (SCAN). */
async function allKeys(client: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await client.scan(cursor, 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0');
  return keys;
}

describe.skipIf(!HAS_REDIS)('many runs on one Redis (--queue)', () => {
  redis = useRedis();
  afterEach(async () => {
    await killAllClis();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('two queues run two manifests at once: each complete and apart, one rate for the key, status lists both, every key hash-tagged', async () => {
    const N = 16;
    const RATE = 6;
    const key = canaryKey();
    const sandbox = await sandboxForTest({ apiKey: key, processingMs: 600, jitterMs: 200, queuedMs: 50 });
    sandbox.setFaults({ rateLimit: { rps: RATE, burst: RATE } });
    const a = await namedCatalogue(N, 'a');
    const b = await namedCatalogue(N, 'b');
    // Queue a by the flag, queue b by KITCHEN_QUEUE.
    const enqueuedA = await cli([
      'enqueue',
      a.manifest,
      '--redis',
      redis.url,
      '--queue',
      'a',
      '--out',
      a.out,
      '--json',
    ]);
    expect(enqueuedA.code, enqueuedA.stderr).toBe(0);
    expect(JSON.parse(enqueuedA.stdout)).toMatchObject({ queue: 'a', added: N });
    const enqueuedB = await cli(['enqueue', b.manifest, '--redis', redis.url, '--out', b.out, '--json'], {
      KITCHEN_QUEUE: 'b',
    });
    expect(enqueuedB.code, enqueuedB.stderr).toBe(0);
    expect(JSON.parse(enqueuedB.stdout)).toMatchObject({ queue: 'b', added: N });
    // One run per queue: queue a refuses b's folder, and says how to run it beside.
    const clash = await cli(['enqueue', b.manifest, '--redis', redis.url, '--queue', 'a', '--out', b.out]);
    expect(clash.code).toBe(2);
    expect(clash.stderr).toContain(
      `queue a at ${redis.url} already holds the run whose output folder is ${a.out}`,
    );
    expect(clash.stderr).toContain('--queue NAME');

    // Without --queue, status lists both queues with their counts.
    const listed = await cli(['status', '--redis', redis.url, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const list = JSON.parse(listed.stdout);
    expect(list.queues.map((q: { queue: string }) => q.queue)).toEqual(['a', 'b']);
    expect(list.queues[0]).toMatchObject({ queue: 'a', out: a.out, items: N, counts: { waiting: N } });
    expect(list.queues[1]).toMatchObject({ queue: 'b', out: b.out, items: N, counts: { waiting: N } });
    expect(list).not.toHaveProperty('outcomes');
    const text = await cli(['status', '--redis', redis.url]);
    expect(text.stdout).toMatch(
      new RegExp(
        `^  a: ${N} items \\(${N} waiting\\) → ${a.out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, 0 workers$`,
        'm',
      ),
    );
    expect(text.stdout).toMatch(/^queues at .*: 2$/m);

    // Before any worker: queue a's report lists its items as not reached, naming the worker to start.
    const early = await cli(['report', '--redis', redis.url, '--queue', 'a', '--json']);
    expect(early.code, early.stderr).toBe(1);
    const unreached = JSON.parse(await readFile(path.join(a.out, 'report.json'), 'utf8')) as Report;
    expect(unreached.items.map((i) => i.id)).toEqual(a.ids);
    expect(unreached.items[0]!.error).toMatchObject({
      code: 'not_submitted',
      message: 'no worker has reached it yet; start a worker (kitchen-batch worker --redis URL --queue a)',
    });

    // Two workers per queue, all under the one key, at once.
    const env = { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url };
    const worker = (name: string, queue: string) =>
      name.endsWith('1')
        ? spawnCli(['worker', '--redis', redis.url, '--queue', queue, '--name', name, '--until-drained'], {
            env,
          })
        : spawnCli(['worker', '--redis', redis.url, '--name', name, '--until-drained'], {
            env: { ...env, KITCHEN_QUEUE: queue },
          });
    const workers = [worker('a1', 'a'), worker('a2', 'a'), worker('b1', 'b'), worker('b2', 'b')];
    const codes = await Promise.all(workers.map((w) => exitOf(w, 120_000)));
    expect(codes, workers.map((w) => w.stderr()).join('\n')).toEqual([0, 0, 0, 0]);

    // Each run complete and apart: its report holds its items only, its folder its results only.
    const learnt: Array<{ rate: number; estimate: number | null }> = [];
    for (const [queue, c] of [
      ['a', a],
      ['b', b],
    ] as const) {
      const built = await cli(['report', '--redis', redis.url, '--queue', queue, '--json']);
      expect(built.code, built.stdout + built.stderr).toBe(0);
      const report = JSON.parse(await readFile(path.join(c.out, 'report.json'), 'utf8')) as Report;
      expect(report.run.totals).toMatchObject({ items: N, succeeded: N });
      expect(report.items.map((i) => i.id)).toEqual(c.ids);
      expect(report.run.manifest).toBe(c.manifest);
      const results = (await readdir(path.join(c.out, 'results'))).filter((f) => !f.startsWith('.'));
      expect(results.sort()).toEqual(c.ids.map((id) => `${id}.jpg`).sort());
      const one = JSON.parse(
        (await cli(['status', '--redis', redis.url, '--queue', queue, '--json'])).stdout,
      );
      expect(one).toMatchObject({ queue, out: c.out, items: N, outcomes: { succeeded: N } });
      learnt.push(one.rate);
    }
    // Both queues' status show the one rate the key learnt.
    expect(learnt[0]!.estimate).toBeGreaterThan(0);
    expect(learnt[1]).toMatchObject({ rate: learnt[0]!.rate, estimate: learnt[0]!.estimate });
    expect(sandbox.stats.jobs).toBe(2 * N);

    // One rate for the key across both queues: both queues point at the same shared-rate hash, which
    // granted every request of both (two rates of their own would each have granted about half);
    // and the key's limit held: 429s only while the rate was learnt (slow start to the first 429).
    const client = new Redis(redis.url);
    try {
      const rateA = await client.get(queueKeys('a').rate);
      const rateB = await client.get(queueKeys('b').rate);
      expect(rateA).toMatch(/^kb:rate:\{[0-9a-f]{16}\}$/);
      expect(rateB).toBe(rateA);
      const api = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/') && r.path !== '/v1/styles');
      const limited = api.filter((r) => r.status === 429).length;
      const granted = Number(await client.hget(rateA!, 'seq'));
      expect(granted).toBeGreaterThanOrEqual(api.length);
      console.info(
        `[queues] 2 queues × ${N} items, 4 workers, one key at ${RATE} req/s: ${api.length} API requests, ` +
          `${limited} answered 429 (${((100 * limited) / api.length).toFixed(1)} %), ${granted} grants from the one shared rate`,
      );
      // A coarse bound: how many 429s the learning costs varies with the machine's load (3 to 21 % seen
      // on a loaded box with 16 items a queue; 0.8 % over 120 items in worker.test.ts).
      expect(limited / api.length).toBeLessThanOrEqual(0.35);

      // Every key is its queue's (hash tag {a} or {b}) or the key's shared rate (hash tag: its fingerprint).
      const keys = await allKeys(client);
      const strays = keys.filter(
        (k) => !/^kb:\{[ab]\}:/.test(k) && !/^kb:rate:\{[0-9a-f]{16}\}(:grants)?$/.test(k),
      );
      expect(strays).toEqual([]);
      expect(keys.filter((k) => k.startsWith('kb:{a}:jobs:')).length).toBeGreaterThan(N);
    } finally {
      client.disconnect();
    }
    // The key is never in Redis (its AOF holds every write).
    for (const file of await allFiles(redis.dir))
      expect((await readFile(file)).includes(key), file).toBe(false);
  }, 150_000);

  it('a bad queue name: exit 2 naming --queue (or KITCHEN_QUEUE) for every worker-mode command, before Redis', async () => {
    const c = await namedCatalogue(1, 'x');
    // Port 9: nothing listens; a usage error comes first.
    const url = 'redis://127.0.0.1:9';
    const env = { KITCHEN_API_KEY: 'k', KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' };
    for (const bad of ['a b', '{a}', 'a:b', '', 'x'.repeat(65)]) {
      for (const args of [
        ['enqueue', c.manifest, '--redis', url, '--queue', bad],
        ['worker', '--redis', url, '--queue', bad],
        ['status', '--redis', url, '--queue', bad],
        ['report', '--redis', url, '--queue', bad],
      ]) {
        const result = await cli(args, env, c.dir);
        expect(result.code, `${args[0]} ${JSON.stringify(bad)}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toContain(
          `--queue: expected 1 to 64 letters, digits, ".", "_" or "-", got ${JSON.stringify(bad)}`,
        );
      }
    }
    const fromEnv = await cli(['status', '--redis', url], { KITCHEN_QUEUE: 'no/slash' });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('--queue (from KITCHEN_QUEUE): expected');
    const alone = await cli(['report', c.out, '--queue', 'a'], {}, c.dir);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--queue: names a worker run in Redis, so it goes with --redis URL');
  });

  it('a Redis holding a run in the layout before --queue: status says so and that it is not read', async () => {
    const client = new Redis(redis.url);
    await client.set(
      LEGACY_RUN_KEY,
      JSON.stringify({ out: '/old/out', manifest: '/old/m.csv', created_at: 'x' }),
    );
    client.disconnect();
    const text = await cli(['status', '--redis', redis.url]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('no run enqueued here yet');
    expect(text.stderr).toContain('also holds a run (output /old/out) in the key layout before --queue');
    expect(text.stderr).toContain('which this version does not read');
    const json = JSON.parse((await cli(['status', '--redis', redis.url, '--json'])).stdout);
    expect(json).toMatchObject({ queues: [], more: false });
    expect(json.legacy).toContain('/old/out');
    const report = await cli(['report', '--redis', redis.url]);
    expect(report.code).toBe(2);
    expect(report.stderr).toContain('queue kitchen-batch at');
    expect(report.stderr).toContain('in the key layout before --queue');
  });
});
