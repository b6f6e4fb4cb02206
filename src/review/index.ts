/**
 * The review step (docs/contract.md#review): after an item's result is downloaded, its result is
 * compared with its source (`analyse.ts`) off the critical path, one at a time, and the verdict is
 * journaled as a `reviewed` record, which report.json, report.csv and report.html show.
 */
import path from 'node:path';
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import type { RunEvent } from '../pipeline/events.js';
import type { ItemRecord } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import { DEFAULT_THRESHOLD, DuplicateIndex, reviewResult, signature } from './analyse.js';

export { DEFAULT_THRESHOLD } from './analyse.js';

/** What the reviewer reads and writes. */
export interface ReviewerDeps {
  outDir: string;
  /** The items' states (the run's store or a journal's table). */
  states: { get(id: string): ItemState | undefined };
  /** Journals the verdict. */
  record(record: Extract<ItemRecord, { t: 'reviewed' }>): Promise<void>;
  logger: Logger;
  /** A signal under this score is a flag. @default DEFAULT_THRESHOLD */
  threshold?: number;
  /** Review items again that were reviewed before (`review`, with a new threshold). @default false */
  again?: boolean;
}

/** Reviews downloaded results one at a time; {@link drain} before the final report. */
export class Reviewer {
  readonly #deps: ReviewerDeps;
  readonly #queue = new PQueue({ concurrency: 1 });
  readonly #duplicates = new DuplicateIndex();
  /** Items reviewed, and of them flagged. */
  readonly stats = { reviewed: 0, flagged: 0, skipped: 0 };

  constructor(deps: ReviewerDeps) {
    this.#deps = deps;
  }

  /** Listens to item events: a result that arrived now, or one an earlier run left unreviewed. */
  readonly onEvent = (event: RunEvent): void => {
    if (event.type === 'item' && (event.status === 'succeeded' || event.status === 'skipped'))
      this.add(event.id);
  };

  /** Queues the item's review when it has a result on disk (and no review yet, unless `again`). */
  add(id: string): void {
    const state = reviewable(this.#deps.states.get(id));
    if (!state || (state.review && !this.#deps.again)) return;
    void this.#queue.add(() => this.#review(id));
  }

  /** Resolves when every queued review is done. */
  async drain(): Promise<void> {
    await this.#queue.onIdle();
  }

  /** Drops the reviews not started (a stopping run; `review` does them later). */
  stop(): void {
    this.#queue.clear();
  }

  async #review(id: string): Promise<void> {
    const state = reviewable(this.#deps.states.get(id));
    if (!state?.output) return;
    const source = state.src?.path;
    if (!source) {
      this.stats.skipped++;
      return;
    }
    try {
      const [src, result] = await Promise.all([
        signature(source),
        signature(path.join(this.#deps.outDir, state.output)),
      ]);
      const review = reviewResult(src, result, {
        module: state.module,
        threshold: this.#deps.threshold ?? DEFAULT_THRESHOLD,
      });
      const flags = [...review.flags];
      let score = review.score;
      const earlier = this.#duplicates.check(id, result.hash);
      if (earlier !== null) {
        flags.push('duplicate');
        score = Math.min(score, 0.25);
        this.#deps.logger.info(
          { event: 'review_duplicate', item: id, same_as: earlier },
          'result duplicates another item',
        );
      }
      await this.#deps.record({ t: 'reviewed', id, fp: state.fp, score, flags });
      this.stats.reviewed++;
      if (flags.length > 0) {
        this.stats.flagged++;
        this.#deps.logger.info({ event: 'review_flagged', item: id, score, flags }, 'result worth a look');
      }
    } catch (error) {
      // A file that cannot be read now (moved source, a disk hiccup): no verdict, not a run failure.
      this.stats.skipped++;
      this.#deps.logger.warn(
        { event: 'review_skipped', item: id, err: (error as Error).message },
        'could not review the result',
      );
    }
  }
}

/** The state when the item has a result on disk to review, else undefined. */
function reviewable(state: ItemState | undefined): ItemState | undefined {
  return state?.phase === 'downloaded' && state.output ? state : undefined;
}
