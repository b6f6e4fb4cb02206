import type { Review } from '../review/flags.js';
import type { ItemError } from '../types.js';
import type { Interner } from '../util/intern.js';
import { type ItemRecord, type JournalRecord, type SourceIdentity, sourceKey } from './records.js';

/** Where an item stands, as the journal tells it. */
export type Phase =
  /** Nothing sent yet (or everything sent certainly created nothing). */
  | 'new'
  /** A POST may have reached the service but no job id was recorded (crash window or submit_unknown). */
  | 'unknown'
  /** A job id is recorded and the job has not ended. */
  | 'accepted'
  /** The job succeeded; the result is not (yet) on disk. */
  | 'succeeded'
  /** The result is on disk. */
  | 'downloaded'
  /** The service ended the job as failed, or refused the submission. */
  | 'failed'
  /** Validation or preflight refused the item. */
  | 'rejected';

/** The journal's knowledge of one item, folded from its records. */
export interface ItemState {
  id: string;
  fp: string;
  image: string;
  module: string;
  style: string | null;
  src: SourceIdentity;
  phase: Phase;
  jobId: string | null;
  imageUrl: string | null;
  processingTimeMs: number | null;
  output: string | null;
  sha256: string | null;
  bytes: number | null;
  mtimeMs: number | null;
  /** POSTs that may have created a job at the service, over all runs. */
  submissions: number;
  /**
   * Of {@link submissions}, those sent while an earlier POST's outcome was unknown (a crash before
   * its answer, `submit_unknown`, `--retry-ambiguous`): each may have charged a second job. A
   * deliberate resubmission (`--retry-failed`, a result lost without a job id) sent after every
   * earlier POST was answered is not one (docs/contract.md#submissions-and-duplicates).
   */
  ambiguousResends: number;
  /**
   * A POST's outcome stays unknown for good: another POST was sent after it without its answer. Until
   * a job of the item is accepted, every later POST that may create a job is an ambiguous resend, also
   * after a 429 or 503 answered one or the service refused one.
   */
  outcomeLost: boolean;
  /** Why the item is failed, rejected or incomplete. */
  error: ItemError | null;
  /** What preflight did to the upload (`rotated 90°`, `CMYK → sRGB`, …); null before it ran. */
  preflight: string[] | null;
  /** The review of the downloaded result; null before it was reviewed. */
  review: Review | null;
}

/** A fresh state for an item planned with fingerprint `fp`. */
export function newItemState(record: Extract<JournalRecord, { t: 'item' }>): ItemState {
  return {
    id: record.id,
    fp: record.fp,
    image: record.image,
    module: record.module,
    style: record.style,
    src: record.src,
    phase: 'new',
    jobId: null,
    imageUrl: null,
    processingTimeMs: null,
    output: null,
    sha256: null,
    bytes: null,
    mtimeMs: null,
    submissions: 0,
    ambiguousResends: 0,
    outcomeLost: false,
    error: null,
    preflight: record.preflight ?? null,
    review: null,
  };
}

/**
 * Applies one record to an item's state (mutating it). Pure apart from that: the engine applies each
 * record it appends, and a rerun replays the journal through the same function, so the live state
 * and the resumed state cannot drift apart.
 */
export function applyRecord(state: ItemState, record: ItemRecord): void {
  if (record.t === 'item') return;
  if (record.fp !== state.fp) return;
  switch (record.t) {
    case 'rejected':
      state.phase = 'rejected';
      state.error = record.error;
      return;
    case 'submitting':
      state.submissions++;
      // The POST before this one was never answered: it may have created a job, and so may this one.
      // (A state stored by an earlier version has neither field.)
      if (state.phase === 'unknown') state.outcomeLost = true;
      if (state.outcomeLost) state.ambiguousResends = (state.ambiguousResends ?? 0) + 1;
      state.phase = 'unknown';
      state.jobId = null;
      state.imageUrl = null;
      state.error = {
        code: 'submit_unknown',
        message: 'the run stopped after sending the job, before its id came back',
      };
      return;
    case 'not_created':
      state.submissions = Math.max(0, state.submissions - 1);
      // This POST created nothing: it is no resend that could charge twice (outcomeLost stays).
      if (state.outcomeLost) state.ambiguousResends = Math.max(0, state.ambiguousResends - 1);
      state.phase = 'new';
      state.error = record.error;
      return;
    case 'refused':
      state.submissions = Math.max(0, state.submissions - 1);
      if (state.outcomeLost) state.ambiguousResends = Math.max(0, state.ambiguousResends - 1);
      state.phase = 'failed';
      state.error = record.error;
      return;
    case 'accepted':
      state.phase = 'accepted';
      state.jobId = record.job_id;
      state.error = null;
      // The item has a known job again: the lost POST's possible job is counted (by this resend), and
      // a later deliberate resubmission (--retry-failed) is not sent over an unknown outcome.
      state.outcomeLost = false;
      return;
    case 'ended':
      state.jobId = record.job_id;
      state.processingTimeMs = record.processing_time_ms;
      if (record.status === 'succeeded') {
        state.phase = 'succeeded';
        state.imageUrl = record.image_url;
        state.error = null;
      } else {
        state.phase = 'failed';
        state.error = record.error;
      }
      return;
    case 'downloaded':
      state.phase = 'downloaded';
      state.output = record.output;
      state.sha256 = record.sha256;
      state.bytes = record.bytes;
      state.mtimeMs = record.mtime_ms;
      state.error = null;
      // A new result is not reviewed yet.
      state.review = null;
      return;
    case 'incomplete':
      state.error = record.error;
      return;
    case 'reviewed':
      if (state.phase === 'downloaded') state.review = { score: record.score, flags: record.flags };
      return;
  }
}

/**
 * An `item` record with its repeated parts shared: module, style and image path strings, and the
 * source identity object (one per image file, however many styles use it).
 */
export function internItem(record: Extract<JournalRecord, { t: 'item' }>, interner: Interner) {
  const { src } = record;
  return {
    ...record,
    image: interner.string(record.image),
    module: interner.string(record.module),
    style: interner.string(record.style),
    src: src ? interner.object(sourceKey(src), src) : null,
  };
}
