/**
 * Worker mode, first part (issue 13): `enqueue` and `status` against a real Redis (redis-server on a
 * free loopback port, AOF on, stopped by PID).
 */
import { appendFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { EXIT, RedisUnreachableError } from '../../src/errors.js';
import { BULL_QUEUE, DEFAULT_KEYS } from '../../src/worker/queue.js';
import { withRedis } from '../../src/worker/redis.js';
import { kitchenJpeg } from '../support/images.js';
import { HAS_REDIS, startRedis, type TestRedis } from '../support/redis.js';
import { catalogue, cli, useRedis } from './world.js';

let redis: TestRedis;

describe.skipIf(!HAS_REDIS)('enqueue and status (real Redis)', () => {
  redis = useRedis();

  it('adds one job per item; enqueueing again adds nothing; new rows add only themselves', async () => {
    const c = await catalogue(6);
    const first = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({
      items: 6,
      added: 6,
      already_queued: 0,
      already_done: 0,
    });
    const again = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ items: 6, added: 0, already_queued: 6 });
    await c.add(6, 9);
    const grown = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out]);
    expect(grown.code).toBe(0);
    expect(grown.stdout).toMatch(/9 items .*: 3 added, 6 already queued, 0 already done/);
    // The jobs carry the planned rows, keyed by fingerprint and id.
    const status = await cli(['status', '--json'], { KITCHEN_REDIS_URL: redis.url });
    expect(JSON.parse(status.stdout)).toMatchObject({ items: 9, out: c.out, counts: { waiting: 9 } });
  });

  it('a finished job counts as done; a changed image is a new item and replaces its waiting job', async () => {
    const c = await catalogue(3);
    await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out]);
    // Finish one job as a worker would (BullMQ's manual processing: take it, complete it).
    const worker = new Worker(BULL_QUEUE, null, {
      prefix: DEFAULT_KEYS.prefix,
      connection: { url: redis.url },
      autorun: false,
    });
    const job = await worker.getNextJob('test-token');
    expect(job?.data.id).toBe('k0__modern');
    await job!.moveToCompleted('done', 'test-token', false);
    await worker.close();
    await writeFile(path.join(c.dir, 'images/k2.jpg'), await kitchenJpeg(99, 160, 120, 'tinted'));
    const again = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({
      items: 3,
      added: 1,
      already_done: 1,
      already_queued: 1,
      replaced: 1,
    });
    const status = await cli(['status', '--redis', redis.url, '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ items: 3, counts: { waiting: 2, completed: 1 } });
  });

  it('rejected rows and unreadable images are named and not queued (exit 1); the rest are', async () => {
    const c = await catalogue(2);
    await appendFile(
      c.manifest,
      'k9,images/missing.jpg,change-style,modern\nk10,images/k0.jpg,no-such-module,\n',
    );
    const result = await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out, '--json']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ items: 4, added: 2, rejected: 2 });
    expect(result.stderr).toMatch(
      /catalogue\.csv:4: k9__modern: cannot read images\/missing\.jpg \(ENOENT\)/,
    );
    expect(result.stderr).toMatch(/catalogue\.csv:5: k10: /);
  });

  it('one run per queue: another --out into the same queue is refused, naming the folder and --queue; another queue takes it', async () => {
    const c = await catalogue(1);
    await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out]);
    const other = await cli([
      'enqueue',
      c.manifest,
      '--redis',
      redis.url,
      '--out',
      path.join(c.dir, 'elsewhere'),
    ]);
    expect(other.code).toBe(EXIT.usage);
    expect(other.stderr).toContain(
      `queue kitchen-batch at ${redis.url} already holds the run whose output folder is ${c.out}`,
    );
    expect(other.stderr).toContain('give another run its own --queue NAME');
    const otherQueue = await cli([
      'enqueue',
      c.manifest,
      '--redis',
      redis.url,
      '--queue',
      'other',
      '--out',
      path.join(c.dir, 'elsewhere'),
    ]);
    expect(otherQueue.code, otherQueue.stderr).toBe(0);
    const otherDb = await cli([
      'enqueue',
      c.manifest,
      '--redis',
      `${redis.url}/1`,
      '--out',
      path.join(c.dir, 'elsewhere'),
    ]);
    expect(otherDb.code).toBe(0);
  });

  it('status names the run and counts; without a run it says so', async () => {
    const empty = await cli(['status', '--redis', redis.url]);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toContain('no run enqueued here yet');
    const c = await catalogue(2);
    await cli(['enqueue', c.manifest, '--redis', redis.url, '--out', c.out]);
    const status = await cli(['status', '--redis', redis.url]);
    expect(status.stdout).toContain(`→ ${c.out}`);
    expect(status.stdout).toContain('items: 2: 2 waiting');
    expect(status.stdout).toContain('workers: none connected');
  });
});

describe.skipIf(!HAS_REDIS)("Redis's own settings", () => {
  it('enqueue and status warn when AOF is off (a restart would lose the queue), and not when it is on', async () => {
    const bare = await startRedis({ aof: false });
    try {
      const c = await catalogue(1);
      const result = await cli(['enqueue', c.manifest, '--redis', bare.url, '--out', c.out]);
      expect(result.code).toBe(0);
      expect(result.stderr).toContain(`warning: Redis at ${bare.url} runs without AOF (appendonly no)`);
      expect((await cli(['status', '--redis', bare.url])).stderr).toContain('runs without AOF');
      const good = await startRedis();
      try {
        expect((await cli(['status', '--redis', good.url])).stderr).toBe('');
      } finally {
        await good.stop();
      }
    } finally {
      await bare.stop();
    }
  });
});

describe.skipIf(!HAS_REDIS)('Redis lost while a command runs', () => {
  it('is exit 3 (RedisUnreachableError naming the server), not an unexpected error', async () => {
    const lost = await startRedis();
    try {
      const failure = withRedis(lost.url, async (connection) => {
        await connection.set('before', '1');
        await lost.stop();
        return connection.get('before');
      });
      await expect(failure).rejects.toBeInstanceOf(RedisUnreachableError);
      await expect(failure).rejects.toThrow(`lost Redis at ${lost.url}`);
    } finally {
      await lost.stop();
    }
  });
});

describe('Redis that cannot be reached, or is not named', () => {
  it('exit 3 with the server named and its password hidden', async () => {
    const c = await catalogue(1);
    const result = await cli([
      'enqueue',
      c.manifest,
      '--redis',
      'redis://user:s3cret@127.0.0.1:1',
      '--out',
      c.out,
    ]);
    expect(result.code).toBe(EXIT.service);
    expect(result.stderr).toMatch(/cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:1/);
    expect(result.stderr).not.toContain('s3cret');
    const status = await cli(['status', '--json'], { KITCHEN_REDIS_URL: 'redis://127.0.0.1:1' });
    expect(status.code).toBe(EXIT.service);
    expect(JSON.parse(status.stdout)).toMatchObject({ exit_code: 3, error: { code: 'redis_unreachable' } });
  });

  it('no --redis and no KITCHEN_REDIS_URL, or not a redis:// URL: exit 2', async () => {
    expect((await cli(['status'])).code).toBe(EXIT.usage);
    const wrong = await cli(['status', '--redis', 'http://127.0.0.1:6379']);
    expect(wrong.code).toBe(EXIT.usage);
    expect(wrong.stderr).toContain('expected a redis:// or rediss:// URL');
  });
});
