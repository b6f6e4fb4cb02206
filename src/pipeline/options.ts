/**
 * The options of a run, in groups, with their defaults and checks in one place. `resolveRunOptions`
 * is the boundary: it fills every default and refuses a bad value with one message form
 * (`<option>: expected …, got …`); everything downstream reads the resolved values and applies no
 * default of its own. CLI flag names live in `src/config.ts`, which maps flags onto these options.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { normaliseBaseUrl } from '../api/client.js';
import type { GovernorOptions } from '../api/governor.js';
import type { RetryOptions } from '../api/policy.js';
import { UsageError } from '../errors.js';
import { CONCURRENCY, JOB_TIMEOUT_MS, MAX_SIDE, RUN_GRACE_MS, UNREACHABLE_MS } from '../limits.js';
import { suggestStyles } from '../manifest/style-check.js';
import { flag, numberAbove, OptionError, oneOf, text, wholeNumber } from '../util/validate.js';
import type { RunEvent } from './events.js';
import { checkShard, type Shard } from './shard.js';

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
  /** Folder relative paths resolve against. @default process.cwd() */
  cwd?: string;
  /**
   * The service. `baseUrl` and `apiKey` default to `KITCHEN_API_BASE_URL` and `KITCHEN_API_KEY` from
   * the environment, as for the CLI. @default both from the environment
   */
  service?: ServiceInput;
  preflight?: PreflightRunOptions;
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
}

/** The options of `plan`: a run stopped before submitting, which may have no service. */
export type PlanOptions = Omit<RunOptions, 'service'> & { service?: ServiceInput };

/** {@link RunOptions} with every default filled in and every value checked. */
export interface ResolvedRunOptions {
  manifest: string;
  cwd: string;
  /** Absolute output folder. */
  outDir: string;
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
}

/** {@link PlanOptions} resolved: as a run, with the service optional. */
export type ResolvedPlanOptions = Omit<ResolvedRunOptions, 'service'> & {
  service: ResolvedRunOptions['service'] | null;
};

/** Levels `output.logLevel` takes (pino's). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Names options in messages; the CLI passes one that names its flags instead of option paths. */
export type OptionLabel = (optionPath: string) => string;

/** Options objects this module resolved: passing one again is not checked twice. */
const resolved = new WeakSet<object>();

/** Whether `options` came out of {@link resolveRunOptions} (or {@link withService}). */
export function isResolved(options: object): options is ResolvedRunOptions {
  return resolved.has(options);
}

/** The default output folder: `output/<manifest file name without extension>` under `cwd`. */
export function defaultOutDir(cwd: string, manifest: string): string {
  return path.resolve(cwd, 'output', path.basename(manifest).replace(/\.[^.]+$/, ''));
}

/**
 * The default output folder of a manifest whose {@link defaultOutDir} holds another manifest's run
 * (`cat.jsonl` beside `cat.json`): `output/<manifest file name>` under `cwd`, extension kept.
 */
export function fallbackOutDir(cwd: string, manifest: string): string {
  return path.resolve(cwd, 'output', path.basename(manifest));
}

// The keys each options object takes, by its path. A JavaScript caller gets no type check, so a
// misspelt key (`limits.concurency`) would be ignored and its default used in silence; `satisfies`
// keeps these lists in step with the interfaces (a key missing or extra here is a type error).
const TOP_KEYS = {
  manifest: 1,
  out: 1,
  cwd: 1,
  service: 1,
  preflight: 1,
  limits: 1,
  resume: 1,
  timing: 1,
  signals: 1,
  output: 1,
  review: 1,
  onEvent: 1,
  logger: 1,
} satisfies Record<keyof RunOptions, 1>;
const SERVICE_KEYS = {
  baseUrl: 1,
  apiKey: 1,
  timeouts: 1,
  retry: 1,
  governor: 1,
  unreachableMs: 1,
} satisfies Record<keyof ServiceOptions, 1>;
const NESTED_KEYS = {
  preflight: { keepMetadata: 1, stripMetadata: 1, maxSide: 1 } satisfies Record<keyof PreflightRunOptions, 1>,
  limits: {
    concurrency: 1,
    maxSubmissions: 1,
    jobTimeoutMs: 1,
    shard: 1,
    maxDurationMs: 1,
    maxDurationGraceMs: 1,
    maxRate: 1,
  } satisfies Record<keyof LimitOptions, 1>,
  resume: { retryFailed: 1, retryAmbiguous: 1, verify: 1, manifestRenamed: 1 } satisfies Record<
    keyof ResumeOptions,
    1
  >,
  timing: { graceMs: 1, reportIntervalMs: 1, progressIntervalMs: 1 } satisfies Record<keyof TimingOptions, 1>,
  signals: { stop: 1, abort: 1 } satisfies Record<keyof SignalOptions, 1>,
  output: { html: 1, logLevel: 1 } satisfies Record<keyof OutputOptions, 1>,
  review: { enabled: 1, threshold: 1 } satisfies Record<keyof ReviewOptions, 1>,
};
const SHARD_KEYS = { index: 1, count: 1 } satisfies Record<keyof Shard, 1>;
const SERVICE_NESTED_KEYS = {
  timeouts: { connect: 1, request: 1, upload: 1, download: 1 } satisfies Record<
    keyof NonNullable<ServiceOptions['timeouts']>,
    1
  >,
  retry: {
    baseMs: 1,
    capMs: 1,
    random: 1,
    retries: 1,
    maxRetryTimeMs: 1,
    pollAttempts: 1,
  } satisfies Record<keyof RetryOptions, 1>,
  governor: {
    initialRate: 1,
    minRate: 1,
    maxRate: 1,
    probeGain: 1,
    quietSeconds: 1,
    quietGain: 1,
    holdShare: 1,
    assumedBurstSeconds: 1,
    now: 1,
    onChange: 1,
  } satisfies Record<keyof GovernorOptions, 1>,
};

/**
 * Refuses a key `value` does not take, naming it by its path and the closest key it does take
 * (the suggestion the CLI makes for a mistyped flag), else listing them. A value that is not an
 * object is left to the value checks.
 */
function onlyKeys(optionPath: string, value: unknown, allowed: Record<string, 1>): void {
  if (typeof value !== 'object' || value === null) return;
  const at = (key: string) => (optionPath ? `${optionPath}.${key}` : key);
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(allowed, key)) continue;
    const names = Object.keys(allowed);
    const [closest] = suggestStyles(key, names, 1);
    throw new UsageError(
      closest
        ? `unknown option ${at(key)}; did you mean ${at(closest)}?`
        : `unknown option ${at(key)} (${optionPath || 'the run options'} takes: ${names.join(', ')})`,
    );
  }
}

/** Every options object of a run or plan, checked with {@link onlyKeys}; `service` by {@link serviceKeys}. */
function runKeys(input: PlanOptions): void {
  onlyKeys('', input, TOP_KEYS);
  for (const [group, keys] of Object.entries(NESTED_KEYS)) {
    onlyKeys(group, (input as unknown as Record<string, unknown>)[group], keys);
  }
  onlyKeys('limits.shard', input.limits?.shard, SHARD_KEYS);
}

function serviceKeys(service: ServiceInput): void {
  onlyKeys('service', service, SERVICE_KEYS);
  for (const [group, keys] of Object.entries(SERVICE_NESTED_KEYS)) {
    onlyKeys(`service.${group}`, (service as Record<string, unknown>)[group], keys);
  }
}

/**
 * Fills in the defaults of a run and checks every value, once. Throws a {@link UsageError} (exit 2)
 * naming the option (through `label`) and what was expected.
 */
export function resolveRunOptions(
  input: RunOptions | ResolvedRunOptions,
  label: OptionLabel = (p) => p,
): ResolvedRunOptions {
  if (isResolved(input)) return input;
  const { service, ...rest } = input;
  const env = process.env;
  const filled: ServiceInput = {
    ...service,
    baseUrl: service?.baseUrl ?? (env.KITCHEN_API_BASE_URL?.trim() || undefined),
    apiKey: service?.apiKey ?? (env.KITCHEN_API_KEY?.trim() || undefined),
  };
  return withService(resolvePlanOptions(rest, label), filled, label);
}

/** As {@link resolveRunOptions}, for `plan`, where the service is optional. */
export function resolvePlanOptions(input: PlanOptions, label: OptionLabel = (p) => p): ResolvedPlanOptions {
  return { ...resolveCore(input, label), service: resolveService(input.service, label) };
}

/**
 * Completes checked plan options with the service, checked too: a run's options. The CLI checks
 * its flags first, before it starts a sandbox or reads the environment, then adds the service.
 */
export function withService(
  options: ResolvedPlanOptions,
  service: ServiceInput | undefined,
  label: OptionLabel = (p) => p,
): ResolvedRunOptions {
  const checked = resolveService(service, label);
  if (!checked) throw new UsageError('no service: pass the service options (base URL and API key)');
  const result: ResolvedRunOptions = { ...options, service: checked };
  resolved.add(result);
  return result;
}

function resolveService(
  service: ServiceInput | undefined,
  label: OptionLabel,
): ResolvedRunOptions['service'] | null {
  if (!service) return null;
  serviceKeys(service);
  const apiKey = text(
    label('service.apiKey'),
    service.apiKey,
    'no API key: set KITCHEN_API_KEY (or --api-key-file), or use --sandbox',
  );
  const baseUrl = text(
    label('service.baseUrl'),
    service.baseUrl,
    'no service URL: set KITCHEN_API_BASE_URL or --base-url, or use --sandbox',
  );
  try {
    normaliseBaseUrl(baseUrl);
  } catch {
    throw new OptionError(label('service.baseUrl'), 'an http(s) URL without credentials', baseUrl);
  }
  return {
    apiKey,
    baseUrl,
    unreachableMs: numberAbove(
      label('service.unreachableMs'),
      service.unreachableMs,
      0,
      UNREACHABLE_MS,
      'ms',
    ),
    ...(service.timeouts ? { timeouts: service.timeouts } : {}),
    ...(service.retry ? { retry: service.retry } : {}),
    ...(service.governor ? { governor: service.governor } : {}),
  };
}

function resolveCore(input: PlanOptions, label: OptionLabel): Omit<ResolvedRunOptions, 'service'> {
  runKeys(input);
  const cwd = input.cwd ?? process.cwd();
  const manifest = text(label('manifest'), input.manifest, 'no manifest: name a .csv, .json or .jsonl file');
  const { preflight = {}, limits = {}, resume = {}, timing = {}, output = {} } = input;
  const shard = limits.shard ? checkShard(label('limits.shard'), limits.shard) : null;
  return {
    manifest,
    cwd,
    outDir: input.out === undefined ? defaultOutDir(cwd, manifest) : path.resolve(cwd, input.out),
    outFallback: input.out === undefined ? fallbackOutDir(cwd, manifest) : null,
    manifestDir: path.dirname(path.resolve(cwd, manifest)),
    preflight: {
      keepMetadata: keepMetadata(preflight, label),
      maxSide: wholeNumber(label('preflight.maxSide'), preflight.maxSide, MAX_SIDE, MAX_SIDE.default),
    },
    limits: {
      concurrency: wholeNumber(
        label('limits.concurrency'),
        limits.concurrency,
        CONCURRENCY,
        CONCURRENCY.default,
      ),
      maxSubmissions: wholeNumber(label('limits.maxSubmissions'), limits.maxSubmissions, { min: 0 }) ?? null,
      jobTimeoutMs: numberAbove(label('limits.jobTimeoutMs'), limits.jobTimeoutMs, 0, JOB_TIMEOUT_MS, 'ms'),
      shard,
      ...maxDuration(limits, label),
      maxRate:
        limits.maxRate === undefined ? null : numberAbove(label('limits.maxRate'), limits.maxRate, 0, 0),
    },
    resume: {
      retryFailed: flag(label('resume.retryFailed'), resume.retryFailed, false),
      retryAmbiguous: flag(label('resume.retryAmbiguous'), resume.retryAmbiguous, false),
      verify: flag(label('resume.verify'), resume.verify, false),
      manifestRenamed: flag(label('resume.manifestRenamed'), resume.manifestRenamed, false),
    },
    timing: {
      graceMs: numberAbove(label('timing.graceMs'), timing.graceMs, -1, RUN_GRACE_MS, 'ms'),
      reportIntervalMs: numberAbove(
        label('timing.reportIntervalMs'),
        timing.reportIntervalMs,
        0,
        30_000,
        'ms',
      ),
      progressIntervalMs: numberAbove(
        label('timing.progressIntervalMs'),
        timing.progressIntervalMs,
        0,
        1000,
        'ms',
      ),
    },
    signals: input.signals ?? {},
    output: {
      html: flag(label('output.html'), output.html, true),
      logLevel: oneOf(label('output.logLevel'), output.logLevel, LOG_LEVELS, 'info'),
    },
    review: {
      enabled: flag(label('review.enabled'), input.review?.enabled, true),
      threshold: fraction(label('review.threshold'), input.review?.threshold, 0.5),
    },
    onEvent: input.onEvent ?? (() => {}),
    logger: input.logger ?? null,
  };
}

/** `keepMetadata`, refusing the old `stripMetadata: true` beside it (they say opposite things). */
function fraction(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value >= 0 && value <= 1))
    throw new OptionError(name, 'a number from 0 to 1', value);
  return value;
}

function maxDuration(limits: LimitOptions, label: OptionLabel) {
  if (limits.maxDurationMs === undefined) return { maxDurationMs: null, maxDurationGraceMs: 0 };
  const maxDurationMs = numberAbove(label('limits.maxDurationMs'), limits.maxDurationMs, 0, 0, 'ms');
  const grace = Math.min(300_000, maxDurationMs / 4);
  return {
    maxDurationMs,
    maxDurationGraceMs: numberAbove(
      label('limits.maxDurationGraceMs'),
      limits.maxDurationGraceMs,
      -1,
      grace,
      'ms',
    ),
  };
}

function keepMetadata(preflight: PreflightRunOptions, label: (option: string) => string): boolean {
  const keep = flag(label('preflight.keepMetadata'), preflight.keepMetadata, false);
  if (flag(label('preflight.stripMetadata'), preflight.stripMetadata, false) && keep) {
    throw new OptionError(
      label('preflight.stripMetadata'),
      `not together with ${label('preflight.keepMetadata')} (removing metadata is the default)`,
      true,
    );
  }
  return keep;
}
