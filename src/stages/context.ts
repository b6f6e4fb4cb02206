import type { Logger } from 'pino';
import type { KitchenClient } from '../api/client.js';
import type { ServiceGate } from '../api/gate.js';
import type { ItemStore, RecordOptions } from '../state/items.js';
import type { ItemRecord } from '../state/records.js';
import type { OutputStore } from '../storage/types.js';
import type { PreparedUpload } from './decide.js';
import type { FailureContext, Outcome, Stage } from './outcomes.js';
import { failureOutcome } from './outcomes.js';
import type { PollScheduler } from './poll-schedule.js';

/**
 * Where a stage records what it learnt: the journal under `run` ({@link ItemStore}), Redis under a
 * worker (`src/worker/store.ts`). Resolves once the record is durable (`sync`: before a POST
 * leaves, after a 202, after a download; unless `wait: false`) and applied to the item's state object.
 */
export interface StageStore {
  record(record: Exclude<ItemRecord, { t: 'item' }>, options?: RecordOptions): Promise<void>;
}

/**
 * What a stage may use: a narrow context, the same whether the stages run under the local flow
 * (`pipeline/flow.ts`) or a worker (`worker/items.ts`), both driving `sequence.ts`. A stage takes an item's state and this, does its one step,
 * journals what it learnt from the service through `store`, and returns an {@link Outcome}; it
 * never decides what comes next.
 */
export interface StageContext<Store extends StageStore = StageStore> {
  client: KitchenClient;
  /** The one door to the service: rate governor and retry policy. */
  gate: ServiceGate;
  store: Store;
  /** When each job may be polled (the 2 s floor, the first poll's estimate). */
  polls: PollScheduler;
  logger: Logger;
  /** Soft stop: no new attempts; waits end early. */
  stop: AbortSignal;
  /** Hard stop: requests in flight are aborted. */
  abort: AbortSignal;
  /** Where results are written, as messages about the disk name it (`<out>/results`). */
  resultsDir: string;
  /** The run's outputs: a result is staged, verified and committed under `results/` here. */
  output: OutputStore;
  /** Reads the bytes to upload (recent ones are kept for the other styles of the image). */
  uploads: { read(upload: PreparedUpload): Promise<Uint8Array> };
}

/** The outcome table applied with what the context knows (see `outcomes.ts`). */
export function failed(ctx: StageContext, stage: Stage, error: unknown, jobId?: string | null): Outcome {
  const facts: FailureContext = {
    stopping: ctx.stop.aborted,
    unreachable: ctx.gate.unreachable,
    baseUrl: ctx.client.baseUrl,
    resultsDir: ctx.resultsDir,
    ...(jobId !== undefined ? { jobId } : {}),
  };
  return failureOutcome(stage, error, facts);
}
