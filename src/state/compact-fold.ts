/**
 * A journal fold for reports of any size: per item only what report.json shows, packed in columns
 * (typed arrays and shared strings) instead of one object per item. About 250 bytes an item
 * against about 600 for {@link JournalFold}'s states, so `report` over 10^6 items fits in a few
 * hundred MB. The state machine is not written twice: each record is applied by `applyRecord` to
 * a scratch state unpacked from the columns, which is then packed back.
 */
import { Interner } from '../util/intern.js';
import type { JournalRecord } from './records.js';
import { applyRecord, type ItemState, type LastRun, newItemState, type Phase } from './state.js';

const PHASES: readonly Phase[] = [
  'new',
  'unknown',
  'accepted',
  'succeeded',
  'downloaded',
  'failed',
  'rejected',
];
const EXTENSIONS = ['jpg', 'png', 'webp'] as const;
/** `output` codes: 0 none, 1..3 `results/<id>.<ext>`, 255 another path (kept aside). */
const OTHER_OUTPUT = 255;

/** The lookups a report needs of a fold: this class and a `Map` of states both have them. */
export interface StateLookup {
  get(id: string): ItemState | undefined;
  keys(): Iterable<string>;
}

/**
 * A 32-bit hash (FNV-1a) of a fingerprint: records of an older fingerprint of an item are told apart
 * by it (two fingerprints of one item sharing it: about one in 4·10^9).
 */
function fpKey(fp: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < fp.length; i++) h = Math.imul(h ^ fp.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** Folds journal records into packed report states (see the module comment). */
export class CompactFold implements StateLookup {
  readonly last: LastRun = {};
  records = 0;
  readonly #slots = new Map<string, number>();
  readonly #interner = new Interner();
  #capacity = 0;
  #fp = new Int32Array(0);
  #phase = new Uint8Array(0);
  #submissions = new Uint32Array(0);
  #time = new Float64Array(0);
  #output = new Uint8Array(0);
  #sha = new Uint8Array(0);
  readonly #image: string[] = [];
  readonly #module: string[] = [];
  readonly #style: Array<string | null> = [];
  readonly #jobId: Array<string | null> = [];
  readonly #error: Array<ItemState['error']> = [];
  readonly #otherOutput = new Map<number, string>();
  /** A sha256 that is not 64 hex digits (never written by this tool, but kept as it is). */
  readonly #otherSha = new Map<number, string>();

  add(record: JournalRecord): void {
    this.records++;
    if (record.t === 'run' || record.t === 'plan') {
      if (record.t === 'run') this.last.run = record;
      else this.last.plan = record;
      return;
    }
    let slot = this.#slots.get(record.id);
    if (record.t === 'item') {
      if (slot === undefined) {
        slot = this.#slots.size;
        this.#slots.set(record.id, slot);
        this.#grow(slot + 1);
      } else if (this.#fp[slot] === fpKey(record.fp)) {
        this.#image[slot] = this.#interner.string(record.image);
        return;
      }
      this.#pack(slot, newItemState({ ...record, src: null }));
      return;
    }
    if (slot === undefined || this.#fp[slot] !== fpKey(record.fp)) return;
    const state = this.#unpack(record.id, slot, record.fp);
    applyRecord(state, record);
    this.#pack(slot, state);
  }

  /** The item's state as a report shows it (no fingerprint, source identity, result URL or times). */
  get(id: string): ItemState | undefined {
    const slot = this.#slots.get(id);
    return slot === undefined ? undefined : this.#unpack(id, slot, '');
  }

  keys(): Iterable<string> {
    return this.#slots.keys();
  }

  get size(): number {
    return this.#slots.size;
  }

  #pack(slot: number, s: ItemState): void {
    this.#fp[slot] = fpKey(s.fp);
    this.#phase[slot] = PHASES.indexOf(s.phase);
    this.#submissions[slot] = s.submissions;
    this.#time[slot] = s.processingTimeMs ?? Number.NaN;
    this.#image[slot] = this.#interner.string(s.image);
    this.#module[slot] = this.#interner.string(s.module);
    this.#style[slot] = this.#interner.string(s.style);
    this.#jobId[slot] = s.jobId;
    this.#error[slot] = s.error;
    this.#otherOutput.delete(slot);
    const ext = s.output ? EXTENSIONS.findIndex((e) => s.output === `results/${s.id}.${e}`) : -1;
    if (!s.output) this.#output[slot] = 0;
    else if (ext >= 0) this.#output[slot] = ext + 1;
    else {
      this.#output[slot] = OTHER_OUTPUT;
      this.#otherOutput.set(slot, s.output);
    }
    // Byte 0 of a slot's 33: 0 none, 1 the 32 bytes that follow, 2 kept aside as text.
    this.#otherSha.delete(slot);
    if (s.sha256 && /^[0-9a-f]{64}$/.test(s.sha256)) {
      this.#sha.set(Buffer.from(s.sha256, 'hex'), slot * 33 + 1);
      this.#sha[slot * 33] = 1;
    } else if (s.sha256) {
      this.#otherSha.set(slot, s.sha256);
      this.#sha[slot * 33] = 2;
    } else {
      this.#sha[slot * 33] = 0;
    }
  }

  #unpack(id: string, slot: number, fp: string): ItemState {
    const code = this.#output[slot] ?? 0;
    const time = this.#time[slot] ?? Number.NaN;
    const state = newItemState({
      t: 'item',
      id,
      fp,
      image: this.#image[slot] ?? '',
      module: this.#module[slot] ?? '',
      style: this.#style[slot] ?? null,
      src: null,
    });
    state.phase = PHASES[this.#phase[slot] ?? 0] ?? 'new';
    state.submissions = this.#submissions[slot] ?? 0;
    state.processingTimeMs = Number.isNaN(time) ? null : time;
    state.jobId = this.#jobId[slot] ?? null;
    state.error = this.#error[slot] ?? null;
    state.output =
      code === 0
        ? null
        : code === OTHER_OUTPUT
          ? (this.#otherOutput.get(slot) ?? null)
          : `results/${id}.${EXTENSIONS[code - 1]}`;
    const sha = this.#sha[slot * 33];
    state.sha256 =
      sha === 1
        ? Buffer.from(this.#sha.subarray(slot * 33 + 1, slot * 33 + 33)).toString('hex')
        : sha === 2
          ? (this.#otherSha.get(slot) ?? null)
          : null;
    return state;
  }

  /** Makes room for `size` slots (doubling, so growth costs O(1) per item). */
  #grow(size: number): void {
    if (size <= this.#capacity) return;
    const capacity = Math.max(1024, this.#capacity * 2);
    const grown = <T extends Int32Array | Uint8Array | Uint32Array | Float64Array>(old: T, n: number): T => {
      const next = new (old.constructor as new (length: number) => T)(n);
      next.set(old);
      return next;
    };
    this.#fp = grown(this.#fp, capacity);
    this.#phase = grown(this.#phase, capacity);
    this.#submissions = grown(this.#submissions, capacity);
    this.#time = grown(this.#time, capacity);
    this.#output = grown(this.#output, capacity);
    this.#sha = grown(this.#sha, capacity * 33);
    this.#capacity = capacity;
  }
}
