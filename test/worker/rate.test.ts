/**
 * The shared rate (src/worker/rate.ts) against a real Redis: two limiters stand for two workers
 * on two machines. A 429 one of them sees pauses the other; the tokens are one bucket for both.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { rateKeys, readSharedRate, SharedRate } from '../../src/worker/rate.js';
import { HAS_REDIS, type TestRedis } from '../support/redis.js';
import { useRedis } from './world.js';

let redis: TestRedis;
const clients: Redis[] = [];

/** The one API key both limiters stand for. */
const KEYS = rateKeys('test-key');

function limiter(options: Partial<ConstructorParameters<typeof SharedRate>[1]> = {}): SharedRate {
  const client = new Redis(redis.url);
  clients.push(client);
  return new SharedRate(client, { keys: KEYS, ...options });
}

describe.skipIf(!HAS_REDIS)('shared rate (real Redis)', () => {
  redis = useRedis();
  afterAll(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });

  it('a 429 seen by one worker pauses the other until its Retry-After; the grant after it is the one probe', async () => {
    const a = limiter({ initialRate: 20 });
    const b = limiter({ initialRate: 20 });
    const ticket = await a.acquire('submit');
    a.onRateLimited(1500, 1000, ticket);
    // The pause reaches Redis with the 429's report; b has not seen it yet.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    await b.acquire('poll');
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(1300);
    const shared = await readSharedRate(clients[0]!, KEYS.rate);
    expect(shared?.estimate).not.toBeNull();
    a.close(new Error('done'));
    b.close(new Error('done'));
  });

  it('two workers draw from one bucket: together they get the rate, not twice it', async () => {
    const a = limiter({ initialRate: 5, maxRate: 5 });
    const b = limiter({ initialRate: 5, maxRate: 5 });
    const started = performance.now();
    let granted = 0;
    const deadline = started + 2000;
    const drain = async (l: SharedRate) => {
      while (performance.now() < deadline) {
        await l.acquire('submit');
        granted++;
      }
    };
    await Promise.all([drain(a), drain(b)]);
    // 2 s at 5/s plus the bucket's 2 tokens, and the last grant of each loop that began before the deadline.
    expect(granted).toBeLessThanOrEqual(2 * 5 + 2 + 2);
    expect(granted).toBeGreaterThanOrEqual(8);
    a.close(new Error('done'));
    b.close(new Error('done'));
  });
});
