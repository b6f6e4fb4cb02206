import { Interner } from '../util/intern.js';
import type { JournalWriter } from './journal.js';
import type { ItemRecord, JournalRecord } from './records.js';
import { applyRecord, type ItemState, internItem, newItemState, type Phase } from './state.js';

/** What an item is, as its `item` record says: written when it is first seen or changed. */
export type ItemIdentity = Omit<Extract<JournalRecord, { t: 'item' }>, 't'>;

/** Options of {@link ItemStore}. */
export interface ItemStoreOptions {
  /**
   * Called once when an append fails (disk full, I/O error): the journal is broken from then on and
   * the run must stop submitting, since a job id it cannot record is a job it may pay for twice.
   */
  onFailure?: (error: unknown) => void;
  /** Shares equal strings between items (the fold's, so journal and live items share too). */
  interner?: Interner;
}

/**
 * The live state of every item, owned together with the journal: each change is one call that
 * appends the record and applies it to the state, so the live state always equals a replay of the
 * journal (`foldJournal`), which is what a resumed run starts from. It also counts the phases of the
 * items planned in this run, so progress needs no walk over a catalogue of 10^5 items.
 */
export class ItemStore {
  readonly #journal: JournalWriter;
  readonly #states: Map<string, ItemState>;
  readonly #onFailure: ((error: unknown) => void) | undefined;
  readonly #interner: Interner;
  /** Items planned in this run (journal items of other manifests or shards are not counted). */
  readonly #planned = new Set<ItemState>();
  readonly #phases = new Map<Phase, number>();

  constructor(journal: JournalWriter, states: Map<string, ItemState>, options: ItemStoreOptions = {}) {
    this.#journal = journal;
    this.#states = states;
    this.#onFailure = options.onFailure;
    this.#interner = options.interner ?? new Interner();
  }

  /** The item's state, if the journal knows it. */
  get(id: string): ItemState | undefined {
    return this.#states.get(id);
  }

  /** How many items planned in this run stand in `phase` now. */
  count(phase: Phase): number {
    return this.#phases.get(phase) ?? 0;
  }

  /**
   * Records the item as planned: a new `item` record when the item is new or its fingerprint changed
   * (which starts it afresh), or when its image path or source identity moved; nothing otherwise.
   */
  async plan(identity: ItemIdentity): Promise<ItemState> {
    const record = internItem({ t: 'item', ...identity }, this.#interner);
    const known = this.#states.get(record.id);
    let state: ItemState;
    if (known && known.fp === record.fp) {
      const same = known.image === record.image && JSON.stringify(known.src) === JSON.stringify(record.src);
      if (!same) {
        await this.#append(record, false);
        known.image = record.image;
        known.src = record.src;
      }
      state = known;
    } else {
      await this.#append(record, false);
      const fresh = newItemState(record);
      this.#count(known, -1);
      // Keep first-seen order in the Map, as a replay does.
      if (known) Object.assign(known, fresh);
      else this.#states.set(record.id, fresh);
      state = known ?? fresh;
      this.#count(known, +1);
    }
    if (!this.#planned.has(state)) {
      this.#planned.add(state);
      this.#count(state, +1);
    }
    return state;
  }

  /**
   * Appends a record about a planned item and applies it. With `sync`, resolves only once the record
   * is on disk (before a POST leaves, after a 202, after a download).
   */
  async record(record: Exclude<ItemRecord, { t: 'item' }>, options: { sync?: boolean } = {}): Promise<void> {
    await this.#append(record, options.sync ?? false);
    const state = this.#states.get(record.id);
    if (!state) return;
    this.#count(state, -1);
    applyRecord(state, record);
    this.#count(state, +1);
  }

  #count(state: ItemState | undefined, delta: 1 | -1): void {
    if (state && this.#planned.has(state)) this.#phases.set(state.phase, this.count(state.phase) + delta);
  }

  async #append(record: ItemRecord, sync: boolean): Promise<void> {
    try {
      await this.#journal.append(record, { sync });
    } catch (error) {
      this.#onFailure?.(error);
      throw error;
    }
  }
}
