import { Interner } from '../util/intern.js';
import type { Journal } from './journal.js';
import type { ItemRecord, JournalRecord } from './records.js';
import { applyRecord, type ItemState, internItem, newItemState, type Phase } from './state.js';
import type { ItemTable, StateLookup } from './table.js';

/** How a record is made durable (`StageStore.record` in stages/context.ts). */
export interface RecordOptions {
  /** Durable before the call resolves (a POST is about to leave; a 202 or a result has arrived). */
  sync?: boolean;
  /**
   * `false`: the record is applied at once and goes out in the next group commit, which the caller
   * does not wait for. Only for records whose caller sends nothing that costs before the next record
   * it waits for: every later record commits after it, so a crash loses it exactly as if the caller
   * had waited, and a failed commit still breaks the journal and stops the run. Without `sync` a
   * wait buys nothing but time: in a bucket run a record counts only once its segment is stored
   * (about 50 ms and a PUT later). @default true
   */
  wait?: boolean;
}

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
 * journal (`foldJournal`), which is what a resumed run starts from.
 *
 * Items are packed in the journal's {@link ItemTable}; only the items in flight are objects. The
 * flow takes an item out with {@link plan} (its stages share that object, which every record
 * updates) and puts it back with {@link release} when it is done with it for this run, so memory
 * holds a window of objects, not the catalogue. The store also counts the phases of the items
 * planned in this run, so progress needs no walk over a catalogue of 10^5 items.
 */
export class ItemStore implements StateLookup {
  readonly #journal: Journal;
  readonly #table: ItemTable;
  readonly #onFailure: ((error: unknown) => void) | undefined;
  readonly #interner: Interner;
  /** Items taken out by {@link plan} and not yet released: the flow holds these objects. */
  readonly #open = new Map<string, ItemState>();
  readonly #phases = new Map<Phase, number>();

  constructor(journal: Journal, table: ItemTable, options: ItemStoreOptions = {}) {
    this.#journal = journal;
    this.#table = table;
    this.#onFailure = options.onFailure;
    this.#interner = options.interner ?? new Interner();
  }

  /** The item's state, if the journal knows it (the flow's own object while the item is in flight). */
  get(id: string): ItemState | undefined {
    return this.#open.get(id) ?? this.#table.get(id);
  }

  /** Every item id the journal knows, in first-seen order. */
  keys(): Iterable<string> {
    return this.#table.keys();
  }

  /** How many items planned in this run stand in `phase` now. */
  count(phase: Phase): number {
    return this.#phases.get(phase) ?? 0;
  }

  /** Items in flight (planned and not released): a window, whatever the catalogue's size. */
  get open(): number {
    return this.#open.size;
  }

  /**
   * Records the item as planned and takes it out for the flow: a new `item` record when the item is
   * new or its fingerprint changed (which starts it afresh), or when its image path or source
   * identity moved; nothing otherwise. The record is not waited for (`wait: false`): the item's
   * `submitting` mark, which a POST waits for, commits after it. The returned object is updated by
   * every {@link record} of the item until it is {@link release}d.
   */
  async plan(identity: ItemIdentity): Promise<ItemState> {
    const record = internItem({ t: 'item', ...identity }, this.#interner);
    const known = this.get(record.id);
    let state: ItemState;
    if (known && known.fp === record.fp) {
      // Preflight steps are known only when preflight ran (not on a rerun that trusts the source).
      const preflight = record.preflight ?? known.preflight;
      const same =
        known.image === record.image &&
        JSON.stringify(known.src) === JSON.stringify(record.src) &&
        JSON.stringify(known.preflight) === JSON.stringify(preflight);
      if (!same) {
        this.#appendUnwaited(preflight ? { ...record, preflight } : record);
        known.image = record.image;
        known.src = record.src;
        known.preflight = preflight;
      }
      state = known;
    } else {
      this.#appendUnwaited(record);
      this.#count(known, -1);
      state = this.#open.get(record.id) ?? newItemState(record);
      // The same object when the item is already open: whoever holds it sees the fresh start.
      Object.assign(state, newItemState(record));
      this.#count(state, +1);
    }
    // A known id keeps its first-seen place, as a replay keeps it.
    this.#table.set(state);
    this.#open.set(state.id, state);
    if (!this.#table.marked(state.id)) {
      this.#table.mark(state.id);
      this.#count(state, +1);
    }
    return state;
  }

  /**
   * Appends a record about an item and applies it. With `sync`, resolves only once the record is on
   * disk (before a POST leaves, after a 202, after a download).
   */
  async record(record: Exclude<ItemRecord, { t: 'item' }>, options: RecordOptions = {}): Promise<void> {
    // Not waited for: a failure has already been reported to #onFailure, which stops the run.
    if (options.wait === false) this.#appendUnwaited(record, options.sync ?? false);
    else await this.#append(record, options.sync ?? false);
    const open = this.#open.get(record.id);
    const state = open ?? this.#table.get(record.id);
    if (!state) return;
    this.#count(state, -1);
    applyRecord(state, record);
    this.#count(state, +1);
    if (!open) this.#table.set(state);
  }

  /** Puts an item back into the table: the flow is done with it for this run. */
  release(state: ItemState): void {
    if (this.#open.get(state.id) !== state) return;
    this.#table.set(state);
    this.#open.delete(state.id);
  }

  #count(state: ItemState | undefined, delta: 1 | -1): void {
    if (state && this.#table.marked(state.id)) {
      this.#phases.set(state.phase, this.count(state.phase) + delta);
    }
  }

  /** Appends without waiting (see {@link RecordOptions.wait}); a failure has reached #onFailure. */
  #appendUnwaited(record: ItemRecord, sync = false): void {
    this.#append(record, sync).catch(() => {});
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
