/**
 * Download: fetches a succeeded job's result into `results/` whole or not at all: stream to a file
 * the output store stages (`results/.<id>.<pid>.part` in a local folder), its length checked or
 * it decoded, fsync, commit it under its key (rename, fsync the folder), then journal it
 * (docs/faults.md D.19-D.23). An expired URL re-polls the job once for a fresh one.
 */
import path from 'node:path';
import { ApiError } from '../api/errors.js';
import { ResultDecodeError, StateError } from '../errors.js';
import { FORMAT_CONTENT_TYPE, FORMAT_EXTENSION, type UploadFormat } from '../image/format.js';
import { loadSharp } from '../image/sharp.js';
import type { ItemState } from '../state/state.js';
import type { OutputStore, StagedFile } from '../storage/types.js';
import { failed, type StageContext } from './context.js';
import type { Outcome } from './outcomes.js';
import { askJob } from './poll.js';

/**
 * A result up to this size is kept in memory while it downloads for a bucket, and put from there
 * (reading 10^4 cached files back cost the event loop about 1.1 s, measured); a larger one is read
 * back from its cache file. One per job slot at most (64 MiB at `--concurrency 64`).
 */
const KEEP_FOR_BUCKET = 1024 * 1024;

/**
 * The result's key, `results/<id>.<ext>`: the item id (already limited to `[A-Za-z0-9._-]` and 255
 * bytes) with the extension of the format detected from the bytes, never from the URL or a header.
 * Refuses a name that would leave `results/`.
 */
export function resultKey(id: string, format: UploadFormat): string {
  const name = `${id}.${FORMAT_EXTENSION[format]}`;
  if (/[/\\]/.test(id) || name === '.' || name === '..') {
    throw new StateError('bad_id', `item id ${id} escapes results/`);
  }
  return `results/${name}`;
}

/** The local file of {@link resultKey} in a results folder (where a local run's result lands). */
export function resultPath(resultsDir: string, id: string, format: UploadFormat): string {
  return path.resolve(resultsDir, path.posix.basename(resultKey(id, format)));
}

/** Downloads the item's result (its URL is in `state`); `downloaded` is journaled and fsynced. */
export async function downloadItem(ctx: StageContext, state: ItemState): Promise<Outcome> {
  const { id, fp } = state;
  const jobId = state.jobId!;
  let refreshed = false;
  if (ctx.stop.aborted) return { kind: 'stopped' };
  for (;;) {
    const url = state.imageUrl;
    if (!url) {
      return {
        kind: 'incomplete',
        error: { code: 'download_failed', message: 'the job succeeded without a result URL' },
      };
    }
    let staged: StagedFile | undefined;
    try {
      staged = await ctx.output.stage(`results/${id}`);
      const part = staged;
      const file = await ctx.gate.call(
        'download',
        async () => {
          // For a bucket, the verified bytes are kept to be put from memory, not read back.
          const got = await ctx.client.downloadResult(url, part.file, {
            signal: ctx.abort,
            keepBytes: ctx.output.remote ? KEEP_FOR_BUCKET : 0,
          });
          // A body of declared length that arrived whole is whole; any other is decoded to be sure.
          if (!got.lengthChecked) {
            await checkDecodes(part.file).catch(async (error: unknown) => {
              await part.discard();
              throw error;
            });
          }
          return got;
        },
        { signal: ctx.stop, label: id },
      );
      const output = resultKey(id, file.format);
      const stored = await staged.commit(
        output,
        {
          contentType: FORMAT_CONTENT_TYPE[file.format],
          sha256: file.sha256,
          // An earlier result of this item (a changed row's new job) is ours to replace.
          ...(state.output === output && state.sha256 ? { replaces: state.sha256 } : {}),
        },
        file.body ?? undefined,
      );
      if (state.output && state.output !== output) await removeEarlier(ctx.output, state.output);
      await ctx.store.record(
        {
          t: 'downloaded',
          id,
          fp,
          job_id: jobId,
          output,
          sha256: file.sha256,
          bytes: file.bytes,
          mtime_ms: stored.mtimeMs,
        },
        // The result is stored whole already; the record commits before anything recorded later
        // (the next POST's `submitting` waits for it), so the job slot need not.
        { sync: true, wait: false },
      );
      ctx.logger.info({ event: 'downloaded', item: id, job_id: jobId, bytes: file.bytes }, 'result saved');
      return { kind: 'downloaded', jobId };
    } catch (error) {
      await staged?.discard();
      if (isExpired(error) && !refreshed && !ctx.stop.aborted) {
        refreshed = true;
        ctx.logger.info(
          { event: 'result_url_expired', item: id, job_id: jobId },
          're-polling the job for a fresh URL',
        );
        if (await refreshUrl(ctx, state).catch(() => false)) continue;
      }
      return failed(ctx, 'download', error, jobId);
    }
  }
}

/** Polls the job once more (the 2 s floor kept) and journals a fresh result URL; false when there is none. */
async function refreshUrl(ctx: StageContext, state: ItemState): Promise<boolean> {
  const { id, fp } = state;
  const job = await askJob(ctx, id, state.jobId!, () => ctx.polls.waitTurn(id, 0, ctx.stop));
  if (job.status !== 'succeeded' || !job.imageUrl) return false;
  await ctx.store.record({
    t: 'ended',
    id,
    fp,
    job_id: job.id,
    status: 'succeeded',
    image_url: job.imageUrl,
    processing_time_ms: job.processingTimeMs ?? state.processingTimeMs,
    error: null,
  });
  return true;
}

/** A result of another format from an earlier download would shadow the new one in `results/`. */
async function removeEarlier(outputs: OutputStore, output: string): Promise<void> {
  // Only a result of ours: a key straight under results/ (the journal is data, not a command).
  if (/^results\/[^/\\]+$/.test(output) && output !== 'results/.' && output !== 'results/..') {
    await outputs.delete(output);
  }
}

/** 403/404/410 from the result storage: the URL expired or was rotated. */
function isExpired(error: unknown): boolean {
  return (
    error instanceof ApiError &&
    error.kind === 'http' &&
    (error.status === 403 || error.status === 404 || error.status === 410)
  );
}

/** A result must decode whole: a connection-close body can be cut short without any error. */
export async function checkDecodes(file: string): Promise<void> {
  const sharp = await loadSharp();
  try {
    // A full decode (shrink-on-load still reads every byte of the entropy-coded data) at a tiny
    // output size: ~10× cheaper than stats(), and it still fails on a cut-short file.
    await sharp(file, { failOn: 'error' }).resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch (error) {
    throw new ResultDecodeError(`result image does not decode: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
