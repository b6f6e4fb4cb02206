/**
 * docs/faults.md K.49: a worker's connections to Redis, once Redis has answered, wait for a restart
 * instead of failing the worker; a Redis never reached is exit 3 at once. Against a real redis-server.
 */

import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisUnreachableError } from '../../src/errors.js';
import { openRedis, secondConnection } from '../../src/worker/redis.js';
import { HAS_REDIS, startRedis, type TestRedis } from '../support/redis.js';

describe.skipIf(!HAS_REDIS)('Redis connections across a restart (real redis-server)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('a second connection opened while Redis is down waits for it and then works', async () => {
    const first = await openRedis(redis.url, { blocking: true });
    let second: Redis | undefined;
    try {
      await first.set('kb-test', 'before');
      await redis.restart(async () => {
        second = secondConnection(first);
        // Still down: the connection keeps trying rather than ending.
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(second.status).not.toBe('end');
      });
      expect(await second!.get('kb-test')).toBe('before');
      expect(await first.get('kb-test')).toBe('before');
    } finally {
      second?.disconnect();
      first.disconnect();
    }
  }, 30_000);

  it('a Redis never reached is RedisUnreachableError, naming the server', async () => {
    const url = `redis://127.0.0.1:${redis.port + 1}`;
    await expect(openRedis(url, { timeoutMs: 2000 })).rejects.toThrow(RedisUnreachableError);
    await expect(openRedis(url, { timeoutMs: 2000 })).rejects.toThrow(`cannot reach Redis at ${url}`);
  });
});
