import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { writeReports } from '../../src/report/write.js';
import { downloadItem } from '../../src/stages/download.js';
import { pollJob } from '../../src/stages/poll.js';
import { submitItem } from '../../src/stages/submit.js';
import { LocalOutputStore } from '../../src/storage/local-output.js';
import type {
  ObjectWriter,
  OutputStore,
  PutBody,
  PutOptions,
  StagedFile,
  StoredObject,
} from '../../src/storage/types.js';
import type { ReportItem } from '../../src/types.js';
import { ofKind, stageWorld } from '../helpers/stages.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenImage } from '../support/images.js';

/** An output store that records what is written through it, over a local one. */
class RecordingStore implements OutputStore {
  readonly remote = false;
  readonly written: Array<{ key: string; options: PutOptions }> = [];
  readonly #inner: OutputStore;

  constructor(inner: OutputStore) {
    this.#inner = inner;
  }

  get location(): string {
    return this.#inner.location;
  }

  put(key: string, body: PutBody, options: PutOptions = {}): Promise<StoredObject> {
    this.written.push({ key, options });
    return this.#inner.put(key, body, options);
  }

  async writer(key: string, options: PutOptions = {}): Promise<ObjectWriter> {
    const inner = await this.#inner.writer(key, options);
    return {
      write: (text) => inner.write(text),
      commit: () => {
        this.written.push({ key, options });
        return inner.commit();
      },
      abort: () => inner.abort(),
    };
  }

  async stage(near: string): Promise<StagedFile> {
    const inner = await this.#inner.stage(near);
    return {
      file: inner.file,
      commit: (key, options = {}) => {
        this.written.push({ key, options });
        return inner.commit(key, options);
      },
      discard: () => inner.discard(),
    };
  }

  get(key: string): Promise<Readable> {
    return this.#inner.get(key);
  }
  head(key: string): Promise<StoredObject | null> {
    return this.#inner.head(key);
  }
  list(prefix: string): AsyncIterable<StoredObject> {
    return this.#inner.list(prefix);
  }
  delete(key: string): Promise<void> {
    return this.#inner.delete(key);
  }
  sweep(prefix: string, olderThanMs?: number): Promise<string[]> {
    return this.#inner.sweep(prefix, olderThanMs);
  }
  refOf(relative: string): string {
    return this.#inner.refOf(relative);
  }
  describe(key: string): string {
    return this.#inner.describe(key);
  }
}

/** Every file under `dir`, as keys. */
async function keys(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

function item(id: string, output: string | null): ReportItem {
  return {
    id,
    image: `photos/${id}.jpg`,
    module: 'change-style',
    style: 'modern',
    status: output ? 'succeeded' : 'failed',
    job_id: `job_${id}`,
    output,
    sha256: output ? 'ab'.repeat(32) : null,
    processing_time_ms: 1000,
    submissions: 1,
    error: output ? null : { code: 'not_a_kitchen', message: 'not a kitchen' },
    preflight: [],
    review: null,
    ambiguous_resends: 0,
  };
}

describe('the storage seam', () => {
  it('the reports, the page and its thumbnails are all written through the output store', async () => {
    const tmp = await tempDirForTest('kb-seam-');
    const manifestDir = tmp.file('manifest');
    const photo = await kitchenImage({ width: 800, height: 600 });
    await tmp.write('manifest/photos/k1.jpg', photo);
    await tmp.write('manifest/photos/k2.jpg', photo);
    const local = new LocalOutputStore(tmp.file('out'));
    await local.put('results/k1.jpg', await kitchenImage({ width: 800, height: 600, look: 'tinted' }));
    const store = new RecordingStore(local);

    const written = await writeReports(
      store,
      {
        info: { manifest: 'm.csv', base_url: 'http://x', started_at: '', finished_at: '' },
        rows: () => [item('k1', 'results/k1.jpg'), item('k2', null)],
      },
      { html: true, manifestDir },
    );

    expect(written.run.totals).toMatchObject({ items: 2, succeeded: 1, failed: 1 });
    const through = store.written.map((w) => w.key).sort();
    // Nothing in the folder but the result put before and what went through the store.
    expect(await keys(tmp.file('out'))).toEqual([...through, 'results/k1.jpg'].sort());
    expect(through.filter((k) => !k.startsWith('thumbs/'))).toEqual([
      'report.csv',
      'report.html',
      'report.json',
    ]);
    expect(through.filter((k) => k.startsWith('thumbs/'))).toHaveLength(3);
    // Thumbnails are a cache (not fsynced); reports are durable.
    for (const { key, options } of store.written)
      expect(options.durable === false).toBe(key.startsWith('thumbs/'));
  });

  it('a result is staged, verified and committed under results/<id>.<ext> through the output store', async () => {
    const w = await stageWorld();
    const store = new RecordingStore(w.ctx.output);
    w.ctx.output = store;
    const { item: planned, state, upload } = await w.item(1);
    expect((await submitItem(w.ctx, planned, state, upload, { retryAmbiguous: false })).kind).toBe(
      'accepted',
    );
    expect((await pollJob(w.ctx, state, { jobTimeoutMs: 30_000 })).kind).toBe('ended');

    expect(await downloadItem(w.ctx, state)).toEqual({ kind: 'downloaded', jobId: state.jobId });

    const [record] = ofKind(await w.records(), 'downloaded');
    expect(store.written).toEqual([
      {
        key: `results/${planned.id}.jpg`,
        options: { contentType: 'image/jpeg', sha256: record?.sha256 },
      },
    ]);
    expect(await store.head(`results/${planned.id}.jpg`)).toMatchObject({
      size: record?.bytes,
      mtimeMs: record?.mtime_ms,
    });
  });
});
