/**
 * Submit: one POST of a prepared image, journaled so that a crash can never lose a job id (the
 * `submitting` record is fsynced before the request leaves, `accepted` committed right after the 202). Resent
 * automatically only when the service cannot have created the job (docs/contract.md#rules).
 */
import { readFile } from 'node:fs/promises';
import { ApiError } from '../api/errors.js';
import type { ItemState } from '../state/state.js';
import type { Item } from '../types.js';
import { isoWithOffset } from '../util/time.js';
import { failed, type StageContext } from './context.js';
import type { PreparedUpload } from './decide.js';
import { type Outcome, serviceError } from './outcomes.js';

/**
 * The bytes of uploads, read once for all the styles of one image: a small cache of the most
 * recent files (by path, bounded in count and bytes), since the items of one image are submitted
 * close together. Saves five reads of six on a catalogue restyled in six styles.
 */
export class UploadReader {
  readonly #recent = new Map<string, Buffer>();
  #bytes = 0;

  constructor(
    readonly maxFiles = 32,
    readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  async read(upload: PreparedUpload): Promise<Buffer> {
    const known = this.#recent.get(upload.path);
    // The bytes are the ones whose size the preflight saw; a file replaced since is read again.
    if (known && known.length === upload.prepared.bytes) return known;
    const data = await readFile(upload.path);
    if (data.length <= this.maxBytes / 4) {
      this.#recent.delete(upload.path);
      this.#recent.set(upload.path, data);
      this.#bytes += data.length;
      for (const [path, old] of this.#recent) {
        if (this.#recent.size <= this.maxFiles && this.#bytes <= this.maxBytes) break;
        this.#recent.delete(path);
        this.#bytes -= old.length;
      }
    }
    return data;
  }
}

/** Options of {@link submitItem}. */
export interface SubmitOptions {
  /** Resend on any transient failure, also when the job may exist (`--retry-ambiguous`). */
  retryAmbiguous: boolean;
  /**
   * Called once the 202's job id is journaled: the upload's file is no longer needed (a remote
   * source's spooled copy is deleted with its last hold, `Preflighter.release`).
   */
  accepted?: () => Promise<void>;
}

/** Submits the item's prepared image; `accepted` when a job id is journaled. */
export async function submitItem(
  ctx: StageContext,
  item: Item,
  state: ItemState,
  upload: PreparedUpload,
  options: SubmitOptions,
): Promise<Outcome> {
  const { id } = item;
  const fp = state.fp;
  if (ctx.stop.aborted) return { kind: 'stopped' };
  try {
    const image = await ctx.uploads.read(upload);
    const job = await ctx.gate.call(
      options.retryAmbiguous ? 'submit-ambiguous' : 'submit',
      async () => {
        // Fsynced before the request leaves: a crash from here on counts as a possible duplicate.
        await ctx.store.record({ t: 'submitting', id, fp, at: isoWithOffset() }, { sync: true });
        try {
          return await ctx.client.createJob(
            {
              module: item.module,
              image,
              filename: upload.filename,
              contentType: upload.contentType,
              ...(item.style !== undefined ? { style: item.style } : {}),
              ...(item.prompt !== undefined ? { prompt: item.prompt } : {}),
              ...(item.configuration !== undefined ? { configuration: item.configuration } : {}),
            },
            { signal: ctx.abort },
          );
        } catch (error) {
          await recordAnswer(ctx, state, error);
          throw error;
        }
      },
      { signal: ctx.stop, label: id },
    );
    // Committed in the group commit that starts now, but not waited for: polling and the download
    // cost nothing, and the `downloaded` record (or the next POST's `submitting`) commits after it.
    await ctx.store.record(
      { t: 'accepted', id, fp, job_id: job.id, at: isoWithOffset() },
      { sync: true, wait: false },
    );
    ctx.polls.accepted(id, job.createdAt);
    ctx.logger.info({ event: 'accepted', item: id, job_id: job.id }, 'job accepted');
    await options.accepted?.();
    return { kind: 'accepted', jobId: job.id };
  } catch (error) {
    const outcome = failed(ctx, 'submit', error);
    if (outcome.kind === 'refused' && error instanceof ApiError) {
      ctx.logger.warn(
        { event: 'refused', item: id, status: error.status, code: error.serviceCode },
        error.message,
      );
    }
    return outcome;
  }
}

/**
 * What a failed POST certainly means for the submission count: the service said it created nothing
 * (429, 503, 401/403, a connection that never opened: `not_created`), or refused the item outright
 * (400/413/415/422: `refused`). An ambiguous failure records nothing: the submission stays counted.
 */
async function recordAnswer(ctx: StageContext, state: ItemState, error: unknown): Promise<void> {
  if (!(error instanceof ApiError) || error.mayHaveCreatedJob) return;
  const { id, fp } = state;
  if (error.transient || error.auth) {
    await ctx.store.record({ t: 'not_created', id, fp, error: serviceError(error) });
  } else {
    await ctx.store.record({ t: 'refused', id, fp, error: serviceError(error) });
  }
}
