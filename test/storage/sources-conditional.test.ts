/**
 * The seam's conditional read (`openIfChanged`) for each form of reference: local files by size and
 * mtime, http(s) by the validators the source sent (a real source server on 127.0.0.1), and a
 * source that sent none read again whole.
 */
import { utimes } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSources, type Sources } from '../../src/storage/sources.js';
import type { KnownSource, OpenedSource, SourceNotModified } from '../../src/storage/types.js';
import { useTempDir } from '../helpers/tmp.js';
import { SourceServer } from './http/source-server.js';

const tmp = useTempDir('kb-sources-cond-');
let server: SourceServer;
let sources: Sources;

beforeEach(async () => {
  server = await new SourceServer().start();
  sources = createSources({ allowPrivate: true, maxBytes: 1_000_000, env: {} });
});

afterEach(async () => {
  sources.close();
  await server.stop();
});

const body = async (answer: OpenedSource | SourceNotModified) =>
  'notModified' in answer ? null : Buffer.concat(await answer.stream().toArray()).toString();

describe('openIfChanged', () => {
  it('a local file: unchanged while size and mtime are, opened when either moved', async () => {
    const file = await tmp.write('k.jpg', 'bytes one');
    const info = await sources.stat(file);
    const known: KnownSource = { size: info.size, mtimeMs: info.mtimeMs };
    expect(await sources.openIfChanged(file, known)).toEqual({ notModified: true, ref: file });
    await utimes(file, new Date(), new Date(Date.now() + 5000));
    expect(await body(await sources.openIfChanged(file, known))).toBe('bytes one');
  });

  it('http: the ETag and Last-Modified go back as If-None-Match / If-Modified-Since; a 304 is notModified', async () => {
    server.routes.set('/k.jpg', (req, res) => {
      res.setHeader('etag', '"e1"');
      res.setHeader('last-modified', 'Tue, 14 Nov 2023 22:13:20 GMT');
      if (req.headers['if-none-match'] === '"e1"') return void res.writeHead(304).end();
      res.end('image');
    });
    const url = server.url('/k.jpg');
    const opened = await sources.open(url);
    expect(opened).toMatchObject({ etag: '"e1"', lastModified: 'Tue, 14 Nov 2023 22:13:20 GMT' });
    expect(await body(opened)).toBe('image');
    const known = {
      size: 5,
      mtimeMs: opened.mtimeMs,
      etag: '"e1"',
      lastModified: opened.lastModified as string,
    };
    expect(await sources.openIfChanged(url, known)).toEqual({ notModified: true, ref: url });
    expect(server.seen('/k.jpg')[1]?.headers).toMatchObject({
      'if-none-match': '"e1"',
      'if-modified-since': 'Tue, 14 Nov 2023 22:13:20 GMT',
    });
    // Another ETag known: the answer is the body, in the same request.
    const changed = await sources.openIfChanged(url, { ...known, etag: '"e0"' });
    expect(await body(changed)).toBe('image');
    expect(server.seen('/k.jpg')).toHaveLength(3);
  });

  it('http: a source that sent no validator is read again whole, with no conditional header', async () => {
    server.routes.set('/plain.jpg', (_req, res) => res.end('plain'));
    const url = server.url('/plain.jpg');
    expect(await body(await sources.openIfChanged(url, { size: 5, mtimeMs: 0 }))).toBe('plain');
    const [seen] = server.seen('/plain.jpg');
    expect(seen?.headers['if-none-match']).toBeUndefined();
    expect(seen?.headers['if-modified-since']).toBeUndefined();
  });

  it('http: an opened body nobody reads is let go by close(), and the next read fetches again', async () => {
    server.routes.set('/big.jpg', (_req, res) => res.end(Buffer.alloc(200_000, 1)));
    const url = server.url('/big.jpg');
    const opened = await sources.open(url);
    opened.close?.();
    opened.close?.();
    expect((await opened.bytes()).length).toBe(200_000);
    expect(server.seen('/big.jpg')).toHaveLength(2);
  });
});
