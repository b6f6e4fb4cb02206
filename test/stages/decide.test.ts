import { rm, stat, writeFile } from 'node:fs/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createPreflighter, type PreflightWorkEvent } from '../../src/preflight/index.js';
import { type Decision, decide } from '../../src/stages/decide.js';
import { newItemState } from '../../src/state/state.js';
import type { Item } from '../../src/types.js';
import { sha256 } from '../../src/util/fs.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

/** An item over a fresh image, a preflighter that counts its work, and `decide` bound to both. */
async function setup() {
  const tmp = await tempDirForTest('kb-plan-');
  const imagePath = await tmp.write('images/k1.jpg', await kitchenJpeg(1));
  const item: Item = {
    id: 'k1__modern',
    image: 'images/k1.jpg',
    imagePath,
    module: 'change-style',
    style: 'modern',
    source: { file: 'm.csv', line: 2 },
  };
  const work: PreflightWorkEvent['kind'][] = [];
  const preflighter = createPreflighter({
    cacheDir: tmp.file('.prepared'),
    onWork: (e) => work.push(e.kind),
  });
  onTestFinished(() => preflighter.close());
  const run = (
    state: Parameters<typeof decide>[1]['state'],
    extra: { retryFailed?: boolean; verify?: boolean } = {},
  ) => decide(item, { preflighter, state, outDir: tmp.dir, retryFailed: false, verify: false, ...extra });
  return { tmp, item, work, run };
}

/** The item's journal state after `first`, advanced to `phase`. */
function stateFrom(first: Decision, item: Item, phase: ReturnType<typeof newItemState>['phase'], extra = {}) {
  return {
    ...newItemState({
      t: 'item',
      id: item.id,
      fp: first.fp,
      image: item.image,
      module: item.module,
      style: 'modern',
      src: first.src,
    }),
    phase,
    ...extra,
  };
}

describe('plan: what a run will do with an item', () => {
  it('a new item is submitted with its prepared upload; a rejected row is never preflighted', async () => {
    const { item, work, run } = await setup();
    const first = await run(undefined);
    expect(first).toMatchObject({
      action: 'submit',
      again: false,
      upload: { ok: true, action: 'as-is', path: item.imagePath },
    });
    expect(first.src).toMatchObject({ path: item.imagePath, sha256: expect.any(String) });
    expect(work).toEqual(['read', 'decode']);
    const rejected = await decide(
      { ...item, rejection: { code: 'invalid_item', message: 'no style' } },
      {
        preflighter: createPreflighter(),
        state: undefined,
        outDir: '/nowhere',
        retryFailed: false,
        verify: false,
      },
    );
    expect(rejected).toMatchObject({ action: 'reject', error: { code: 'invalid_item' }, preflight: null });
  });

  it('resume: done → skip without reading the image; accepted → poll; succeeded → download; failed → skip unless --retry-failed', async () => {
    const { tmp, item, work, run } = await setup();
    const first = await run(undefined);
    work.length = 0;
    const result = await tmp.write('results/k1__modern.jpg', 'result bytes');
    const { mtimeMs, size } = await stat(result);
    const done = stateFrom(first, item, 'downloaded', {
      jobId: 'j1',
      output: 'results/k1__modern.jpg',
      sha256: sha256('result bytes'),
      bytes: size,
      mtimeMs,
    });
    expect(await run(done)).toMatchObject({ action: 'skip', reason: 'done' });
    expect(work).toEqual([]); // size and mtime unchanged: the journal's hash is trusted
    expect(await run(stateFrom(first, item, 'accepted', { jobId: 'j1' }))).toMatchObject({
      action: 'poll',
      jobId: 'j1',
    });
    expect(await run(stateFrom(first, item, 'succeeded', { jobId: 'j1' }))).toMatchObject({
      action: 'download',
    });
    const failed = stateFrom(first, item, 'failed', { jobId: 'j1' });
    expect(await run(failed)).toMatchObject({ action: 'skip', reason: 'failed' });
    expect(await run(failed, { retryFailed: true })).toMatchObject({ action: 'submit', again: true });
    expect(await run(stateFrom(first, item, 'unknown', { submissions: 1 }))).toMatchObject({
      action: 'submit',
      again: true,
    });
  });

  it('a deleted or altered result is fetched again (download), never resubmitted first; --verify hashes it', async () => {
    const { tmp, item, run } = await setup();
    const first = await run(undefined);
    const result = await tmp.write('results/k1__modern.jpg', 'RESULT BYTES'); // altered: same size, other bytes
    const st = await stat(result);
    const done = stateFrom(first, item, 'downloaded', {
      jobId: 'j1',
      imageUrl: 'http://s/r',
      output: 'results/k1__modern.jpg',
      sha256: sha256('result bytes'),
      bytes: st.size,
      mtimeMs: st.mtimeMs,
    });
    expect(await run(done)).toMatchObject({ action: 'skip' }); // size and mtime say intact
    expect(await run(done, { verify: true })).toMatchObject({ action: 'download' });
    await rm(result);
    expect(await run(done)).toMatchObject({ action: 'download' });
    expect(await run({ ...done, imageUrl: null })).toMatchObject({ action: 'poll', jobId: 'j1' });
  });

  it('a changed image or row is a new item: another fingerprint, submitted afresh', async () => {
    const { tmp, item, run } = await setup();
    const first = await run(undefined);
    const done = stateFrom(first, item, 'downloaded', { jobId: 'j1' });
    await writeFile(item.imagePath, await kitchenJpeg(2));
    // A run prepares each path once; the next run (a new preflighter) sees the new bytes.
    const changed = await decide(item, {
      preflighter: createPreflighter(),
      state: done,
      outDir: tmp.dir,
      retryFailed: false,
      verify: false,
    });
    expect(changed.fp).not.toBe(first.fp);
    expect(changed).toMatchObject({ action: 'submit', again: false });
    const prompt = await decide(
      { ...item, prompt: 'darker worktop' },
      {
        preflighter: createPreflighter(),
        state: undefined,
        outDir: tmp.dir,
        retryFailed: false,
        verify: false,
      },
    );
    expect(prompt.fp).not.toBe(changed.fp);
  });
});
