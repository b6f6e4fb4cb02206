/** What the worker-mode tests share: a catalogue of real images, the CLI in process, a Redis client. */
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { main } from '../../src/cli.js';
import type { ItemState } from '../../src/state/state.js';
import { DEFAULT_KEYS } from '../../src/worker/queue.js';
import { type CliProcess, textSink } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';
import { startRedis, type TestRedis } from '../support/redis.js';

/**
 * One Redis for the enclosing `describe`: started before its tests, emptied before each, stopped after
 * all. The returned object reads through to the running server (its port stays across a restart).
 */
export function useRedis(): TestRedis {
  let current: TestRedis | undefined;
  beforeAll(async () => {
    current = await startRedis();
  });
  afterAll(async () => {
    await current?.stop();
  });
  beforeEach(async () => {
    const client = new Redis(running().url);
    await client.flushdb();
    client.disconnect();
  });
  const running = () => {
    if (!current) throw new Error('Redis is not started yet (useRedis runs in beforeAll)');
    return current;
  };
  return {
    get url() {
      return running().url;
    },
    get port() {
      return running().port;
    },
    get pid() {
      return running().pid;
    },
    get dir() {
      return running().dir;
    },
    stop: () => running().stop(),
    restart: (whileDown?: () => unknown) => running().restart(whileDown),
  };
}

/** Runs the CLI in this process. */
export async function cli(args: string[], env: NodeJS.ProcessEnv = {}, cwd = process.cwd()) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env, cwd });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** A manifest of `n` kitchens (ids k0.., style modern: items `k<i>__modern`), and a function that appends more rows. */
export async function catalogue(n: number) {
  const tmp = await tempDir('kb-workers-');
  await mkdir(tmp.file('images'));
  const manifest = tmp.file('catalogue.csv');
  const row = async (i: number) => {
    await writeFile(tmp.file(`images/k${i}.jpg`), await kitchenJpeg(i + 1, 160, 120, 'tinted'));
    return `k${i},images/k${i}.jpg,change-style,modern\n`;
  };
  let text = 'id,image,module,style\n';
  for (let i = 0; i < n; i++) text += await row(i);
  await writeFile(manifest, text);
  return {
    dir: tmp.dir,
    manifest,
    out: tmp.file('out'),
    add: async (from: number, to: number) => {
      for (let i = from; i < to; i++) await appendFile(manifest, await row(i));
    },
    remove: () => tmp.remove(),
  };
}

/** Every item's state as the workers wrote it in Redis. */
export async function itemStates(url: string): Promise<Map<string, ItemState>> {
  const client = new Redis(url);
  try {
    const all = await client.hgetall(DEFAULT_KEYS.states);
    return new Map(Object.entries(all).map(([id, text]) => [id, JSON.parse(text) as ItemState]));
  } finally {
    client.disconnect();
  }
}

/** Waits for a worker to exit; its exit code (the test fails with its stderr when it does not exit in time). */
export async function exitOf(worker: CliProcess, timeoutMs = 60_000): Promise<number | null> {
  const result = await Promise.race([
    worker.exited,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`worker did not exit:\n${worker.stderr()}`)), timeoutMs),
    ),
  ]);
  return result.code;
}
