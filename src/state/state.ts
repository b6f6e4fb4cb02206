import type { ItemError } from '../types.js';
import type { ItemRecord, JournalRecord, SourceIdentity } from './records.js';

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
  /** Why the item is failed, rejected or incomplete. */
  error: ItemError | null;
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
    error: null,
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
      state.phase = 'new';
      state.error = record.error;
      return;
    case 'refused':
      state.submissions = Math.max(0, state.submissions - 1);
      state.phase = 'failed';
      state.error = record.error;
      return;
    case 'accepted':
      state.phase = 'accepted';
      state.jobId = record.job_id;
      state.error = null;
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
      return;
    case 'incomplete':
      state.error = record.error;
      return;
  }
}

/** Folds a whole journal into the latest state per item id, in first-seen order. */
export function foldJournal(records: readonly JournalRecord[]): Map<string, ItemState> {
  const states = new Map<string, ItemState>();
  for (const record of records) {
    if (record.t === 'run' || record.t === 'plan') continue;
    if (record.t === 'item') {
      const known = states.get(record.id);
      if (!known || known.fp !== record.fp) {
        // Keep first-seen order in the Map: delete-then-set would move the item to the end.
        const fresh = newItemState(record);
        if (known) Object.assign(known, fresh);
        else states.set(record.id, fresh);
      } else {
        known.image = record.image;
        known.src = record.src;
      }
      continue;
    }
    const state = states.get(record.id);
    if (state) applyRecord(state, record);
  }
  return states;
}
