/**
 * Issue 32, worker mode with remote sources: the manifest is at a URL and every image is a URL, so
 * two workers, each in a working folder of its own with no image on its disk, share nothing but
 * Redis and the output folder. `enqueue` reads no image body; the workers fetch what they work on.
 */
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { killAllClis, spawnCli } from '../helpers/cli.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';
import { tempDir } from '../helpers/tmp.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';
import { HAS_REDIS } from '../support/redis.js';
import { cli, exitOf, itemStates, useRedis } from './world.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await killAllClis();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.skipIf(!HAS_REDIS)('worker mode over remote sources (real Redis, source server, workers)', () => {
  const redis = useRedis();

  it('two workers in folders of their own finish a manifest at a URL whose images are URLs; enqueue reads no body', async () => {
    const images = 6;
    const styles = ['modern', 'japandi'];
    const server = await new SourceServer().start();
    cleanups.push(() => server.stop());
    const bodiesServed = new Map<string, number>();
    for (let i = 0; i < images; i++) {
      const body = await kitchenJpeg(i + 11, 160, 120, 'tinted');
      const etag = `"r${i}-v1"`;
      server.routes.set(`/feeds/img/r${i}.jpg`, (req: http.IncomingMessage, res: http.ServerResponse) => {
        const head = { 'Content-Type': 'image/jpeg', 'Content-Length': body.length, ETag: etag };
        if (req.headers['if-none-match'] === etag) {
          res.writeHead(304, { ETag: etag }).end();
          return;
        }
        // The head first, the body a moment later: a reader that drops the body after the head
        // (enqueue's stat) has closed the connection by then, and is not counted.
        res.writeHead(200, head);
        res.flushHeaders();
        setTimeout(() => {
          if (res.destroyed || res.socket?.destroyed) return;
          bodiesServed.set(`r${i}`, (bodiesServed.get(`r${i}`) ?? 0) + 1);
          res.end(body);
        }, 100);
      });
    }
    const rows = Array.from({ length: images }, (_, i) => `img/r${i}.jpg,${styles.join('|')}`);
    server.routes.set('/feeds/nightly.csv', (_req, res) =>
      res.writeHead(200, { 'Content-Type': 'text/csv' }).end(`image,style\n${rows.join('\n')}\n`),
    );
    const key = canaryKey();
    const sandbox = await sandboxForTest({ apiKey: key, processingMs: 300, jitterMs: 100, queuedMs: 50 });
    cleanups.push(() => sandbox.close());
    const shared = await tempDir('kb-remote-out-');
    cleanups.push(() => shared.remove());
    const out = shared.file('out');

    const enqueued = await cli(
      [
        'enqueue',
        server.url('/feeds/nightly.csv'),
        '--redis',
        redis.url,
        '--out',
        out,
        '--allow-private-sources',
        '--json',
      ],
      {},
      shared.dir,
    );
    expect(enqueued.code, enqueued.stderr).toBe(0);
    // Relative references resolved against the manifest's URL; no image body read by enqueue.
    expect(server.seen('/feeds/img/r0.jpg').length).toBeGreaterThan(0);
    expect([...bodiesServed.values()].reduce((a, b) => a + b, 0)).toBe(0);

    const workers = [];
    for (const name of ['east', 'west']) {
      const home = await tempDir(`kb-remote-${name}-`);
      cleanups.push(() => home.remove());
      workers.push(
        spawnCli(
          [
            'worker',
            '--redis',
            redis.url,
            '--name',
            name,
            '--until-drained',
            '--allow-private-sources',
            '--concurrency',
            '4',
          ],
          { cwd: home.dir, env: { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url } },
        ),
      );
    }
    const codes = await Promise.all(workers.map((w) => exitOf(w, 90_000)));
    expect(codes, workers.map((w) => w.stderr()).join('\n')).toEqual([0, 0]);

    const ids = rows.flatMap((_, i) => styles.map((style) => `r${i}__${style}`));
    const states = await itemStates(redis.url);
    expect([...states.keys()].sort()).toEqual([...ids].sort());
    expect([...states.values()].every((s) => s.phase === 'downloaded')).toBe(true);
    expect(sandbox.stats.jobs).toBe(ids.length);
    // Each image's body went out at most once per worker (its styles share one fetch).
    for (const [image, served] of bodiesServed) expect(served, image).toBeLessThanOrEqual(2);
    for (const request of server.requests) expect(request.headers.authorization).toBeUndefined();

    const built = await cli(['report', '--redis', redis.url, '--json'], {}, shared.dir);
    expect(built.code, built.stdout + built.stderr).toBe(0);
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
    expect(report.run.totals).toMatchObject({ items: ids.length, succeeded: ids.length });
    expect(report.items.find((i) => i.id === 'r0__modern')?.image).toBe(server.url('/feeds/img/r0.jpg'));
  }, 150_000);
});
