/**
 * The shapes of a run's options, in groups: what a caller passes to `runBatch`/`planBatch` and what
 * `resolveRunOptions` (options.ts) hands on with every default filled in. Kept apart from the checks
 * so the types can be read (and imported) without the resolver.
 */
import type { Logger } from 'pino';
import type { GovernorOptions } from '../api/governor.js';
import type { RetryOptions } from '../api/policy.js';
import type { SourceAccess } from '../storage/sources.js';
import type { RunEvent } from './events.js';
import type { Shard } from './shard.js';

/** Where the service is and how to talk to it. */
export interface ServiceOptions {
  /** Service root; `/v1/...` is appended. */
  baseUrl: string;
  /** The API key: sent to `baseUrl` only, never logged or written. */
  apiKey: string;
  /** Client timeouts in ms (see `ClientOptions`: connect 10 s, request 30 s, upload 120 s, download 300 s). */
  timeouts?: { connect?: number; request?: number; upload?: number; download?: number };
  /** Retry budget and backoff of service calls. */
  retry?: RetryOptions;
  /** Rate governor tuning. */
  governor?: GovernorOptions;
  /** No answer from the service for this long while calls keep failing: the run ends with exit 3. @default 120_000 */
  unreachableMs?: number;
}

/** The service as a caller gives it: base URL and key may come from the environment instead. */
export type ServiceInput = Omit<ServiceOptions, 'baseUrl' | 'apiKey'> & {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
};

/** How images are prepared before upload. */
export interface PreflightRunOptions {
  /**
   * Send images the service takes as they are, with their metadata (GPS included), orientation tag
   * and colour profile, instead of normalised uploads (docs/contract.md#preflight). @default false
   */
  keepMetadata?: boolean;
  /** @deprecated Removing metadata is the default; `true` changes nothing and contradicts `keepMetadata`. */
  stripMetadata?: boolean;
  /** Longest side of an uploaded image, px (64..16384). @default 4096 */
  maxSide?: number;
}

/** How much this run does at once and in all. */
export interface LimitOptions {
  /** Jobs in flight (submitted, not yet ended), 1..1000. @default 8 */
  concurrency?: number;
  /** Submit at most this many new jobs in this run (a cost guard). @default unlimited */
  maxSubmissions?: number;
  /** A job not ended this long after this run started watching it is `incomplete/job_timeout`. @default 1_800_000 */
  jobTimeoutMs?: number;
  /** Run only part K of N of the items. @default all items */
  shard?: Shard;
  /**
   * A window for the run (a nightly slot): no new submissions after this long; jobs in flight then
   * get {@link maxDurationGraceMs} to end and be downloaded; what is left is `incomplete/max_duration`
   * and a rerun continues. @default unlimited
   */
  maxDurationMs?: number;
  /** In-flight jobs' time after `maxDurationMs`. @default a quarter of `maxDurationMs`, at most 5 min */
  maxDurationGraceMs?: number;
  /** Cap on service requests per second (the governor never goes above it). @default none */
  maxRate?: number;
}

/** What a rerun does again. */
export interface ResumeOptions {
  /** Resubmit items whose job failed in an earlier run. @default false */
  retryFailed?: boolean;
  /** Resend a submission whose outcome is unknown, now and on resume (possible duplicate charge). @default false */
  retryAmbiguous?: boolean;
  /** Hash every finished result on resume instead of trusting size and mtime. @default false */
  verify?: boolean;
  /**
   * Continue the output folder's run although its last run was of another manifest file: the
   * manifest was renamed, moved or converted (the same catalogue). Without it such a folder is
   * refused, `manifest_changed` (docs/contract.md#output-folder). @default false
   */
  manifestRenamed?: boolean;
}

/** Intervals of the run's housekeeping. */
export interface TimingOptions {
  /** Time in-flight requests get after a soft stop. @default 5000 */
  graceMs?: number;
  /** How often report.json/csv are refreshed during a run. @default 30_000 */
  reportIntervalMs?: number;
  /** How often a `progress` event is emitted. @default 1000 */
  progressIntervalMs?: number;
}

/** How the caller stops a run. */
export interface SignalOptions {
  /** Soft stop (SIGINT): no new submissions, in-flight requests get `timing.graceMs` to finish. */
  stop?: AbortSignal;
  /** Hard stop: abort in-flight requests now (a second SIGINT). */
  abort?: AbortSignal;
}

/** What the run writes besides results and the journal. */
export interface OutputOptions {
  /** Write report.html at the end. @default true */
  html?: boolean;
  /** pino level of run.log. @default 'info' */
  logLevel?: string;
}

/** The review of results (docs/contract.md#review). */
export interface ReviewOptions {
  /**
   * Review each downloaded result against its source, in a thread of its own beside the run; the
   * final report waits for the reviews. `false` is the CLI's `--no-review`. @default true
   */
  enabled?: boolean;
  /** A signal under this score (0..1) is a flag. @default 0.5 */
  threshold?: number;
}

/** Options of `runBatch`. Everything but `manifest` and `service` has a default. */
export interface RunOptions {
  /** Path of the manifest (.csv, .json, .jsonl/.ndjson). */
  manifest: string;
  /**
   * Output folder. @default `output/<manifest file name without extension>` under `cwd`, or
   * `output/<manifest file name>` when that folder holds another manifest's run
   */
  out?: string;
  /**
   * With `out` naming a bucket prefix (`s3://bucket/prefix/`): the local folder kept as the run's
   * cache (the journal's working copy, run.log, prepared uploads). Only a cache: the run's state is
   * in the bucket. @default `${XDG_CACHE_HOME:-~/.cache}/kitchen-batch/out/<hash of the URL>`
   */
  cache?: string;
  /** Folder relative paths resolve against. @default process.cwd() */
  cwd?: string;
  /**
   * The service. `baseUrl` and `apiKey` default to `KITCHEN_API_BASE_URL` and `KITCHEN_API_KEY` from
   * the environment, as for the CLI. @default both from the environment
   */
  service?: ServiceInput;
  preflight?: PreflightRunOptions;
  /**
   * How remote sources (https URLs, `s3://`) are reached (docs/contract.md#sources): `maxBytes`, the
   * size cap (a whole number, at least 1024), and `allowPrivate`, loopback and private addresses let
   * through the address guard; each not given is read from `env` (`KITCHEN_MAX_SOURCE_BYTES`,
   * `KITCHEN_ALLOW_PRIVATE_SOURCES=1`), the environment the S3 client is configured from too.
   * @default { maxBytes: 200 MiB, allowPrivate: false, env: process.env }
   */
  sources?: Partial<SourceAccess>;
  limits?: LimitOptions;
  resume?: ResumeOptions;
  timing?: TimingOptions;
  signals?: SignalOptions;
  output?: OutputOptions;
  review?: ReviewOptions;
  /** Progress and item events. A listener that throws is logged, never fatal. */
  onEvent?: (event: RunEvent) => void;
  /**
   * A pino logger of the caller's: every run.log line is also given to it, at its level (the key
   * redacted as in run.log). run.log is written either way.
   */
  logger?: Logger;
  /**
   * Given the run's own logger (run.log) once the output folder is open, so that what the caller
   * does beside the run (the CLI's pushes and pings) is in run.log too.
   */
  onLogger?: (logger: Logger) => void;
}

/** The options of `plan`: a run stopped before submitting, which may have no service. */
export type PlanOptions = Omit<RunOptions, 'service'> & { service?: ServiceInput };

/** {@link RunOptions} with every default filled in and every value checked. */
export interface ResolvedRunOptions {
  manifest: string;
  cwd: string;
  /** Absolute output folder, or the bucket prefix `s3://bucket/prefix` (no trailing slash). */
  outDir: string;
  /** `cache` made absolute; null for the default (see {@link RunOptions.cache}). */
  cacheDir: string | null;
  /**
   * Where the run goes instead when `outDir` is the default and holds the run of another manifest
   * file ({@link fallbackOutDir}); null when the caller named the folder.
   */
  outFallback: string | null;
  /** Absolute folder of the manifest (image paths are relative to it). */
  manifestDir: string;
  service: Required<Pick<ServiceOptions, 'baseUrl' | 'apiKey' | 'unreachableMs'>> &
    Pick<ServiceOptions, 'timeouts' | 'retry' | 'governor'>;
  preflight: Required<Omit<PreflightRunOptions, 'stripMetadata'>>;
  /** How remote sources are reached: given, else from the environment, else the defaults. */
  sources: SourceAccess;
  limits: {
    concurrency: number;
    maxSubmissions: number | null;
    jobTimeoutMs: number;
    shard: Shard | null;
    maxDurationMs: number | null;
    maxDurationGraceMs: number;
    maxRate: number | null;
  };
  resume: Required<ResumeOptions>;
  timing: Required<TimingOptions>;
  signals: SignalOptions;
  output: Required<OutputOptions>;
  review: Required<ReviewOptions>;
  onEvent: (event: RunEvent) => void;
  logger: Logger | null;
  onLogger: ((logger: Logger) => void) | null;
}

/** {@link PlanOptions} resolved: as a run, with the service optional. */
export type ResolvedPlanOptions = Omit<ResolvedRunOptions, 'service'> & {
  service: ResolvedRunOptions['service'] | null;
};

/** Levels `output.logLevel` takes (pino's). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Names options in messages; the CLI passes one that names its flags instead of option paths. */
export type OptionLabel = (optionPath: string) => string;
