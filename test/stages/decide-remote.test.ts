/**
 * The run path of http(s) sources (issue 32): preflight and decide over `createSources` against a
 * real source server on 127.0.0.1 that counts what it saw: one GET per source however many styles
 * use it, the spooled file kept until the last upload is accepted, conditional reruns (304, no body),
 * a changed source as a new item, and each source fault as the item's outcome.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPreflighter, type Preflighter, type PreflightWorkEvent } from '../../src/preflight/index.js';
import { type Decision, decide, releaseDecision } from '../../src/stages/decide.js';
import type { JournalRecord } from '../../src/state/records.js';
import { type ItemState, newItemState } from '../../src/state/state.js';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { Item } from '../../src/types.js';
import { sha256 } from '../../src/util/fs.js';
import { type TempDir, tempDirForTest } from '../helpers/tmp.js';
import { SourceServer } from '../storage/http/source-server.js';
import { kitchenJpeg } from '../support/images.js';

const STYLES = ['modern', 'rustic', 'scandi', 'industrial', 'coastal', 'classic'];

/** A source the server serves, and what it sent of it. */
interface Served {
  body: Buffer;
  etag?: string;
  lastModified?: string;
  /** Body bytes sent (304s send none). */
  sent: number;
}

/** Serves `served` at `route`, answering conditional requests as a CDN does. */
function serve(server: SourceServer, route: string, served: Served): void {
  server.routes.set(route, (req: http.IncomingMessage, res: http.ServerResponse) => {
    const inm = req.headers['if-none-match'];
    const ims = req.headers['if-modified-since'];
    const fresh =
      inm !== undefined
        ? served.etag !== undefined && inm === served.etag
        : ims !== undefined && served.lastModified !== undefined && ims === served.lastModified;
    if (served.etag) res.setHeader('etag', served.etag);
    if (served.lastModified) res.setHeader('last-modified', served.lastModified);
    if (fresh) {
      res.statusCode = 304;
      res.end();
      return;
    }
    res.setHeader('content-type', 'image/jpeg');
    res.setHeader('content-length', served.body.length);
    served.sent += served.body.length;
    res.end(served.body);
  });
}

function itemOf(url: string, style = 'modern', id = `k1__${style}`): Item {
  return {
    id,
    image: url,
    imagePath: url,
    module: 'change-style',
    style,
    source: { file: 'm.csv', line: 2 },
  };
}

/** The journal state of the item `decision` planned, advanced to `phase`. */
function stateOf(item: Item, decision: Decision, phase: ItemState['phase'], extra: Partial<ItemState> = {}) {
  const record: Extract<JournalRecord, { t: 'item' }> = {
    t: 'item',
    id: item.id,
    fp: decision.fp,
    image: item.image,
    module: item.module,
    style: item.style ?? null,
    src: decision.src,
  };
  return { ...newItemState(record), phase, ...extra };
}

let server: SourceServer;
let sources: Sources;
let tmp: TempDir;
let work: PreflightWorkEvent[];
let preflighter: Preflighter;
let image: Buffer;

beforeEach(async () => {
  server = await new SourceServer().start();
  sources = createSources({ allowPrivate: true, maxBytes: 2_000_000, env: {} });
  tmp = await tempDirForTest('kb-remote-');
  work = [];
  preflighter = createPreflighter({
    cacheDir: tmp.file('.prepared'),
    sources,
    onWork: (event) => work.push(event),
  });
  image = await kitchenJpeg(1, 320, 240);
});

afterEach(async () => {
  await preflighter.close();
  sources.close();
  await server.stop();
});

const deps = (state: ItemState | undefined, extra: { retryFailed?: boolean } = {}) => ({
  preflighter,
  state,
  outDir: tmp.dir,
  retryFailed: false,
  verify: false,
  ...extra,
});

/** A finished item's state: `decision`'s identity with a result file on disk. */
async function finished(item: Item, decision: Decision): Promise<ItemState> {
  const result = await tmp.write(`results/${item.id}.jpg`, 'result bytes');
  const { size, mtimeMs } = await stat(result);
  return stateOf(item, decision, 'downloaded', {
    jobId: 'j1',
    output: `results/${item.id}.jpg`,
    sha256: sha256('result bytes'),
    bytes: size,
    mtimeMs,
  });
}

describe('remote sources through preflight and decide', () => {
  it('six styles of one URL: one GET, six uploads from one spooled file, gone after the last release', async () => {
    const served: Served = { body: image, etag: '"v1"', sent: 0 };
    serve(server, '/k1.jpg', served);
    const url = server.url('/k1.jpg');
    const items = STYLES.map((style) => itemOf(url, style));
    const decisions = await Promise.all(items.map((item) => decide(item, deps(undefined))));

    expect(server.seen('/k1.jpg')).toHaveLength(1);
    expect(work.filter((e) => e.kind === 'read')).toHaveLength(1);
    const uploads = decisions.map((d) => (d.action === 'submit' ? d.upload.path : null));
    const file = uploads[0] as string;
    expect(uploads).toEqual(Array(6).fill(file));
    expect(file.startsWith(tmp.file('.prepared/remote/'))).toBe(true);
    expect(decisions[0]).toMatchObject({
      action: 'submit',
      upload: { action: 'as-is', filename: 'k1.jpg', contentType: 'image/jpeg' },
      src: { path: url, size: image.length, sha256: sha256(image), etag: '"v1"' },
    });
    // Each upload reads the file while it holds it; the last release deletes it and its folder.
    for (const [i, decision] of decisions.entries()) {
      expect(await readFile(file)).toEqual(image);
      await releaseDecision(preflighter, items[i] as Item, decision);
      expect(existsSync(file)).toBe(i < 5);
    }
    expect(await readdir(path.dirname(path.dirname(file)))).toEqual([]);

    // Forgotten with its last hold: a later row naming the same URL fetches it again.
    const again = await decide(itemOf(url, 'modern', 'k1b__modern'), deps(undefined));
    expect(server.seen('/k1.jpg')).toHaveLength(2);
    expect(again).toMatchObject({ action: 'submit', fp: decisions[0]?.fp });
  });

  it('a resized remote source uploads a preparation that goes with its last release', async () => {
    const big = await kitchenJpeg(2, 5000, 300);
    serve(server, '/wide.jpg', { body: big, etag: '"w"', sent: 0 });
    const item = itemOf(server.url('/wide.jpg'));
    const decision = await decide(item, deps(undefined));
    expect(decision).toMatchObject({ action: 'submit', upload: { action: 'resized' } });
    const file = decision.action === 'submit' ? decision.upload.path : '';
    expect(existsSync(file)).toBe(true);
    await releaseDecision(preflighter, item, decision);
    expect(existsSync(file)).toBe(false);
  });

  it('conditional rerun: If-None-Match answered 304, no body, the journal sha reused, the item skipped', async () => {
    const served: Served = {
      body: image,
      etag: '"v1"',
      lastModified: 'Tue, 14 Nov 2023 22:13:20 GMT',
      sent: 0,
    };
    serve(server, '/k1.jpg', served);
    const item = itemOf(server.url('/k1.jpg'));
    const first = await decide(item, deps(undefined));
    await releaseDecision(preflighter, item, first);
    expect(first.src).toMatchObject({ etag: '"v1"', last_modified: served.lastModified });
    const done = await finished(item, first);
    served.sent = 0;
    work.length = 0;

    const rerun = await decide(item, deps(done));
    expect(rerun).toMatchObject({
      action: 'skip',
      reason: 'done',
      fp: first.fp,
      src: first.src,
      preflight: null,
    });
    const seen = server.seen('/k1.jpg');
    expect(seen).toHaveLength(2);
    expect(seen[1]?.headers['if-none-match']).toBe('"v1"');
    expect(served.sent).toBe(0);
    expect(work).toEqual([]);
    // No Authorization, no key, ever.
    for (const r of seen) expect(r.headers.authorization).toBeUndefined();
  });

  it('a source with Last-Modified only is asked with If-Modified-Since', async () => {
    const served: Served = { body: image, lastModified: 'Tue, 14 Nov 2023 22:13:20 GMT', sent: 0 };
    serve(server, '/lm.jpg', served);
    const item = itemOf(server.url('/lm.jpg'));
    const first = await decide(item, deps(undefined));
    await releaseDecision(preflighter, item, first);
    expect(first.src).not.toHaveProperty('etag');
    served.sent = 0;
    const rerun = await decide(item, deps(await finished(item, first)));
    expect(rerun).toMatchObject({ action: 'skip', fp: first.fp });
    expect(server.seen('/lm.jpg')[1]?.headers['if-modified-since']).toBe(served.lastModified);
    expect(served.sent).toBe(0);
  });

  it('a source with neither validator is read again and compared by sha256: same bytes, same item', async () => {
    const served: Served = { body: image, sent: 0 };
    serve(server, '/plain.jpg', served);
    const item = itemOf(server.url('/plain.jpg'));
    const first = await decide(item, deps(undefined));
    await releaseDecision(preflighter, item, first);
    const rerun = await decide(item, deps(await finished(item, first)));
    await releaseDecision(preflighter, item, rerun);
    expect(rerun).toMatchObject({ action: 'skip', reason: 'done', fp: first.fp });
    expect(server.seen('/plain.jpg')).toHaveLength(2);
    expect(served.sent).toBe(2 * image.length);
  });

  it('a rerun of six styles: one conditional request whether the source is unchanged or changed', async () => {
    const served: Served = { body: image, etag: '"v1"', sent: 0 };
    serve(server, '/k1.jpg', served);
    const url = server.url('/k1.jpg');
    const items = STYLES.map((style) => itemOf(url, style));
    const first = await Promise.all(items.map((item) => decide(item, deps(undefined))));
    for (const [i, d] of first.entries()) await releaseDecision(preflighter, items[i] as Item, d);
    const states = await Promise.all(items.map((item, i) => finished(item, first[i] as Decision)));

    const unchanged = await Promise.all(items.map((item, i) => decide(item, deps(states[i]))));
    expect(unchanged.map((d) => d.action)).toEqual(Array(6).fill('skip'));
    expect(server.seen('/k1.jpg')).toHaveLength(2);

    // Another preflighter (another run), and the source changed: one request, its body read once.
    await preflighter.close();
    preflighter = createPreflighter({ cacheDir: tmp.file('.prepared'), sources });
    const edited = await kitchenJpeg(5, 320, 240);
    Object.assign(served, { body: edited, etag: '"v2"', sent: 0 });
    const changed = await Promise.all(items.map((item, i) => decide(item, deps(states[i]))));
    expect(server.seen('/k1.jpg')).toHaveLength(3);
    expect(served.sent).toBe(edited.length);
    const uploads = new Set(changed.map((d) => (d.action === 'submit' ? d.upload.path : null)));
    expect(uploads.size).toBe(1);
    expect(changed[0]?.src).toMatchObject({ sha256: sha256(edited), etag: '"v2"' });
    for (const [i, d] of changed.entries()) await releaseDecision(preflighter, items[i] as Item, d);
  });

  it('a changed ETag: the body of the conditional GET is what preflight reads (one request), a new fingerprint', async () => {
    const served: Served = { body: image, etag: '"v1"', sent: 0 };
    serve(server, '/k1.jpg', served);
    const item = itemOf(server.url('/k1.jpg'));
    const first = await decide(item, deps(undefined));
    await releaseDecision(preflighter, item, first);
    const done = await finished(item, first);
    const edited = await kitchenJpeg(3, 320, 240);
    Object.assign(served, { body: edited, etag: '"v2"' });

    const rerun = await decide(item, deps(done));
    expect(server.seen('/k1.jpg')).toHaveLength(2);
    expect(server.seen('/k1.jpg')[1]?.headers['if-none-match']).toBe('"v1"');
    expect(rerun).toMatchObject({
      action: 'submit',
      again: false,
      src: { sha256: sha256(edited), etag: '"v2"' },
    });
    expect(rerun.fp).not.toBe(first.fp);
    const upload = rerun.action === 'submit' ? rerun.upload.path : '';
    expect(await readFile(upload)).toEqual(edited);
    await releaseDecision(preflighter, item, rerun);
    expect(existsSync(upload)).toBe(false);
  });
});
