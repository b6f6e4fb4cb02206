/**
 * Domain types shared by the stages. Wire shapes of the service live in `src/api/wire.ts`;
 * these are what the pipeline and the report talk about.
 */

/** The service's modules this tool drives. */
export const MODULES = ['change-style', 'kitchen-configurator'] as const;
export type ModuleId = (typeof MODULES)[number];

/** Rejection codes of `status: rejected` (docs/contract.md#rejection-codes). */
export const REJECT_CODES = [
  'file_not_found',
  'unsupported_format',
  'corrupt_image',
  'too_large',
  'unknown_style',
  'invalid_configuration',
  'invalid_item',
  /** A remote source answered 401/403 (S3: AccessDenied); no credentials are ever sent to sources. */
  'source_forbidden',
  /** The address guard refused a remote source (a private or metadata address, user:password, https → http). */
  'source_blocked',
] as const;
export type RejectCode = (typeof REJECT_CODES)[number];

/**
 * Codes of `status: incomplete` this tool sets itself (docs/contract.md#incomplete-codes); a run that
 * stops right after a submission that created nothing keeps that failure's own code instead.
 */
export const INCOMPLETE_CODES = [
  'submit_unknown',
  'max_submissions',
  'max_duration',
  'service_unavailable',
  'not_submitted',
  'job_timeout',
  'not_finished',
  'job_not_found',
  'poll_failed',
  'download_failed',
  /** A remote source could not be read now (timeouts, resets, 5xx or 429 after retries): a rerun tries again. */
  'source_unavailable',
] as const;
export type IncompleteCode = (typeof INCOMPLETE_CODES)[number];

/** Final status of an item in the report. */
export type ItemStatus = 'succeeded' | 'failed' | 'rejected' | 'incomplete';

/** An error as the report shows it: a stable code and a message in words. */
export interface ItemError {
  code: string;
  message: string;
}

/** Where an item came from in the manifest. */
export interface ItemSource {
  /** The manifest file as given. */
  file: string;
  /** 1-based line of the row (CSV: the line its record starts on; JSON array: the item's line). */
  line: number;
}

/**
 * One unit of work: one image with one style (change-style) or one image (kitchen-configurator).
 * A manifest row expands to one Item per matched image per style.
 */
export interface Item {
  /** File-name safe id, unique in the manifest (contract: `<id>__<style>` or `<id>`). */
  id: string;
  /** The image as the report shows it: the path relative to the manifest folder (or absolute as given). */
  image: string;
  /** Absolute path of the source image. Empty when the row never named a usable path. */
  imagePath: string;
  /** Module id as written; validated unless `rejection` says otherwise. */
  module: string;
  style?: string;
  prompt?: string;
  configuration?: Record<string, unknown>;
  source: ItemSource;
  /** Set when validation already refused this item; it is reported as `rejected` and never submitted. */
  rejection?: { code: RejectCode; message: string };
}

/** One row of report.json's `items` (contract). */
export interface ReportItem {
  id: string;
  image: string;
  module: string;
  style: string | null;
  status: ItemStatus;
  job_id: string | null;
  output: string | null;
  sha256: string | null;
  processing_time_ms: number | null;
  submissions: number;
  error: ItemError | null;
  /**
   * What preflight did to the upload, in words (`rotated 90°`, `CMYK → sRGB`, `metadata removed`,
   * `resized 6000×4000 → 4096×2731`); empty when it went up as it is or preflight did not run.
   */
  preflight: string[];
  /**
   * The review of a succeeded item's result (docs/contract.md#review): `{ score: 0..1, flags }`;
   * null when it was not reviewed (not succeeded, `--no-review`, or reviewed later by `review`).
   */
  review: { score: number; flags: string[] } | null;
  /**
   * Of `submissions`, those sent again while an earlier one's outcome was unknown: more than 0 is a
   * possible duplicate charge (docs/contract.md#submissions-and-duplicates). Additive, so last.
   */
  ambiguous_resends: number;
}

/** report.json `run.totals` (contract). */
export interface ReportTotals {
  items: number;
  succeeded: number;
  failed: number;
  rejected: number;
  incomplete: number;
  /** Items with `ambiguous_resends` > 0: sent again while an earlier send's outcome was unknown. */
  possible_duplicates: number;
  /** Succeeded items whose review flagged something worth a look. */
  needs_review: number;
}

/** Counters of a run beyond the contract's fields (docs/contract.md#run-stats); shown by the HTML report and the summary. */
export interface RunStats {
  duration_ms: number;
  requests: number;
  retries: number;
  rate_limited: number;
  processing_time_p50_ms: number | null;
  processing_time_p95_ms: number | null;
  /** Requests to the service's API (styles, submissions, polls): what its rate limit counts. */
  api_requests?: number;
  /** API requests per job submitted in this run; null when none was submitted. */
  requests_per_job?: number | null;
  /** Share of API requests answered 429 (0 to 1); null when none was sent. */
  rate_limited_share?: number | null;
  /** API requests per second over the run. */
  rate_used?: number;
  /** The rate the key sustains as the governor learnt it from 429s (requests per second). */
  rate_learnt?: number;
  /** Polls per job polled in this run; null when none was. */
  polls_per_job?: number | null;
  /** Share of the jobs polled in this run whose first poll saw them ended (0 to 1); null when none was. */
  first_poll_hit_share?: number | null;
}

/** report.json (contract), with the extra `stats` object. */
export interface Report {
  run: {
    manifest: string;
    base_url: string;
    started_at: string;
    finished_at: string;
    totals: ReportTotals;
    stats?: RunStats;
  };
  items: ReportItem[];
}
