/**
 * The review step (docs/contract.md#review): after an item's result is downloaded, its result is
 * compared with its source (`compare.ts`) off the critical path, in a process of its own at the
 * lowest priority (`child.ts`), a few reviews at a time, and the verdict is journaled as a
 * `reviewed` record, which report.json, report.csv and report.html show.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Logger } from 'pino';
import type { RunEvent } from '../pipeline/events.js';
import type { ItemRecord } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import { toOutputStore } from '../storage/local-output.js';
import type { OutputStore } from '../storage/types.js';
import { startProcess } from '../util/fork.js';
import type { ReviewFatal, ReviewReply, ReviewRequest, SourceSample } from './child.js';
import { DuplicateIndex } from './compare.js';
import { DEFAULT_THRESHOLD, type ReviewFlag } from './flags.js';

export { DEFAULT_THRESHOLD } from './flags.js';

/** What the reviewer reads and writes. */
export interface ReviewerDeps {
  /** The run's outputs, or their folder: where each item's result is read. */
  outDir: OutputStore | string;
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
 * Reviews in flight at once: sent to the child, which decodes a few at a time and keeps the rest
 * at hand, so that it never waits for this process's event loop (busy with the run's requests
 * and journal) to send the next; the rest wait here as ids.
 */
const IN_FLIGHT = 32;

/** The score of a result that duplicates another item's (a flag under the default threshold). */
const DUPLICATE_SCORE = 0.25;

/** Child failures (it could not start, or it died) after which the reviews left are skipped. */
const CHILD_FAILURES = 3;

/**
 * Reviews downloaded results in a process of its own; {@link drain} before the final report, then
 * {@link close}. Items waiting for their review are kept as their ids alone (8 bytes each: the
 * strings are the store's), so a review that falls behind an instant service does not grow memory
 * by more than that.
 */
export class Reviewer {
  readonly #deps: ReviewerDeps;
  readonly #output: OutputStore;
  #pending: string[] = [];
  #head = 0;
  #active = 0;
  #idle: Array<() => void> = [];
  readonly #duplicates = new DuplicateIndex();
  readonly #waiting = new Map<number, (reply: ReviewReply) => void>();
  #child: ChildProcess | undefined;
  #sent = 0;
  #failures = 0;
  /** Items reviewed, and of them flagged; sources the child decoded itself (the others were remembered or handed over). */
  readonly stats = { reviewed: 0, flagged: 0, skipped: 0, sourcesDecoded: 0 };

  constructor(deps: ReviewerDeps) {
    this.#deps = deps;
    this.#output = toOutputStore(deps.outDir);
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
   * Hands the child a source's rendition decoded elsewhere (the preflight's check of an as-is
   * upload), keyed by the source's sha256, so that its reviews need not decode it again.
   */
  offerSource(key: string, sample: Omit<SourceSample, 'kind' | 'key'>): void {
    if (this.#failures >= CHILD_FAILURES) return;
    const child = this.#ensureChild();
    // No reply comes: the message alone must not keep the process alive.
    this.#send(child, { kind: 'source', key, ...sample } satisfies SourceSample);
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

  /** Stops the child (after {@link drain}; a review still in flight is dropped). */
  async close(): Promise<void> {
    this.stop();
    const child = this.#child;
    this.#child = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      // An idle child is unref'd: held again, so that this process waits for its exit.
      child.ref();
      child.kill();
      await exited;
    }
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
      // The child decodes local files: the result's reference is its path in a local folder.
      result: this.#output.localCopy
        ? await this.#output.localCopy(state.output).catch(() => this.#output.refOf(state.output!))
        : this.#output.refOf(state.output),
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

  /** Sends one review to the child (started on first use) and waits for its reply. */
  #ask(request: Omit<ReviewRequest, 'n'>): Promise<ReviewReply> {
    const n = ++this.#sent;
    if (this.#failures >= CHILD_FAILURES)
      return Promise.resolve({ n, ok: false, error: 'the review process failed; run `review` later' });
    const child = this.#ensureChild();
    return new Promise((resolve) => {
      this.#waiting.set(n, (reply) => {
        this.#waiting.delete(n);
        resolve(reply);
      });
      this.#send(child, { ...request, n } satisfies ReviewRequest);
    });
  }

  /**
   * Sends a message to the child. The child and its channel keep this process alive only while a
   * reply is awaited: an idle reviewer must not hold a finished run open.
   */
  #send(child: ChildProcess, message: ReviewRequest | SourceSample): void {
    // A child that has died answers no more; its 'exit' fails what waits, so the error is not lost.
    child.send(message, undefined, undefined, () => {});
    this.#hold(child);
  }

  /** Lets the child and its channel keep this process alive while a reply is awaited, not otherwise. */
  #hold(child: ChildProcess): void {
    if (this.#waiting.size > 0) {
      child.ref();
      child.channel?.ref();
    } else {
      child.unref();
      child.channel?.unref();
    }
  }

  #ensureChild(): ChildProcess {
    if (this.#child) return this.#child;
    const child = startProcess('child', import.meta.url, {
      env: childEnv(),
      // A small young generation: the child's garbage is a few buffers a review.
      execArgv: ['--max-semi-space-size=1'],
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    });
    let fatal: string | undefined;
    child.on('message', (message: ReviewReply | ReviewFatal) => {
      if ('kind' in message) fatal = message.error;
      else this.#waiting.get(message.n)?.(message);
      this.#hold(child);
    });
    const fail = (why: string): void => {
      if (this.#child !== child) return;
      this.#child = undefined;
      this.#failures++;
      this.#deps.logger.warn({ event: 'review_process_failed', err: why }, 'the review process stopped');
      for (const [n, answer] of [...this.#waiting]) answer({ n, ok: false, error: why });
    };
    child.on('error', (error) => fail(error.message));
    child.on('exit', (code, signal) =>
      fail(fatal ?? `the review process exited with ${signal ? `signal ${signal}` : `code ${code}`}`),
    );
    this.#child = child;
    this.#hold(child);
    return child;
  }
}

/** The state when the item has a result on disk to review, else undefined. */
function reviewable(state: ItemState | undefined): ItemState | undefined {
  return state?.phase === 'downloaded' && state.output ? state : undefined;
}

/**
 * The child's environment: this one's without the API key (the review never talks to the service,
 * and a secret in a child's environment is one more place to read it from), and with two malloc
 * arenas unless the operator chose otherwise: glibc's default (eight a core) keeps the freed
 * buffers of libvips' threads apart, which measured about 10 MB more resident memory.
 */
function childEnv(): NodeJS.ProcessEnv {
  const { KITCHEN_API_KEY: _key, ...env } = process.env;
  return { MALLOC_ARENA_MAX: '2', ...env };
}
