/**
 * Issue 29, item 7a: a Redis that refuses the password is told apart from one that cannot be reached,
 * for every worker-mode command, against a real `redis-server --requirepass`. The password (right or
 * wrong) never shows: the URL is printed with `***` in its place.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/errors.js';
import { HAS_REDIS, startRedis, type TestRedis } from '../support/redis.js';
import { catalogue, cli } from './world.js';

const PASSWORD = 'right-s3cret-horse';
const WRONG = 'wrong-s3cret-battery';

describe.skipIf(!HAS_REDIS)('Redis that refuses the credentials (real redis-server --requirepass)', () => {
  let redis: TestRedis;
  let c: Awaited<ReturnType<typeof catalogue>>;
  beforeAll(async () => {
    redis = await startRedis({ password: PASSWORD });
    c = await catalogue(1);
  });
  afterAll(async () => {
    await redis?.stop();
    await c?.remove();
  });

  const urls = () => ({
    wrong: `redis://:${WRONG}@127.0.0.1:${redis.port}`,
    wrongUser: `redis://someone:${WRONG}@127.0.0.1:${redis.port}`,
    missing: `redis://127.0.0.1:${redis.port}`,
  });
  /** Every worker-mode command against `url`; the worker is given a service so only Redis can fail. */
  const commands = (url: string): string[][] => [
    ['enqueue', c.manifest, '--redis', url, '--out', c.out],
    ['status', '--redis', url],
    ['report', '--redis', url],
    ['worker', '--redis', url, '--until-drained'],
  ];
  const service = { KITCHEN_API_KEY: 'k', KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' };

  it('a wrong password: exit 3, "refused the password", the URL redacted, never "cannot reach"', async () => {
    for (const [kind, url] of [
      ['wrong', urls().wrong],
      ['wrong user', urls().wrongUser],
    ] as const) {
      for (const args of commands(url)) {
        const what = `${kind}: ${args[0]}`;
        const result = await cli(args, service);
        expect(result.code, what).toBe(EXIT.service);
        expect(result.stderr, what).not.toMatch(/cannot reach|lost Redis/);
        expect(result.stderr, what).toMatch(
          /Redis at redis:\/\/(someone)?:\*\*\*@127\.0\.0\.1:\d+ refused the password \(WRONGPASS\)/,
        );
        expect(result.stderr + result.stdout, what).not.toContain(WRONG);
        expect(result.stderr + result.stdout, what).not.toContain(PASSWORD);
      }
    }
  });

  it('no password where one is required: exit 3, "requires a password", naming where it goes', async () => {
    for (const args of commands(urls().missing)) {
      const result = await cli(args, service);
      expect(result.code, args[0]).toBe(EXIT.service);
      expect(result.stderr, args[0]).not.toMatch(/cannot reach|lost Redis/);
      expect(result.stderr, args[0]).toContain(
        `Redis at redis://127.0.0.1:${redis.port} requires a password (NOAUTH)`,
      );
      expect(result.stderr, args[0]).toContain('redis://:PASSWORD@host:port');
    }
  });

  it('--json carries the stable code redis_auth_failed', async () => {
    const status = await cli(['status', '--redis', urls().wrong, '--json']);
    expect(status.code).toBe(EXIT.service);
    expect(JSON.parse(status.stdout)).toMatchObject({ exit_code: 3, error: { code: 'redis_auth_failed' } });
    expect(status.stdout).not.toContain(WRONG);
  });

  it('the right password works (the helper and the commands agree)', async () => {
    const result = await cli(['status', '--redis', redis.url]);
    expect(result.code).toBe(0);
    expect(result.stderr + result.stdout).not.toContain(PASSWORD);
  });
});
