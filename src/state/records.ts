import type { ReviewFlag } from '../review/flags.js';
import type { ItemError } from '../types.js';

/**
 * A source's identity: a rerun trusts `sha256` while the source is unchanged. A local file is
 * unchanged while path, size and mtime are; a remote source (`path` is its URL or `s3://bucket/key`)
 * while a conditional read with its validators answers "not modified" (`etag`, `last_modified` as the
 * source sent them, `version_id` of a versioned S3 object). The validators are absent for local
 * files, for sources that sent none, and in journals written before remote sources.
 */
export type SourceIdentity = {
  path: string;
  size: number;
  mtime_ms: number;
  sha256: string;
  etag?: string;
  last_modified?: string;
  version_id?: string;
} | null;

/** The key under which equal source identities are shared in memory (one per image, not per style). */
export function sourceKey(src: NonNullable<SourceIdentity>): string {
  const base = `${src.path}\0${src.size}\0${src.mtime_ms}\0${src.sha256}`;
  if (src.etag === undefined && src.last_modified === undefined && src.version_id === undefined) return base;
  return `${base}\0${src.etag ?? ''}\0${src.last_modified ?? ''}\0${src.version_id ?? ''}`;
}

/**
 * Records of `journal.jsonl`, one JSON object per line, append-only. Every record about an item
 * carries the item's fingerprint `fp`: records of an older fingerprint (the row or the image changed)
 * no longer apply to it.
 */
export type JournalRecord =
  /** A run started (or resumed) on this folder. */
  | {
      t: 'run';
      at: string;
      v: 1;
      /** The manifest path as given (report.json's `run.manifest`). */
      manifest: string;
      /**
       * The manifest file, absolute (symlinks resolved), and the output folder the run had: which
       * manifest's run a folder holds (docs/contract.md#output-folder). Absent in older journals.
       */
      manifest_path?: string;
      out_dir?: string;
      base_url: string;
      pid: number;
      /** `--shard K/N` of the run, when it ran one part (docs/contract.md#sharding). */
      shard?: string;
    }
  /**
   * The run's items in manifest order (after sharding): what `report` rebuilds. They are listed in
   * `file` (`plan.jsonl` beside the journal), so a catalogue of 10^6 items is not one journal line
   * of tens of MB; journals of earlier versions carry the ids inline in `ids`.
   */
  | { t: 'plan'; manifest_dir: string; file?: string; count?: number; ids?: string[] }
  /** An item as planned: written when it is first seen or its fingerprint changed. */
  | {
      t: 'item';
      id: string;
      fp: string;
      image: string;
      module: string;
      style: string | null;
      /** Source file identity, so a rerun can trust the hash without reading the file again. */
      src: SourceIdentity;
      /** What preflight did to the upload (report.json's `preflight`); absent when it did not run. */
      preflight?: string[];
    }
  /** Validation or preflight refused the item. */
  | { t: 'rejected'; id: string; fp: string; error: ItemError }
  /** About to POST: written and fsynced before the request leaves. */
  | { t: 'submitting'; id: string; fp: string; at: string }
  /** The POST certainly created no job (429, 503, connection refused): the submission does not count. */
  | { t: 'not_created'; id: string; fp: string; error: ItemError }
  /** The service refused the job outright (400/413/415/422): the item failed, nothing was created. */
  | { t: 'refused'; id: string; fp: string; error: ItemError }
  /** 202 arrived: the job id, fsynced at once. */
  | { t: 'accepted'; id: string; fp: string; job_id: string; at: string }
  /** The job reached a terminal state at the service. */
  | {
      t: 'ended';
      id: string;
      fp: string;
      job_id: string;
      status: 'succeeded' | 'failed';
      image_url: string | null;
      processing_time_ms: number | null;
      error: ItemError | null;
    }
  /** The result is on disk, whole, under `output`. */
  | {
      t: 'downloaded';
      id: string;
      fp: string;
      job_id: string;
      output: string;
      sha256: string;
      bytes: number;
      mtime_ms: number;
    }
  /** The item did not finish in this run; `error` says why (submit_unknown, job_timeout, …). */
  | { t: 'incomplete'; id: string; fp: string; error: ItemError }
  /** The downloaded result was reviewed (docs/contract.md#review): its score and flags. */
  | { t: 'reviewed'; id: string; fp: string; score: number; flags: ReviewFlag[] };

/** Records that name an item. */
export type ItemRecord = Exclude<JournalRecord, { t: 'run' } | { t: 'plan' }>;
