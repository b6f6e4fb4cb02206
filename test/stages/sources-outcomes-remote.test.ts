/**
 * Source faults as item outcomes (issue 32): each SourceError code of a real source server on
 * 127.0.0.1 becomes the item's rejection (or, for `source_unavailable`, an incomplete item a rerun
 * tries again), with the fetcher's redacted message; the stage sequence records it.
 */
import { readdir } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPreflighter, type Preflighter } from '../../src/preflight/index.js';
import { type Decision, decide, releaseDecision } from '../../src/stages/decide.js';
import { type ItemDriver, runItemSteps } from '../../src/stages/sequence.js';
import type { ItemRecord } from '../../src/state/records.js';
import { applyRecord, type ItemState, newItemState } from '../../src/state/state.js';
import { toOutputStore } from '../../src/storage/local-output.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { Item } from '../../src/types.js';
import { type TempDir, tempDirForTest } from '../helpers/tmp.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';

const SECRET = 'sig-SECRET-4242';

function itemOf(url: string, id = 'k1__modern'): Item {
  return {
    id,
    image: url,
    imagePath: url,
    module: 'change-style',
    style: 'modern',
    source: { file: 'm.csv', line: 2 },
  };
}

let server: SourceServer;
let sources: Sources;
let tmp: TempDir;
let preflighter: Preflighter;

beforeEach(async () => {
  server = await new SourceServer().start();
  sources = createSources({ allowPrivate: true, maxBytes: 200_000, env: {} });
  tmp = await tempDirForTest('kb-remote-faults-');
  preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
});

afterEach(async () => {
  await preflighter.close();
  sources.close();
  await server.stop();
});

const route = (path: string, handler: (res: http.ServerResponse, hit: number) => void) =>
  server.routes.set(path, (_req, res, hit) => handler(res, hit));

async function decided(url: string, store: Sources = sources): Promise<Decision> {
  const own =
    store === sources ? preflighter : createPreflighter({ cacheDir: tmp.file('.other'), sources: store });
  try {
    const item = itemOf(url);
    const decision = await decide(item, {
      preflighter: own,
      state: undefined,
      outDir: tmp.dir,
      retryFailed: false,
      verify: false,
    });
    await releaseDecision(own, item, decision);
    return decision;
  } finally {
    if (own !== preflighter) await own.close();
  }
}

describe('a source fault is the item outcome', () => {
  it.each([
    [404, 'file_not_found'],
    [410, 'file_not_found'],
    [401, 'source_forbidden'],
    [403, 'source_forbidden'],
  ])('%i → rejected %s, the signature redacted in the message', async (status, code) => {
    route('/x.jpg', (res) => {
      res.statusCode = status;
      res.end('<html>nope</html>');
    });
    const decision = await decided(server.url(`/x.jpg?X-Amz-Signature=${SECRET}`));
    expect(decision).toMatchObject({
      action: 'reject',
      src: null,
      preflight: expect.anything(),
      error: { code },
    });
    const message = decision.action === 'reject' ? decision.error.message : '';
    expect(message).toContain(`${status}`);
    expect(message).toContain('X-Amz-Signature=***');
    expect(message).not.toContain(SECRET);
  });

  it('the address guard → rejected source_blocked, nothing sent; a redirect to 169.254.169.254 too, even with private sources allowed', async () => {
    route('/k.jpg', (res) => res.end('never'));
    const guarded = createSources({ allowPrivate: false, maxBytes: 200_000, env: {} });
    try {
      const blocked = await decided(server.url('/k.jpg'), guarded);
      expect(blocked).toMatchObject({ action: 'reject', error: { code: 'source_blocked' } });
      expect(server.seen('/k.jpg')).toHaveLength(0);
    } finally {
      guarded.close();
    }
    route('/meta', (res) => {
      res.statusCode = 302;
      res.setHeader('location', 'http://169.254.169.254/latest/meta-data/');
      res.end();
    });
    expect(await decided(server.url('/meta'))).toMatchObject({
      action: 'reject',
      error: { code: 'source_blocked' },
    });
  });

  it('a body over --max-source-bytes without Content-Length → rejected too_large, cut at the cap', async () => {
    let written = 0;
    route('/huge.jpg', (res) => {
      const chunk = Buffer.alloc(64 * 1024, 0xab);
      const more = (): void => {
        while (written < 10_000_000) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    const decision = await decided(server.url('/huge.jpg'));
    expect(decision).toMatchObject({ action: 'reject', error: { code: 'too_large' } });
    expect(written).toBeLessThan(10_000_000);
  });

  it('an HTML page with 200 → rejected unsupported_format, as a local text file is', async () => {
    route('/page.jpg', (res) => {
      res.setHeader('content-type', 'text/html');
      res.end('<!doctype html><html><body>Sign in to see this image</body></html>');
    });
    const decision = await decided(server.url('/page.jpg'));
    expect(decision).toMatchObject({ action: 'reject', error: { code: 'unsupported_format' } });
    expect(decision.action === 'reject' && decision.error.message).toMatch(/not an image/);
  });

  it('5xx then 200 is retried and prepared; 429 with Retry-After is waited for', async () => {
    const image = await kitchenJpeg(1, 160, 120);
    route('/flaky.jpg', (res, hit) => {
      if (hit === 1) res.statusCode = 503;
      else if (hit === 2) {
        res.statusCode = 429;
        res.setHeader('retry-after', '0');
      }
      res.end(hit <= 2 ? 'busy' : image);
    });
    expect(await decided(server.url('/flaky.jpg'))).toMatchObject({ action: 'submit' });
    expect(server.seen('/flaky.jpg')).toHaveLength(3);
  });

  it('a reset mid-body → source_unavailable: a reject decision the sequence settles as incomplete', async () => {
    route('/cut.jpg', (res) => {
      res.setHeader('content-length', '100000');
      res.write(Buffer.alloc(1000, 1));
      setImmediate(() => res.socket?.destroy());
    });
    const decision = await decided(server.url('/cut.jpg'));
    expect(decision).toMatchObject({ action: 'reject', error: { code: 'source_unavailable' } });
  });
});

/** A driver over an in-memory state store: what the sequence records for a decided item. */
function driverFor(states: Map<string, ItemState>, records: ItemRecord[]): ItemDriver {
  const store = {
    get: (id: string) => states.get(id),
    plan: async (identity: Parameters<ItemDriver['ctx']['store']['plan']>[0]) => {
      const known = states.get(identity.id);
      if (known && known.fp === identity.fp) return known;
      const state = newItemState({ t: 'item', ...identity });
      states.set(identity.id, state);
      return state;
    },
    record: async (record: Exclude<ItemRecord, { t: 'item' }>) => {
      records.push(record);
      const state = states.get(record.id);
      if (state) applyRecord(state, record);
    },
  };
  const ctx = {
    store,
    logger: pino({ level: 'silent' }),
    output: toOutputStore(tmp.dir),
  } as unknown as ItemDriver['ctx'];
  return {
    ctx,
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

describe('the stage sequence records source outcomes', () => {
  it('source_unavailable → incomplete (recorded, not a rejection that sticks); 404 → rejected', async () => {
    route('/down.jpg', (res) => {
      res.statusCode = 503;
      res.setHeader('retry-after', '0');
      res.end('down');
    });
    route('/gone.jpg', (res) => {
      res.statusCode = 404;
      res.end();
    });
    const states = new Map<string, ItemState>();
    const records: ItemRecord[] = [];
    const driver = driverFor(states, records);
    const down = await runItemSteps(itemOf(server.url('/down.jpg'), 'down'), driver);
    expect(down).toMatchObject({ status: 'incomplete', error: { code: 'source_unavailable' } });
    expect(server.seen('/down.jpg')).toHaveLength(4); // the fetcher's retries, then the outcome
    expect(states.get('down')?.phase).toBe('new');
    const gone = await runItemSteps(itemOf(server.url('/gone.jpg'), 'gone'), driver);
    expect(gone).toMatchObject({ status: 'rejected', error: { code: 'file_not_found' } });
    expect(records.map((r) => [r.t, r.id, 'error' in r ? r.error?.code : null])).toEqual([
      ['incomplete', 'down', 'source_unavailable'],
      ['rejected', 'gone', 'file_not_found'],
    ]);
    // Nothing of either is left on disk: each spool folder went with its item.
    const spools = tmp.file('.prepared/remote');
    for (const own of await readdir(spools)) expect(await readdir(path.join(spools, own))).toEqual([]);
  });

  it('a source that cannot be checked now: the item keeps its journal identity (an accepted job is polled; an unsent one is incomplete)', async () => {
    const image = await kitchenJpeg(1, 160, 120);
    let down = false;
    server.routes.set('/k.jpg', (req, res) => {
      if (down) {
        res.statusCode = 503;
        res.setHeader('retry-after', '0');
        return void res.end();
      }
      res.setHeader('etag', '"v1"');
      if (req.headers['if-none-match'] === '"v1"') {
        res.statusCode = 304;
        return void res.end();
      }
      res.end(image);
    });
    const item = itemOf(server.url('/k.jpg'));
    const first = await decide(item, {
      preflighter,
      state: undefined,
      outDir: tmp.dir,
      retryFailed: false,
      verify: false,
    });
    await releaseDecision(preflighter, item, first);
    const accepted = {
      ...newItemState({
        t: 'item',
        id: item.id,
        fp: first.fp,
        image: item.image,
        module: item.module,
        style: 'modern',
        src: first.src,
      }),
      phase: 'accepted' as const,
      jobId: 'j1',
    };
    down = true;
    const rerun = await decide(item, {
      preflighter,
      state: accepted,
      outDir: tmp.dir,
      retryFailed: false,
      verify: false,
    });
    expect(rerun).toMatchObject({
      action: 'poll',
      jobId: 'j1',
      fp: first.fp,
      src: first.src,
      preflight: null,
    });
    // An item still to be submitted: incomplete under its journal identity, the source asked once.
    const asked = server.seen('/k.jpg').length;
    const waiting = { ...accepted, phase: 'new' as const, jobId: null };
    const unsent = await decide(item, {
      preflighter,
      state: waiting,
      outDir: tmp.dir,
      retryFailed: false,
      verify: false,
    });
    expect(unsent).toMatchObject({
      action: 'reject',
      fp: first.fp,
      src: first.src,
      preflight: null,
      error: { code: 'source_unavailable' },
    });
    expect(server.seen('/k.jpg').length - asked).toBe(4); // one fetch: 1 + 3 retries, not asked again
  });
});
