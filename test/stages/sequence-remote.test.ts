/**
 * A remote source through the whole stage sequence (decide → submit → poll → download) against the
 * sandbox and a source server on 127.0.0.1: six styles of one URL are fetched once, uploaded six
 * times from the one spooled file while it is held, and the file is gone once every upload is
 * accepted; a rerun asks the source conditionally and submits nothing.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPreflighter, type Preflighter } from '../../src/preflight/index.js';
import { type ItemDriver, runItemSteps } from '../../src/stages/sequence.js';
import { UploadReader } from '../../src/stages/submit.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { Item } from '../../src/types.js';
import { sha256 } from '../../src/util/fs.js';
import { createRequests } from '../helpers/sandbox.js';
import { stageWorld } from '../helpers/stages.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';

const STYLES = ['scandinavian', 'industrial', 'japandi', 'farmhouse', 'modern', 'coastal'];

let server: SourceServer;
let sources: Sources;

beforeEach(async () => {
  server = await new SourceServer().start();
  sources = createSources({ allowPrivate: true, maxBytes: 2_000_000, env: {} });
});

afterEach(async () => {
  sources.close();
  await server.stop();
});

function driverOf(w: Awaited<ReturnType<typeof stageWorld>>, preflighter: Preflighter): ItemDriver {
  return {
    // Every upload reads its file from disk (no bytes kept for the other styles): a file deleted too
    // early fails the item instead of going up from memory.
    ctx: { ...w.ctx, uploads: new UploadReader(0, 0) } as unknown as ItemDriver['ctx'],
    preflighter,
    jobTimeoutMs: 60_000,
    retryAmbiguous: false,
    polledElsewhere: false,
    decideOptions: () => ({ retryFailed: false, verify: false }),
    admit: async () => null,
    accepted: () => undefined,
    review: async () => undefined,
  };
}

describe('a remote source through the stage sequence', () => {
  it('six styles of one URL: one GET, six jobs from the spooled bytes, the spool gone; a rerun asks once and sends no job', async () => {
    const image = await kitchenJpeg(1, 320, 240);
    server.routes.set('/k1.jpg', (req, res) => {
      res.setHeader('etag', '"v1"');
      if (req.headers['if-none-match'] === '"v1"') {
        res.statusCode = 304;
        return void res.end();
      }
      res.end(image);
    });
    const url = server.url('/k1.jpg?X-Amz-Signature=abc');
    const w = await stageWorld();
    const preflighter = createPreflighter({ cacheDir: w.tmp.file('.prepared'), sources });
    try {
      const driver = driverOf(w, preflighter);
      const items: Item[] = STYLES.map((style) => ({
        id: `k1__${style}`,
        image: url,
        imagePath: url,
        module: 'change-style',
        style,
        source: { file: 'm.csv', line: 2 },
      }));
      const settled = await Promise.all(items.map((item) => runItemSteps(item, driver)));
      expect(settled.map((s) => s.status)).toEqual(Array(6).fill('succeeded'));
      expect(server.seen('/k1.jpg')).toHaveLength(1);
      // Each job was created from the source's own bytes (the sandbox keys creates by their sha256).
      expect(createRequests(w.sandbox)).toBe(6);
      const keys = [...w.sandbox.stats.createsByItem.keys()];
      expect(keys).toHaveLength(6);
      for (const key of keys) expect(key).toContain(sha256(image));
      const spools = w.tmp.file('.prepared/remote');
      for (const own of await readdir(spools)) expect(await readdir(path.join(spools, own))).toEqual([]);

      // The rerun: one conditional request for the six, answered 304; no body, no job.
      const rerun = await Promise.all(items.map((item) => runItemSteps(item, driver)));
      expect(rerun.map((s) => s.status)).toEqual(Array(6).fill('skipped'));
      const seen = server.seen('/k1.jpg');
      expect(seen).toHaveLength(2);
      expect(seen[1]?.headers['if-none-match']).toBe('"v1"');
      expect(createRequests(w.sandbox)).toBe(6);
    } finally {
      await preflighter.close();
    }
  });

  it('uploads the service refuses (422) end the items failed, and the spool goes with them', async () => {
    const image = await kitchenJpeg(2, 320, 240);
    server.routes.set('/k2.jpg', (_req, res) => res.end(image));
    const url = server.url('/k2.jpg');
    const w = await stageWorld({
      sandbox: {
        faults: { failCreateWith: { status: 422, code: 'not_a_kitchen', message: 'no kitchen in view' } },
      },
    });
    const preflighter = createPreflighter({ cacheDir: w.tmp.file('.prepared'), sources });
    try {
      const driver = driverOf(w, preflighter);
      const items: Item[] = STYLES.slice(0, 3).map((style) => ({
        id: `k2__${style}`,
        image: url,
        imagePath: url,
        module: 'change-style',
        style,
        source: { file: 'm.csv', line: 2 },
      }));
      const settled = await Promise.all(items.map((item) => runItemSteps(item, driver)));
      expect(settled).toEqual(
        Array(3).fill({
          status: 'failed',
          jobId: null,
          error: { code: 'not_a_kitchen', message: 'no kitchen in view' },
        }),
      );
      expect(server.seen('/k2.jpg')).toHaveLength(1);
      const spools = w.tmp.file('.prepared/remote');
      for (const own of await readdir(spools)) expect(await readdir(path.join(spools, own))).toEqual([]);
    } finally {
      await preflighter.close();
    }
  });
});
