/**
 * The preflight's own bound on remote reads (`sourceConcurrency`), apart from the sharp pool
 * (`concurrency`), and what happens to a spooled source when its callers give up or the preflighter
 * closes. A real source server on 127.0.0.1 holds answers back until the test lets them go.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import type http from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPreflighter } from '../../src/preflight/index.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import { type TempDir, tempDirForTest } from '../helpers/tmp.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';

let server: SourceServer;
let sources: Sources;
let tmp: TempDir;
let image: Buffer;
/** Answers held back by `/held/*` routes, released by the test. */
let held: Array<() => void>;

beforeEach(async () => {
  server = await new SourceServer().start();
  sources = createSources({ allowPrivate: true, maxBytes: 2_000_000, env: {} });
  tmp = await tempDirForTest('kb-fetch-remote-');
  image = await kitchenJpeg(1, 160, 120);
  held = [];
  for (const name of ['a', 'b', 'c']) {
    server.routes.set(`/held/${name}.jpg`, (_req: http.IncomingMessage, res: http.ServerResponse) => {
      held.push(() => res.end(image));
    });
    server.routes.set(`/now/${name}.jpg`, (_req, res) => res.end(image));
  }
});

afterEach(async () => {
  for (const release of held) release();
  sources.close();
  await server.stop();
});

/** Waits until the server has seen `n` requests (it records them as they arrive). */
async function requests(n: number): Promise<void> {
  while (server.requests.length < n) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('remote reads have their own bound', () => {
  it('a source waiting on the network holds no slot of the sharp pool', async () => {
    const preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources, concurrency: 1 });
    try {
      const slow = preflighter.prepare(server.url('/held/a.jpg'));
      await requests(1);
      // With one sharp slot, a fetch holding it would keep this one waiting until `slow` is answered.
      const fast = await preflighter.prepare(server.url('/now/a.jpg'));
      expect(fast).toMatchObject({ ok: true, action: 'as-is' });
      expect(held).toHaveLength(1);
      held.shift()?.();
      expect(await slow).toMatchObject({ ok: true });
    } finally {
      await preflighter.close();
    }
  });

  it('sourceConcurrency bounds the fetches in flight: a third source is asked for only when one ends', async () => {
    const preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources, sourceConcurrency: 2 });
    try {
      const all = ['a', 'b', 'c'].map((name) => preflighter.prepare(server.url(`/held/${name}.jpg`)));
      await requests(2);
      // Local work and the sharp pool are free; only the fetch bound keeps the third one back.
      expect(await preflighter.prepare(await tmp.write('local.jpg', image))).toMatchObject({ ok: true });
      expect(server.requests).toHaveLength(2);
      held.shift()?.();
      await requests(3);
      while (held.length > 0) held.shift()?.();
      for (const result of await Promise.all(all)) expect(result).toMatchObject({ ok: true });
    } finally {
      await preflighter.close();
    }
  });

  it('refuses a sourceConcurrency that is not a positive whole number', () => {
    expect(() => createPreflighter({ sourceConcurrency: 0 })).toThrow(/sourceConcurrency/);
  });
});

describe('a spooled source goes when nobody holds it', () => {
  it('every caller aborting gives its hold back: the file is deleted and the next call fetches again', async () => {
    const preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
    try {
      const url = server.url('/now/b.jpg');
      const first = await preflighter.prepare(url);
      const file = first.ok ? first.path : '';
      expect(existsSync(file)).toBe(true);
      const stop = new AbortController();
      const waiting = preflighter.prepare(url, stop.signal);
      stop.abort(new Error('stopped'));
      await expect(waiting).rejects.toThrow('stopped');
      // One hold is left (the first call's): the file stays.
      expect(existsSync(file)).toBe(true);
      await preflighter.release(url);
      expect(existsSync(file)).toBe(false);
      await preflighter.prepare(url);
      expect(server.seen('/now/b.jpg')).toHaveLength(2);
    } finally {
      await preflighter.close();
    }
  });

  it('close deletes every spooled source still held, and local preparations stay cached', async () => {
    const preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
    const remote = await preflighter.prepare(server.url('/now/c.jpg'));
    const local = await preflighter.prepare(await tmp.write('wide.png', await kitchenJpeg(2, 5000, 200)));
    expect(remote.ok && existsSync(remote.path)).toBe(true);
    await preflighter.close();
    expect(remote.ok && existsSync(remote.path)).toBe(false);
    expect(await readdir(tmp.file('.prepared/remote'))).toEqual([]);
    expect(local).toMatchObject({ ok: true, action: 'resized' });
    expect(local.ok && existsSync(local.path)).toBe(true);
  });
});
