/**
 * The review step (docs/contract.md#review): after an item's result is downloaded, its result is
 * compared with its source (`analyse.ts`) off the critical path, in a thread of its own
 * (`thread.ts`) with a few reviews at a time, and the verdict is journaled as a `reviewed` record,
 * which report.json, report.csv and report.html show.
 */
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { RunEvent } from '../pipeline/events.js';
import type { ItemRecord } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import { startThread } from '../util/thread.js';
import { DEFAULT_THRESHOLD, DuplicateIndex, type ReviewFlag } from './analyse.js';
import type { ReviewReply, ReviewRequest, SourceSample } from './thread.js';

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

/**
 * Reviews in flight at once: the thread decodes one pair while it compares another, and the
 * requests waiting in its inbox stay few (the rest wait here as ids).
 */
const IN_FLIGHT = 4;

/** The score of a result that duplicates another item's (a flag under the default threshold). */
const DUPLICATE_SCORE = 0.25;

/** Thread failures (it could not start, or it died) after which the reviews left are skipped. */
const THREAD_FAILURES = 3;

/**
 * Reviews downloaded results in a thread of its own; {@link drain} before the final report, then
 * {@link close}. Items waiting for their review are kept as their ids alone (8 bytes each: the
 * strings are the store's), so a review that falls behind an instant service does not grow memory
 * by more than that.
 */
export class Reviewer {
  readonly #deps: ReviewerDeps;
  #pending: string[] = [];
  #head = 0;
  #active = 0;
  #idle: Array<() => void> = [];
  readonly #duplicates = new DuplicateIndex();
  readonly #waiting = new Map<number, (reply: ReviewReply) => void>();
  #thread: Worker | undefined;
  #sent = 0;
  #failures = 0;
  /** Items reviewed, and of them flagged; sources the thread decoded itself (the others were remembered or handed over). */
  readonly stats = { reviewed: 0, flagged: 0, skipped: 0, sourcesDecoded: 0 };

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
    this.#pending.push(id);
    this.#pump();
  }

  /**
   * Reviews the item now (worker mode: while the worker still holds it, so the verdict is written
   * under its lock); resolves when the verdict is recorded or the review was skipped.
   */
  async reviewNow(id: string): Promise<void> {
    const state = reviewable(this.#deps.states.get(id));
    if (!state || (state.review && !this.#deps.again)) return;
    await this.#review(id).catch((error: unknown) => this.#lost(id, error));
  }

  /**
   * Hands the thread a source's rendition decoded elsewhere (the preflight's check of an as-is
   * upload), keyed by the source's sha256, so that its reviews need not decode it again.
   */
  offerSource(key: string, sample: Omit<SourceSample, 'kind' | 'key'>): void {
    if (this.#failures >= THREAD_FAILURES) return;
    const thread = this.#ensureThread();
    thread.postMessage({ kind: 'source', key, ...sample } satisfies SourceSample);
    // No reply comes: the message alone must not keep the process alive.
    if (this.#waiting.size === 0) thread.unref();
  }

  /** Writes run.log's `review_end` line: results reviewed, flagged and skipped, sources decoded here. */
  logEnd(): void {
    const { reviewed, flagged, skipped, sourcesDecoded } = this.stats;
    this.#deps.logger.info(
      { event: 'review_end', reviewed, flagged, skipped, sources_decoded: sourcesDecoded },
      `reviewed ${reviewed} results, ${flagged} worth a look`,
    );
  }

  /** Resolves when every queued review is done. */
  drain(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Drops the reviews not started (a stopping run; `review` does them later). */
  stop(): void {
    this.#pending = [];
    this.#head = 0;
    this.#pump();
  }

  /** Stops the thread (after {@link drain}; a review still in flight is dropped). */
  async close(): Promise<void> {
    this.stop();
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.terminate();
    for (const [n, answer] of [...this.#waiting]) answer({ n, ok: false, error: 'the review was stopped' });
  }

  /** Starts reviews while there is room in flight; wakes {@link drain} when all are done. */
  #pump(): void {
    while (this.#active < IN_FLIGHT && this.#head < this.#pending.length) {
      const id = this.#pending[this.#head++]!;
      this.#active++;
      this.#review(id)
        .catch((error: unknown) => this.#lost(id, error))
        .finally(() => {
          this.#active--;
          this.#pump();
        });
    }
    // Forget the ids already started, now and then, so the list does not keep the whole catalogue.
    if (this.#head > 4096 && this.#head * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#head);
      this.#head = 0;
    }
    if (this.#isIdle()) for (const wake of this.#idle.splice(0)) wake();
  }

  /** The verdict could not be recorded (the journal or the item's lock failed): a later run makes it. */
  #lost(id: string, error: unknown): void {
    this.stats.skipped++;
    this.#deps.logger.warn(
      { event: 'review_skipped', item: id, err: (error as Error).message },
      'could not record the review',
    );
  }

  #isIdle(): boolean {
    return this.#active === 0 && this.#head >= this.#pending.length;
  }

  async #review(id: string): Promise<void> {
    const state = reviewable(this.#deps.states.get(id));
    if (!state?.output) return;
    const source = state.src;
    if (!source?.path) {
      this.stats.skipped++;
      return;
    }
    const request = {
      source: source.path,
      sourceKey: source.sha256 || source.path,
      result: path.join(this.#deps.outDir, state.output),
      module: state.module,
      threshold: this.#deps.threshold ?? DEFAULT_THRESHOLD,
    };
    const reply = await this.#ask(request);
    if (!reply.ok) {
      // A file that cannot be read now (moved source, a disk hiccup): no verdict, not a run failure.
      this.stats.skipped++;
      this.#deps.logger.warn(
        { event: 'review_skipped', item: id, err: reply.error },
        'could not review the result',
      );
      return;
    }
    if (reply.decodedSource) this.stats.sourcesDecoded++;
    const flags = [...reply.flags] as ReviewFlag[];
    let score = reply.score;
    const earlier = this.#duplicates.check(id, reply.hash);
    // A duplicate is a signal like the others: it scores DUPLICATE_SCORE, a flag under the threshold.
    if (earlier !== null && DUPLICATE_SCORE < request.threshold) {
      flags.push('duplicate');
      score = Math.min(score, DUPLICATE_SCORE);
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
  }

  /** Sends one review to the thread (started on first use) and waits for its reply. */
  #ask(request: Omit<ReviewRequest, 'n'>): Promise<ReviewReply> {
    const n = ++this.#sent;
    if (this.#failures >= THREAD_FAILURES)
      return Promise.resolve({ n, ok: false, error: 'the review thread failed; run `review` later' });
    const thread = this.#ensureThread();
    return new Promise((resolve) => {
      this.#waiting.set(n, (reply) => {
        this.#waiting.delete(n);
        // An idle thread must not keep a finished process alive.
        if (this.#waiting.size === 0) this.#thread?.unref();
        resolve(reply);
      });
      thread.ref();
      thread.postMessage({ ...request, n } satisfies ReviewRequest);
    });
  }

  #ensureThread(): Worker {
    if (this.#thread) return this.#thread;
    const thread = startThread('thread', import.meta.url, {
      resourceLimits: { maxYoungGenerationSizeMb: 4 },
    });
    thread.on('message', (reply: ReviewReply) => this.#waiting.get(reply.n)?.(reply));
    const fail = (why: string): void => {
      if (this.#thread !== thread) return;
      this.#thread = undefined;
      this.#failures++;
      this.#deps.logger.warn({ event: 'review_thread_failed', err: why }, 'the review thread stopped');
      for (const [n, answer] of [...this.#waiting]) answer({ n, ok: false, error: why });
    };
    thread.on('error', (error) => fail(error.message));
    thread.on('exit', (code) => fail(`the review thread exited with code ${code}`));
    this.#thread = thread;
    return thread;
  }
}

/** The state when the item has a result on disk to review, else undefined. */
function reviewable(state: ItemState | undefined): ItemState | undefined {
  return state?.phase === 'downloaded' && state.output ? state : undefined;
}
