/**
 * A journal read back: its records folded into the latest state per item (packed in an
 * {@link ItemTable}) and its last `run` and `plan` records.
 */
import { Interner } from '../util/intern.js';
import type { JournalRecord } from './records.js';
import { applyRecord, type ItemState, internItem, newItemState } from './state.js';
import { ItemTable, type ItemTableOptions } from './table.js';

/** The last `run` and `plan` records of a journal. */
export interface LastRun {
  run?: Extract<JournalRecord, { t: 'run' }>;
  plan?: Extract<JournalRecord, { t: 'plan' }>;
}

/** Options of {@link JournalFold}. */
export interface FoldOptions {
  /** Shares equal strings and source identities between items. @default a new one */
  interner?: Interner;
  /** Keep only what a report shows (see {@link ItemTableOptions.lean}). */
  lean?: boolean;
}

/**
 * Folds journal records, one at a time, into the latest state per item id (in first-seen order,
 * packed in an {@link ItemTable}) and the last `run` and `plan` records: what a resumed run and
 * `report` start from. Equal strings (module, style, image path) and source identities are kept
 * once (see {@link internItem}).
 */
export class JournalFold {
  readonly last: LastRun = {};
  readonly interner: Interner;
  readonly #lean: boolean;
  readonly #table: ItemTable;
  /**
   * The states of the items seen last, unpacked: an item's records are close together in a
   * journal (a run has a window of items in flight), so each item is unpacked and packed about once.
   */
  readonly #recent = new Map<string, ItemState>();
  /** Records folded. */
  records = 0;

  constructor(options: FoldOptions = {}) {
    this.interner = options.interner ?? new Interner();
    this.#lean = options.lean ?? false;
    this.#table = new ItemTable({ lean: this.#lean });
  }

  /** The folded states. */
  get states(): ItemTable {
    for (const state of this.#recent.values()) this.#table.set(state);
    this.#recent.clear();
    return this.#table;
  }

  add(record: JournalRecord): void {
    this.records++;
    if (record.t === 'run') {
      this.last.run = record;
      return;
    }
    if (record.t === 'plan') {
      this.last.plan = record;
      if (record.count !== undefined && record.count > this.#table.size) this.#table.reserve(record.count);
      return;
    }
    if (record.t === 'item') {
      const item = this.#lean ? { ...record, src: null } : internItem(record, this.interner);
      const known = this.#state(item.id);
      if (known && known.fp === item.fp) {
        known.image = item.image;
        known.src = item.src;
        if (item.preflight) known.preflight = item.preflight;
      } else if (known) {
        Object.assign(known, newItemState(item));
      } else {
        // A new id takes the next place in the table at once (first-seen order).
        const fresh = newItemState(item);
        this.#table.set(fresh);
        this.#hold(fresh);
      }
      return;
    }
    const held = this.#recent.get(record.id);
    // Records of an older fingerprint are skipped without unpacking the state.
    if ((held?.fp ?? this.#table.fingerprint(record.id)) !== record.fp) return;
    const state = held ?? this.#state(record.id);
    if (state) applyRecord(state, record);
  }

  #state(id: string): ItemState | undefined {
    const held = this.#recent.get(id);
    if (held) return held;
    const state = this.#table.get(id);
    if (state) this.#hold(state);
    return state;
  }

  #hold(state: ItemState): void {
    this.#recent.set(state.id, state);
    if (this.#recent.size <= 512) return;
    const [oldest] = this.#recent.values();
    this.#table.set(oldest!);
    this.#recent.delete(oldest!.id);
  }
}

/** Folds a whole journal into the latest state per item id, in first-seen order. */
export function foldJournal(records: readonly JournalRecord[]): Map<string, ItemState> {
  const fold = new JournalFold();
  for (const record of records) fold.add(record);
  return new Map([...fold.states.values()].map((state) => [state.id, state]));
}
