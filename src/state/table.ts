/**
 * Item states packed in columns instead of one object per item: typed arrays for the fixed-size
 * parts (phase, counts, times, the fingerprint and result hash as bytes), job ids and result URLs
 * as UTF-8 in one arena, and image paths, module and style names as numbers into a pool of shared
 * strings (see util/packed.ts). A finished item costs about 200 bytes, most of it outside the
 * JavaScript heap, so a resumed run, a live run and `report` hold 10^5 to 10^6 items in tens of
 * MB. States go in and come out as plain {@link ItemState} objects: callers never see the packing.
 */
import { ALL_REVIEW_FLAGS } from '../review/flags.js';
import type { ItemError } from '../types.js';
import { grown, TextArena, ValuePool } from '../util/packed.js';
import { type SourceIdentity, sourceKey } from './records.js';
import type { ItemState, Phase } from './state.js';

/** The lookups a report needs of the item states (an {@link ItemTable}, the live store, a `Map`). */
export interface StateLookup {
  get(id: string): ItemState | undefined;
  keys(): Iterable<string>;
}

const PHASES: readonly Phase[] = [
  'new',
  'unknown',
  'accepted',
  'succeeded',
  'downloaded',
  'failed',
  'rejected',
];
/** `output` codes: 0 none, 1..3 `results/<id>.<ext>`, {@link OTHER_OUTPUT} another path (kept aside). */
const EXTENSIONS = ['jpg', 'png', 'webp'] as const;
const OTHER_OUTPUT = 255;
/** Bytes per slot: the fingerprint (16) and the result's sha256 (32). */
const FP_BYTES = 16;
const HASH_BYTES = FP_BYTES + 32;
/** Flags per slot. */
const FP_PACKED = 1;
const SHA_PACKED = 2;
const MARKED = 4;
/** {@link ItemState.outcomeLost}. */
const OUTCOME_LOST = 8;
/** Numbers per slot: processing time, then (not lean) result bytes and mtime; NaN for null. */
const FULL_NUMBERS = 3;
const FP_HEX = /^[0-9a-f]{32}$/;
const SHA_HEX = /^[0-9a-f]{64}$/;

/** Options of {@link ItemTable}. */
export interface ItemTableOptions {
  /**
   * Keep only what a report shows: no source identity, result URL, result size or mtime (they read
   * back as null). For `report` over 10^6 items.
   */
  lean?: boolean;
}

/** Values of a slot that have no packed form (never written by this tool, but kept as they are). */
interface Aside {
  fp?: string;
  sha256?: string;
  output?: string;
}

/** Item states by id, in first-seen order, packed (see the module comment). */
export class ItemTable implements StateLookup {
  readonly #slots = new Map<string, number>();
  readonly #lean: boolean;
  readonly #numberStride: number;
  #capacity = 0;
  #hashes = Buffer.alloc(0);
  #flags = new Uint8Array(0);
  #phase = new Uint8Array(0);
  #output = new Uint8Array(0);
  #submissions = new Uint32Array(0);
  #numbers = new Float64Array(0);
  /** Image path, module and style: numbers into {@link #strings}. */
  #image = new Uint32Array(0);
  #module = new Uint32Array(0);
  #style = new Uint32Array(0);
  /** Source identity (not lean): a number into {@link #sources}. */
  #src = new Uint32Array(0);
  /** Job id and result URL (not lean): offset + 1 into {@link #text}, 0 for null. */
  #jobId = new Uint32Array(0);
  #imageUrl = new Uint32Array(0);
  /** Preflight steps: a number into {@link #steps} (one list per image, whatever its styles). */
  #preflight = new Uint32Array(0);
  readonly #strings = new ValuePool<string>();
  readonly #steps = new ValuePool<string[]>();
  readonly #sources = new ValuePool<NonNullable<SourceIdentity>>();
  readonly #text = new TextArena();
  /** The review's score (NaN: not reviewed) and its flags as bits of {@link ALL_REVIEW_FLAGS}. */
  #reviewScore = new Float32Array(0);
  #reviewFlags = new Uint16Array(0);
  /** Errors are few (failed, rejected and unfinished items): kept by slot. */
  readonly #errors = new Map<number, ItemError>();
  /** Ambiguous resends are rarer still: kept by slot when not 0. */
  readonly #resends = new Map<number, number>();
  readonly #aside = new Map<number, Aside>();

  constructor(options: ItemTableOptions = {}) {
    this.#lean = options.lean ?? false;
    this.#numberStride = this.#lean ? 1 : FULL_NUMBERS;
  }

  get size(): number {
    return this.#slots.size;
  }

  has(id: string): boolean {
    return this.#slots.has(id);
  }

  keys(): Iterable<string> {
    return this.#slots.keys();
  }

  /** Every state, unpacked one at a time, in first-seen order. */
  *values(): Generator<ItemState> {
    for (const [id, slot] of this.#slots) yield this.#unpack(id, slot);
  }

  /** A copy of the item's state: changing it changes nothing here until it is {@link set} back. */
  get(id: string): ItemState | undefined {
    const slot = this.#slots.get(id);
    return slot === undefined ? undefined : this.#unpack(id, slot);
  }

  /** The item's fingerprint, without unpacking the rest. */
  fingerprint(id: string): string | undefined {
    const slot = this.#slots.get(id);
    return slot === undefined ? undefined : this.#fp(slot);
  }

  /** Stores `state` under its id (a new id goes last; a known one keeps its place). */
  set(state: ItemState): void {
    let slot = this.#slots.get(state.id);
    if (slot === undefined) {
      slot = this.#slots.size;
      this.#grow(slot + 1);
      this.#slots.set(state.id, slot);
    }
    this.#pack(slot, state);
  }

  /** Makes room for `count` items at once (a journal's plan says how many): no copies while folding. */
  reserve(count: number): void {
    // Bounded: a damaged count must not ask for terabytes (past it the table grows by doubling).
    const size = Math.min(count, 20_000_000);
    if (size > this.#capacity) this.#grow(size, size);
  }

  /** Marks an item (the live store marks the items planned in this run); unknown ids are ignored. */
  mark(id: string): void {
    const slot = this.#slots.get(id);
    if (slot !== undefined) this.#flags[slot]! |= MARKED;
  }

  marked(id: string): boolean {
    const slot = this.#slots.get(id);
    return slot !== undefined && (this.#flags[slot]! & MARKED) !== 0;
  }

  #pack(slot: number, s: ItemState): void {
    const aside: Aside = {};
    const at = slot * HASH_BYTES;
    let flags = this.#flags[slot]! & MARKED;
    if (FP_HEX.test(s.fp)) {
      this.#hashes.write(s.fp, at, FP_BYTES, 'hex');
      flags |= FP_PACKED;
    } else aside.fp = s.fp;
    if (s.sha256 !== null && SHA_HEX.test(s.sha256)) {
      this.#hashes.write(s.sha256, at + FP_BYTES, HASH_BYTES - FP_BYTES, 'hex');
      flags |= SHA_PACKED;
    } else if (s.sha256 !== null) aside.sha256 = s.sha256;
    if (s.outcomeLost) flags |= OUTCOME_LOST;
    this.#flags[slot] = flags;
    this.#phase[slot] = PHASES.indexOf(s.phase);
    this.#submissions[slot] = s.submissions;
    if (s.ambiguousResends > 0) this.#resends.set(slot, s.ambiguousResends);
    else this.#resends.delete(slot);
    const ext = s.output === null ? -1 : EXTENSIONS.findIndex((e) => s.output === `results/${s.id}.${e}`);
    if (s.output === null) this.#output[slot] = 0;
    else if (ext >= 0) this.#output[slot] = ext + 1;
    else {
      this.#output[slot] = OTHER_OUTPUT;
      aside.output = s.output;
    }
    if (aside.fp !== undefined || aside.sha256 !== undefined || aside.output !== undefined) {
      this.#aside.set(slot, aside);
    } else this.#aside.delete(slot);
    if (s.error) this.#errors.set(slot, s.error);
    else this.#errors.delete(slot);
    this.#image[slot] = this.#strings.put(s.image, s.image);
    this.#module[slot] = this.#strings.put(s.module, s.module);
    this.#style[slot] = this.#strings.put(s.style, s.style ?? '');
    this.#jobId[slot] = this.#putText(this.#jobId[slot]!, s.jobId);
    this.#preflight[slot] = this.#steps.put(s.preflight, s.preflight?.join('\n') ?? '');
    this.#reviewScore[slot] = s.review ? s.review.score : Number.NaN;
    this.#reviewFlags[slot] = s.review
      ? s.review.flags.reduce((bits, f) => bits | (1 << ALL_REVIEW_FLAGS.indexOf(f)), 0)
      : 0;
    const n = slot * this.#numberStride;
    this.#numbers[n] = s.processingTimeMs ?? Number.NaN;
    if (this.#lean) return;
    this.#numbers[n + 1] = s.bytes ?? Number.NaN;
    this.#numbers[n + 2] = s.mtimeMs ?? Number.NaN;
    const src = s.src;
    this.#src[slot] = src ? this.#sources.put(src, sourceKey(src)) : 0;
    this.#imageUrl[slot] = this.#putText(this.#imageUrl[slot]!, s.imageUrl);
  }

  /** Writes `text` to the arena unless the slot's current offset holds it already. */
  #putText(current: number, text: string | null): number {
    if (text === null) return 0;
    if (current !== 0 && this.#text.get(current - 1) === text) return current;
    return this.#text.put(text) + 1;
  }

  #unpack(id: string, slot: number): ItemState {
    const code = this.#output[slot]!;
    const flags = this.#flags[slot]!;
    const aside = this.#aside.get(slot);
    const at = slot * HASH_BYTES;
    const lean = this.#lean;
    const number = (i: number): number | null => {
      const value = lean && i > 0 ? Number.NaN : this.#numbers[slot * this.#numberStride + i]!;
      return Number.isNaN(value) ? null : value;
    };
    const text = (offset: number): string | null => (offset === 0 ? null : this.#text.get(offset - 1));
    return {
      id,
      fp: this.#fp(slot),
      image: this.#strings.get(this.#image[slot]!) ?? '',
      module: this.#strings.get(this.#module[slot]!) ?? '',
      style: this.#strings.get(this.#style[slot]!),
      src: lean ? null : this.#sources.get(this.#src[slot]!),
      phase: PHASES[this.#phase[slot]!]!,
      jobId: text(this.#jobId[slot]!),
      imageUrl: lean ? null : text(this.#imageUrl[slot]!),
      processingTimeMs: number(0),
      output:
        code === 0
          ? null
          : code === OTHER_OUTPUT
            ? (aside?.output ?? null)
            : `results/${id}.${EXTENSIONS[code - 1]}`,
      sha256:
        flags & SHA_PACKED
          ? this.#hashes.toString('hex', at + FP_BYTES, at + HASH_BYTES)
          : (aside?.sha256 ?? null),
      bytes: number(1),
      mtimeMs: number(2),
      submissions: this.#submissions[slot]!,
      ambiguousResends: this.#resends.get(slot) ?? 0,
      outcomeLost: (flags & OUTCOME_LOST) !== 0,
      error: this.#errors.get(slot) ?? null,
      preflight: this.#steps.get(this.#preflight[slot]!),
      review: this.#review(slot),
    };
  }

  #review(slot: number): ItemState['review'] {
    const score = this.#reviewScore[slot]!;
    if (Number.isNaN(score)) return null;
    const bits = this.#reviewFlags[slot]!;
    // Float32 keeps about 7 digits: the journal's 3 come back as written.
    return { score: Number(score.toFixed(3)), flags: ALL_REVIEW_FLAGS.filter((_, i) => bits & (1 << i)) };
  }

  #fp(slot: number): string {
    if (!(this.#flags[slot]! & FP_PACKED)) return this.#aside.get(slot)?.fp ?? '';
    const at = slot * HASH_BYTES;
    return this.#hashes.toString('hex', at, at + FP_BYTES);
  }

  /** Makes room for `size` slots (doubling, so growth costs O(1) per item). */
  #grow(size: number, exactly?: number): void {
    if (size <= this.#capacity) return;
    const capacity = exactly ?? Math.max(1024, this.#capacity * 2);
    const hashes = Buffer.alloc(capacity * HASH_BYTES);
    this.#hashes.copy(hashes);
    this.#hashes = hashes;
    this.#flags = grown(this.#flags, capacity);
    this.#phase = grown(this.#phase, capacity);
    this.#output = grown(this.#output, capacity);
    this.#submissions = grown(this.#submissions, capacity);
    this.#numbers = grown(this.#numbers, capacity * this.#numberStride);
    this.#image = grown(this.#image, capacity);
    this.#module = grown(this.#module, capacity);
    this.#style = grown(this.#style, capacity);
    this.#jobId = grown(this.#jobId, capacity);
    this.#preflight = grown(this.#preflight, capacity);
    this.#reviewScore = grown(this.#reviewScore, capacity, Number.NaN);
    this.#reviewFlags = grown(this.#reviewFlags, capacity);
    if (!this.#lean) {
      this.#src = grown(this.#src, capacity);
      this.#imageUrl = grown(this.#imageUrl, capacity);
    }
    this.#capacity = capacity;
  }
}
