import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ResultDecodeError, StateError } from '../../src/errors.js';
import { checkDecodes, downloadItem, resultPath } from '../../src/stages/download.js';
import { pollJob } from '../../src/stages/poll.js';
import { submitItem } from '../../src/stages/submit.js';
import { sha256 } from '../../src/util/fs.js';
import { ofKind, type StageWorld, stageWorld } from '../helpers/stages.js';
import { kitchenJpeg } from '../support/images.js';

/** An item whose job succeeded: submitted and polled through the stages. */
async function succeeded(w: StageWorld, n = 1) {
  const { item, state, upload } = await w.item(n);
  const submitted = await submitItem(w.ctx, item, state, upload, { retryAmbiguous: false });
  if (submitted.kind !== 'accepted') throw new Error(`expected accepted, got ${submitted.kind}`);
  const ended = await pollJob(w.ctx, state, { jobTimeoutMs: 30_000 });
  if (ended.kind !== 'ended' || ended.status !== 'succeeded')
    throw new Error(`expected success, got ${ended.kind}`);
  return { item, state };
}

const storageGets = (w: StageWorld) => w.sandbox.stats.storageRequests.length;

describe('download stage (alone, against the sandbox)', () => {
  it('saves the result whole under results/<id>.<detected ext> and journals `downloaded` with its sha256', async () => {
    const w = await stageWorld();
    const { item, state } = await succeeded(w);
    const outcome = await downloadItem(w.ctx, state);
    expect(outcome).toEqual({ kind: 'downloaded', jobId: state.jobId });
    expect(await readdir(w.ctx.resultsDir)).toEqual([`${item.id}.jpg`]);
    const bytes = await readFile(path.join(w.ctx.resultsDir, `${item.id}.jpg`));
    const [record] = ofKind(await w.records(), 'downloaded');
    expect(record).toMatchObject({
      output: `results/${item.id}.jpg`,
      sha256: sha256(bytes),
      bytes: bytes.length,
    });
    expect(state.phase).toBe('downloaded');
  });

  it('a body cut short is retried, then incomplete/download_failed: no file, no .part left', async () => {
    const w = await stageWorld({ retry: { retries: 2, baseMs: 10, capMs: 20 } });
    const { state } = await succeeded(w);
    w.sandbox.setFaults({ resultFault: 'truncated' });
    const outcome = await downloadItem(w.ctx, state);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'download_failed' } });
    expect(storageGets(w)).toBe(3);
    expect(await readdir(w.ctx.resultsDir)).toEqual([]);
    expect(state.phase).toBe('succeeded');
  });

  it('a body of undeclared length cut short is caught by decoding it: retried, then download_failed, nothing saved', async () => {
    const w = await stageWorld({ retry: { retries: 1, baseMs: 10, capMs: 20 } });
    const { state } = await succeeded(w);
    w.sandbox.setFaults({ resultFault: 'truncated-unsized' });
    const outcome = await downloadItem(w.ctx, state);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'download_failed' } });
    expect(outcome.kind === 'incomplete' && outcome.error.message).toMatch(/does not decode/);
    expect(storageGets(w)).toBe(2);
    expect(await readdir(w.ctx.resultsDir)).toEqual([]);
    expect(ofKind(await w.records(), 'downloaded')).toEqual([]);
    expect(state.phase).toBe('succeeded');
  });

  it('an HTML page served as the result is refused by its bytes (download_failed), never saved', async () => {
    const w = await stageWorld({ retry: { retries: 1, baseMs: 10, capMs: 20 } });
    const { state } = await succeeded(w);
    w.sandbox.setFaults({ resultFault: 'wrong-type' });
    const outcome = await downloadItem(w.ctx, state);
    expect(outcome).toMatchObject({ kind: 'incomplete', error: { code: 'download_failed' } });
    expect(outcome.kind === 'incomplete' && outcome.error.message).toMatch(/not a JPEG, PNG or WebP/);
    expect(await readdir(w.ctx.resultsDir)).toEqual([]);
  });

  it('an expired URL re-polls the job once for a fresh one and then downloads', async () => {
    const w = await stageWorld({ sandbox: { faults: { resultTtlMs: 50 } } });
    const { state } = await succeeded(w);
    const stale = state.imageUrl;
    await new Promise((resolve) => setTimeout(resolve, 80));
    const outcome = await downloadItem(w.ctx, state);
    expect(outcome.kind).toBe('downloaded');
    expect(state.imageUrl).not.toBe(stale);
    // Two `ended` records: the poll's, and the refresh's with the fresh URL.
    expect(ofKind(await w.records(), 'ended').map((r) => r.image_url)).toEqual([stale, state.imageUrl]);
  });

  it('does nothing once the run is stopping', async () => {
    const w = await stageWorld();
    const { state } = await succeeded(w);
    w.stop();
    expect(await downloadItem(w.ctx, state)).toEqual({ kind: 'stopped' });
    expect(storageGets(w)).toBe(0);
  });
});

describe('result naming and the decode check', () => {
  it('names results by id and detected format, and refuses ids that would leave results/', () => {
    expect(resultPath('/out/results', 'k1__modern', 'webp')).toBe('/out/results/k1__modern.webp');
    expect(resultPath('/out/results', '..', 'png')).toBe('/out/results/...png');
    expect(() => resultPath('/out/results', '../x', 'jpeg')).toThrow(StateError);
  });

  it('checkDecodes passes a whole image and throws ResultDecodeError (bad_result) on a cut one', async () => {
    const w = await stageWorld();
    const whole = await kitchenJpeg(3, 640, 480);
    const good = w.tmp.file('good.jpg');
    const cut = w.tmp.file('cut.jpg');
    await writeFile(good, whole);
    await writeFile(cut, whole.subarray(0, Math.floor(whole.length / 2)));
    await expect(checkDecodes(good)).resolves.toBeUndefined();
    const error = await checkDecodes(cut).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResultDecodeError);
    expect(error).toMatchObject({ code: 'bad_result' });
  });
});
