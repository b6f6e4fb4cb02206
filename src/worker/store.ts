/**
 * The worker mode's item state (docs/contract.md#worker-mode): what `journal.jsonl` is to `run`, one
 * Redis hash of item id → the item's folded state (the same `ItemState` the journal folds to), so
 * that any worker can take an item over where another left it. Every write is fenced by the BullMQ
 * job's lock: a worker that lost its item (it stalled and another took it) can no longer write, and
 * a `submitting` mark it cannot write is a POST it does not send.
 */
import type { Redis } from 'ioredis';
import { KitchenError } from '../errors.js';
import type { StageStore } from '../stages/context.js';
import type { ItemIdentity } from '../state/items.js';
import type { ItemRecord } from '../state/records.js';
import { applyRecord, type ItemState, newItemState } from '../state/state.js';
import { DEFAULT_KEYS, type QueueKeys } from './queue.js';

/**
 * An item's state as Redis keeps it: the folded state, and the queued job it was written for. The
 * report matches a state to the item's current job by it, not by fingerprint alone: a worker that
 * rejects a row (an unknown style) or finds the image changed since `enqueue` plans the item under
 * another fingerprint than the one the job was queued with, and its outcome is still this job's.
 */
export type StoredState = ItemState & { queued?: string };

/** Writes the state only while the job's lock is ours. */
const PUT = `
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return 1
`;

/** This worker no longer holds the item: another worker took it over (this one stalled). */
export class LockLostError extends KitchenError {
  constructor(id: string) {
    super('lock_lost', `item ${id} was taken over by another worker; this worker leaves it`);
  }
}

type FencedRedis = Redis & { kbPut(...args: string[]): Promise<number> };

/** Reads an item's state in the queue, if any worker has written it. */
export async function loadState(
  redis: Redis,
  id: string,
  keys: QueueKeys = DEFAULT_KEYS,
): Promise<ItemState | undefined> {
  const text = await redis.hget(keys.states, id);
  if (!text) return undefined;
  const { queued: _, ...state } = JSON.parse(text) as StoredState;
  return state;
}

/** Whether a stored state is the outcome of the queued job `jobId` (of fingerprint `fp`). */
export function stateOfJob(state: StoredState, jobId: string, fp: string): boolean {
  return state.queued === jobId || state.fp === fp;
}

/**
 * One item's state while a worker holds its job: {@link plan} starts or continues it, every
 * {@link record} applies a journal record and writes the new state before it resolves (with AOF
 * `appendfsync always`, on disk; see docs/contract.md#worker-mode).
 */
export class JobStore implements StageStore {
  readonly #redis: FencedRedis;
  readonly #jobId: string;
  readonly #token: string;
  readonly #keys: QueueKeys;
  #state: ItemState | undefined;

  /**
   * @param jobId the queued job the item is held under, and `token` its lock's value this worker
   *   holds ('' for none: writes are not fenced, for tools that rebuild state), and `keys` its
   *   queue's (the state and the lock share the queue's hash tag: one slot for the fenced write)
   */
  constructor(
    redis: Redis,
    jobId: string,
    token: string,
    state: ItemState | undefined,
    keys: QueueKeys = DEFAULT_KEYS,
  ) {
    if (!('kbPut' in redis)) redis.defineCommand('kbPut', { numberOfKeys: 2, lua: PUT });
    this.#redis = redis as FencedRedis;
    this.#jobId = jobId;
    this.#token = token;
    this.#state = state;
    this.#keys = keys;
  }

  /** The item's state as last written (undefined before {@link plan} for an item never seen). */
  get state(): ItemState | undefined {
    return this.#state;
  }

  /** The state of the item this store holds, by its id (undefined for another id). */
  get(id: string): ItemState | undefined {
    return this.#state?.id === id ? this.#state : undefined;
  }

  /**
   * Records the item as planned: a fresh state when it is new or its fingerprint changed (which
   * starts it afresh, as in the journal), else its image, source and preflight brought up to date.
   */
  async plan(identity: ItemIdentity): Promise<ItemState> {
    const known = this.#state;
    let next: ItemState;
    if (known && known.fp === identity.fp) {
      next = {
        ...known,
        image: identity.image,
        src: identity.src,
        preflight: identity.preflight ?? known.preflight,
      };
    } else {
      next = newItemState({ t: 'item', ...identity });
    }
    await this.#put(next);
    this.#state = next;
    return next;
  }

  /** Applies a record about the item and writes the state; the planned object is updated in place. */
  async record(record: Exclude<ItemRecord, { t: 'item' }>): Promise<void> {
    const state = this.#state;
    if (!state || state.id !== record.id) throw new Error(`record for ${record.id} before it was planned`);
    const next = { ...state };
    applyRecord(next, record);
    await this.#put(next);
    Object.assign(state, next);
  }

  async #put(state: ItemState): Promise<void> {
    const stored: StoredState = { ...state, queued: this.#jobId };
    const written = await this.#redis.kbPut(
      this.#keys.states,
      this.#keys.lock(this.#jobId),
      this.#token,
      state.id,
      JSON.stringify(stored),
    );
    if (written !== 1) throw new LockLostError(state.id);
  }
}
