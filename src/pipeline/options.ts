/**
 * The options of a run (their shapes in option-types.ts, their keys in option-keys.ts), with their
 * defaults and checks in one place. `resolveRunOptions` is the boundary: it fills every default and
 * refuses a bad value with one message form (`<option>: expected …, got …`); everything downstream
 * reads the resolved values and applies no default of its own. The CLI's flags are declared in
 * `commands/command-table.ts` and mapped onto these options by `src/config.ts`.
 */
import path from 'node:path';
import { normaliseBaseUrl } from '../api/base-url.js';
import { UsageError } from '../errors.js';
import { CONCURRENCY, JOB_TIMEOUT_MS, MAX_SIDE, RUN_GRACE_MS, UNREACHABLE_MS } from '../limits.js';
import { DEFAULT_THRESHOLD } from '../review/flags.js';
import { isS3Ref } from '../storage/s3/ref.js';
import { flag, numberAbove, OptionError, oneOf, text, wholeNumber } from '../util/validate.js';
import { runKeys, serviceKeys } from './option-keys.js';
import type {
  LimitOptions,
  OptionLabel,
  PlanOptions,
  PreflightRunOptions,
  ResolvedPlanOptions,
  ResolvedRunOptions,
  RunOptions,
  ServiceInput,
} from './option-types.js';
import { LOG_LEVELS } from './option-types.js';
import { checkShard } from './shard.js';
import { resolveSourceAccess } from './source-access.js';

// The shapes are imported from here by callers that want the resolver too.
export * from './option-types.js';

/** Options objects this module resolved: passing one again is not checked twice. */
const resolved = new WeakSet<object>();

/** Whether `options` came out of {@link resolveRunOptions} (or {@link withService}). */
export function isResolved(options: object): options is ResolvedRunOptions {
  return resolved.has(options);
}

/** The default output folder: `output/<manifest file name without extension>` under `cwd`. */
export function defaultOutDir(cwd: string, manifest: string): string {
  return path.resolve(cwd, 'output', path.basename(manifestName(manifest)).replace(/\.[^.]+$/, ''));
}

/**
 * The manifest's name as a path: a manifest at an http(s) URL is named by the URL's path, without
 * its query (a pre-signed URL's signature must not name a folder) or fragment.
 */
function manifestName(manifest: string): string {
  return /^https?:\/\//i.test(manifest) ? manifest.replace(/[?#].*$/s, '') : manifest;
}

/**
 * The default output folder of a manifest whose {@link defaultOutDir} holds another manifest's run
 * (`cat.jsonl` beside `cat.json`): `output/<manifest file name>` under `cwd`, extension kept.
 */
export function fallbackOutDir(cwd: string, manifest: string): string {
  return path.resolve(cwd, 'output', path.basename(manifestName(manifest)));
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
    outDir: input.out === undefined ? defaultOutDir(cwd, manifest) : outLocation(cwd, input.out),
    cacheDir:
      input.cache === undefined ? null : path.resolve(cwd, text(label('cache'), input.cache, 'no folder')),
    outFallback: input.out === undefined ? fallbackOutDir(cwd, manifest) : null,
    manifestDir: path.dirname(path.resolve(cwd, manifest)),
    preflight: {
      keepMetadata: keepMetadata(preflight, label),
      maxSide: wholeNumber(label('preflight.maxSide'), preflight.maxSide, MAX_SIDE, MAX_SIDE.default),
    },
    sources: resolveSourceAccess(input.sources, label),
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
      threshold: fraction(label('review.threshold'), input.review?.threshold, DEFAULT_THRESHOLD),
    },
    onEvent: input.onEvent ?? (() => {}),
    logger: input.logger ?? null,
    onLogger: input.onLogger ?? null,
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

/**
 * `--out`: a bucket prefix (`s3://bucket/prefix/`) is kept as given, its trailing slashes dropped
 * (`s3://bucket/prefix`, so `<out>/report.json` reads right); a folder is made absolute.
 */
export function outLocation(cwd: string, out: string): string {
  return isS3Ref(out) ? out.replace(/\/+$/, '') : path.resolve(cwd, out);
}
