import type { JournalWriter } from './journal.js';
import type { ItemRecord, JournalRecord, SourceIdentity } from './records.js';
import { applyRecord, type ItemState, newItemState } from './state.js';

/** What an item is, as its `item` record says: written when it is first seen or changed. */
export type ItemIdentity = Omit<Extract<JournalRecord, { t: 'item' }>, 't'>;

/** Options of {@link ItemStore}. */
export interface ItemStoreOptions {
  /**
   * Called once when an append fails (disk full, I/O error): the journal is broken from then on and
   * the run must stop submitting, since a job id it cannot record is a job it may pay for twice.
   */
  onFailure?: (error: unknown) => void;
}

/**
 * The live state of every item, owned together with the journal: each change is one call that
 * appends the record and applies it to the state, so the live state always equals a replay of the
 * journal (`foldJournal`), which is what a resumed run starts from.
 */
export class ItemStore {
  readonly #journal: JournalWriter;
  readonly #states: Map<string, ItemState>;
  readonly #onFailure: ((error: unknown) => void) | undefined;

  constructor(journal: JournalWriter, states: Map<string, ItemState>, options: ItemStoreOptions = {}) {
    this.#journal = journal;
    this.#states = states;
    this.#onFailure = options.onFailure;
  }

  /** The item's state, if the journal knows it. */
  get(id: string): ItemState | undefined {
    return this.#states.get(id);
  }

  /**
   * Records the item as planned: a new `item` record when the item is new or its fingerprint changed
   * (which starts it afresh), or when its image path or source identity moved; nothing otherwise.
   */
  async plan(identity: ItemIdentity): Promise<ItemState> {
    const record = { t: 'item' as const, ...identity };
    const known = this.#states.get(identity.id);
    if (known && known.fp === identity.fp) {
      const same =
        known.image === identity.image && JSON.stringify(known.src) === JSON.stringify(identity.src);
      if (!same) {
        await this.#append(record, false);
        known.image = identity.image;
        known.src = identity.src as SourceIdentity;
      }
      return known;
    }
    await this.#append(record, false);
    const fresh = newItemState(record);
    // Keep first-seen order in the Map, as a replay does.
    if (known) {
      Object.assign(known, fresh);
      return known;
    }
    this.#states.set(identity.id, fresh);
    return fresh;
  }

  /**
   * Appends a record about a planned item and applies it. With `sync`, resolves only once the record
   * is on disk (before a POST leaves, after a 202, after a download).
   */
  async record(record: Exclude<ItemRecord, { t: 'item' }>, options: { sync?: boolean } = {}): Promise<void> {
    await this.#append(record, options.sync ?? false);
    const state = this.#states.get(record.id);
    if (state) applyRecord(state, record);
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
