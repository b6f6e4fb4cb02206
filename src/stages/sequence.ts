/**
 * The steps of one item, written once: decide (preflight included) → submit → poll → download →
 * review → settle. Two drivers run them: the local flow (`src/pipeline/flow.ts`: journal, p-queue)
 * and the worker (`src/worker/run.ts`: BullMQ lock, Redis state). A driver says where state is
 * recorded (`ctx.store`), how an item may be submitted (`admit`), how a result is reviewed, and
 * where each part runs: the steps are an async generator that yields the {@link Lane} its next part
 * needs, so the flow moves the item to another queue there, and the worker just goes on. As bullmq's
 * `worker.ts` hands locking to `lock-manager.ts`, the sequence hands everything that differs
 * between the drivers to {@link ItemDriver}, and the drivers only route what it returns.
 */
import type { KitchenError } from '../errors.js';
import type { Preflighter } from '../preflight/index.js';
import type { ItemIdentity } from '../state/items.js';
import type { ItemState } from '../state/state.js';
import type { Item, ItemError } from '../types.js';
import type { StageContext, StageStore } from './context.js';
import { type Decision, decide, plannedIdentity, releaseDecision } from './decide.js';
import { downloadItem } from './download.js';
import type { Outcome } from './outcomes.js';
import { pollJob } from './poll.js';
import { submitItem } from './submit.js';

/**
 * Where the next part of an item's steps runs: `job` holds one of the service's job slots (submit
 * and poll), `download` fetches the result. Before the first yield the item is being decided.
 */
export type Lane = 'job' | 'download';

/** What an item's steps came to, for its driver to report (and, for some, to act on). */
export type Settled =
  /** The result is on disk (and reviewed, or queued for review). */
  | { status: 'succeeded'; jobId: string }
  /** The job failed at the service (`jobId`), or the service refused the item (`jobId` null). */
  | { status: 'failed'; jobId: string | null; error: ItemError | null }
  /** Rejected before submission (the `rejected` record is written when the reason changed). */
  | { status: 'rejected'; error: ItemError }
  /** Finished earlier: nothing to do (`state` says how it ended). */
  | { status: 'skipped'; state: ItemState }
  /**
   * Not finished now (the `incomplete` record is written); `fatal` when the run must stop too,
   * `halt` when no new job may start (see the outcome's `halt`).
   */
  | { status: 'incomplete'; error: ItemError; fatal?: KitchenError; halt?: boolean }
  /** Left where its state says: the run is stopping. */
  | { status: 'stopped' }
  /** The run must stop (refused key, broken disk, a bug). */
  | { status: 'fatal'; error: KitchenError };

/** The item states a driver keeps: the journal's {@link ItemStore}, or one item's Redis hash. */
export interface ItemStates extends StageStore {
  /** The item's state as last recorded, if any. */
  get(id: string): ItemState | undefined;
  /** Records the item as planned and returns the state object every later record updates. */
  plan(identity: ItemIdentity): Promise<ItemState>;
}

/** What a driver supplies to the steps: everything that differs between the local flow and a worker. */
export interface ItemDriver {
  /** Client, gate, poll schedule, logger, stop signals, and where state is recorded. */
  readonly ctx: StageContext<ItemStates>;
  readonly preflighter: Preflighter;
  /** A job not ended this long after polling began is `incomplete/job_timeout`. */
  readonly jobTimeoutMs: number;
  /** Resend on any transient failure, also when the job may exist (`--retry-ambiguous`). */
  readonly retryAmbiguous: boolean;
  /**
   * Items may arrive from another process that polled their job a moment ago (a worker that handed
   * the item back): the 2 s floor (docs/contract.md#poll-floor) then counts from the item's arrival.
   */
  readonly polledElsewhere: boolean;
  /** How this item is decided: submit a failed job again, check results on disk, end a preflight early. */
  decideOptions(item: Item): { retryFailed: boolean; verify: boolean; signal?: AbortSignal };
  /**
   * Why the item may not be submitted now (a cost guard, a time window, an earlier send whose
   * outcome is unknown), or null: it goes, and the driver counts it.
   */
  admit(item: Item, state: ItemState): Promise<ItemError | null>;
  /** A job was accepted: its id is journaled. */
  accepted(id: string, jobId: string): void;
  /** Reviews the item's result, if it has one not yet reviewed (now, or queued: the driver's choice). */
  review(id: string): Promise<void>;
}

/** One item's steps; `next()` runs them to the next {@link Lane} change, the return value is how they ended. */
export type ItemSteps = AsyncGenerator<Lane, Settled, void>;

/**
 * The item's steps, from its decision to how it settled. Throws only what no outcome covers (a
 * state write that failed outside a stage, a decision that could not be made): the driver's fault
 * handling decides what that means for the run.
 */
export async function* itemSteps(item: Item, driver: ItemDriver): ItemSteps {
  const { ctx } = driver;
  const decision = await decide(item, {
    preflighter: driver.preflighter,
    state: ctx.store.get(item.id),
    outDir: ctx.output,
    ...driver.decideOptions(item),
  });
  // The source stays on disk until the upload is accepted, or the item ends some other way.
  const source = holdOf(driver, item, decision);
  try {
    if (decision.action !== 'submit') await source.release();
    const state = await ctx.store.plan(plannedIdentity(item, decision));
    switch (decision.action) {
      case 'reject':
        // A remote source that cannot be read now: a rerun tries again, nothing to fix by hand.
        if (decision.error.code === 'source_unavailable')
          return await settle(ctx, state, { kind: 'incomplete', error: decision.error });
        return await rejected(ctx, state, decision.error);
      case 'skip':
        // A result an earlier run (or one with --no-review) left unreviewed.
        await driver.review(item.id);
        return { status: 'skipped', state };
      case 'download':
        break;
      case 'poll':
      case 'submit': {
        yield 'job';
        let outcome: Outcome | undefined;
        if (decision.action === 'submit') {
          const refusal = await driver.admit(item, state);
          outcome = refusal
            ? { kind: 'incomplete', error: refusal }
            : await submitItem(ctx, item, state, decision.upload, {
                retryAmbiguous: driver.retryAmbiguous,
                accepted: source.release,
              });
          await source.release();
          if (outcome.kind === 'accepted') driver.accepted(item.id, outcome.jobId);
        } else if (driver.polledElsewhere) {
          ctx.polls.polled(item.id);
        }
        if (!outcome || outcome.kind === 'accepted') {
          outcome = await pollJob(ctx, state, { jobTimeoutMs: driver.jobTimeoutMs });
        }
        if (outcome.kind !== 'ended' || outcome.status !== 'succeeded')
          return await settle(ctx, state, outcome);
        break;
      }
    }
    yield 'download';
    const outcome = await downloadItem(ctx, state);
    if (outcome.kind === 'downloaded') await driver.review(item.id);
    return await settle(ctx, state, outcome);
  } finally {
    await source.release();
  }
}

/** The decision's hold on its source, given back once (the first call; later calls do nothing). */
function holdOf(driver: ItemDriver, item: Item, decision: Decision): { release: () => Promise<void> } {
  let held = true;
  return {
    release: async () => {
      if (!held) return;
      held = false;
      await releaseDecision(driver.preflighter, item, decision);
    },
  };
}

/**
 * Runs all of an item's steps in place, for a driver that holds the item throughout (a worker
 * holding its BullMQ lock).
 */
export async function runItemSteps(item: Item, driver: ItemDriver): Promise<Settled> {
  const steps = itemSteps(item, driver);
  for (;;) {
    const next = await steps.next();
    if (next.done) return next.value;
  }
}

/**
 * Rejected before submission. Recorded again only when the reason changed, the code or the message
 * (a file replaced by another unreadable one says so), so a rerun of an unchanged catalogue writes
 * nothing new.
 */
async function rejected(ctx: StageContext, state: ItemState, error: ItemError): Promise<Settled> {
  const same =
    state.phase === 'rejected' && state.error?.code === error.code && state.error.message === error.message;
  if (!same) await ctx.store.record({ t: 'rejected', id: state.id, fp: state.fp, error });
  return { status: 'rejected', error };
}

/** What a stage's last outcome means for the item; an incomplete item's reason is recorded here. */
async function settle(ctx: StageContext, state: ItemState, outcome: Outcome): Promise<Settled> {
  const { id } = state;
  switch (outcome.kind) {
    case 'downloaded':
      return { status: 'succeeded', jobId: outcome.jobId };
    // A succeeded job is downloaded before it settles: an `ended` here failed at the service.
    case 'ended':
      return { status: 'failed', jobId: outcome.jobId, error: outcome.error };
    case 'refused':
      return { status: 'failed', jobId: null, error: outcome.error };
    case 'incomplete': {
      const { error } = outcome;
      await ctx.store.record({ t: 'incomplete', id, fp: state.fp, error });
      ctx.logger.info({ event: 'incomplete', item: id, code: error.code }, error.message);
      return {
        status: 'incomplete',
        error,
        ...(outcome.fatal ? { fatal: outcome.fatal } : {}),
        ...(outcome.halt ? { halt: true } : {}),
      };
    }
    case 'fatal':
      return { status: 'fatal', error: outcome.error };
    case 'accepted':
    case 'stopped':
      return { status: 'stopped' };
  }
}
