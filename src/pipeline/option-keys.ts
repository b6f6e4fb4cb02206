/**
 * The keys each options object of a run takes, by its path, and the check that refuses any other. A
 * JavaScript caller gets no type check, so a misspelt key (`limits.concurency`) would be ignored and
 * its default used in silence. Each list is one string of words whose type is checked against its
 * interface: a key missing or extra here is a type error, so the lists cannot drift from the types.
 */
import type { GovernorOptions } from '../api/governor.js';
import type { RetryOptions } from '../api/policy.js';
import { UsageError } from '../errors.js';
import { suggestStyles } from '../manifest/style-check.js';
import type { SourceAccess } from '../storage/sources.js';
import type {
  LimitOptions,
  OutputOptions,
  PlanOptions,
  PreflightRunOptions,
  ResumeOptions,
  ReviewOptions,
  RunOptions,
  ServiceInput,
  ServiceOptions,
  SignalOptions,
  TimingOptions,
} from './option-types.js';
import type { Shard } from './shard.js';

/** The space-separated words of a string literal type, as a union. */
type Words<S extends string> = S extends `${infer Head} ${infer Tail}` ? Head | Words<Tail> : S;

/** `S` when its words are exactly the keys of `T`; else the keys missing and extra, as a type error. */
type ExactKeys<T, S extends string> = [Exclude<keyof T, Words<S>>, Exclude<Words<S>, keyof T>] extends [
  never,
  never,
]
  ? S
  : { missing: Exclude<keyof T, Words<S>>; extra: Exclude<Words<S>, keyof T> };

/** The keys of `T`, written as one string of words and checked by the compiler to be all of them. */
function keysOf<T>() {
  return <const S extends string>(words: S & ExactKeys<T, S>): readonly string[] => words.split(' ');
}

/** The keys of the run options (but `service`), by the path of the object that holds them. */
const RUN_KEYS: ReadonlyArray<[string, readonly string[]]> = [
  [
    '',
    keysOf<RunOptions>()(
      'manifest out cache cwd service preflight sources limits resume timing signals output review onEvent logger onLogger',
    ),
  ],
  ['preflight', keysOf<PreflightRunOptions>()('keepMetadata stripMetadata maxSide')],
  ['sources', keysOf<SourceAccess>()('maxBytes allowPrivate env onStoreOp')],
  [
    'limits',
    keysOf<LimitOptions>()(
      'concurrency maxSubmissions jobTimeoutMs shard maxDurationMs maxDurationGraceMs maxRate',
    ),
  ],
  ['limits.shard', keysOf<Shard>()('index count')],
  ['resume', keysOf<ResumeOptions>()('retryFailed retryAmbiguous verify manifestRenamed')],
  ['timing', keysOf<TimingOptions>()('graceMs reportIntervalMs progressIntervalMs')],
  ['signals', keysOf<SignalOptions>()('stop abort')],
  ['output', keysOf<OutputOptions>()('html logLevel')],
  ['review', keysOf<ReviewOptions>()('enabled threshold')],
];

/** The keys of the service options, by path below `service`. */
const SERVICE_KEYS: ReadonlyArray<[string, readonly string[]]> = [
  ['', keysOf<ServiceOptions>()('baseUrl apiKey timeouts retry governor unreachableMs')],
  ['timeouts', keysOf<NonNullable<ServiceOptions['timeouts']>>()('connect request upload download')],
  ['retry', keysOf<RetryOptions>()('baseMs capMs random retries maxRetryTimeMs pollAttempts')],
  [
    'governor',
    keysOf<GovernorOptions>()(
      'initialRate minRate maxRate probeGain quietSeconds quietGain holdShare assumedBurstSeconds now onChange',
    ),
  ],
];

/** The value at a dotted path below `root` (undefined when a step on the way is not an object). */
function at(root: unknown, dotted: string): unknown {
  let value = root;
  for (const step of dotted ? dotted.split('.') : []) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[step];
  }
  return value;
}

/**
 * Refuses a key `value` does not take, naming it by its path and the closest key it does take
 * (the suggestion the CLI makes for a mistyped flag), else listing them. A value that is not an
 * object is left to the value checks.
 */
function onlyKeys(optionPath: string, value: unknown, allowed: readonly string[]): void {
  if (typeof value !== 'object' || value === null) return;
  const named = (key: string) => (optionPath ? `${optionPath}.${key}` : key);
  for (const key of Object.keys(value)) {
    if (allowed.includes(key)) continue;
    const [closest] = suggestStyles(key, allowed, 1);
    throw new UsageError(
      closest
        ? `unknown option ${named(key)}; did you mean ${named(closest)}?`
        : `unknown option ${named(key)} (${optionPath || 'the run options'} takes: ${allowed.join(', ')})`,
    );
  }
}

/** Walks `table` below `root` (named `base` in messages), checking each object's keys. */
function checkKeys(root: unknown, base: string, table: ReadonlyArray<[string, readonly string[]]>): void {
  for (const [dotted, allowed] of table) {
    onlyKeys([base, dotted].filter(Boolean).join('.'), at(root, dotted), allowed);
  }
}

/** Refuses an unknown key anywhere in a run's or plan's options but `service` ({@link serviceKeys}). */
export function runKeys(input: PlanOptions): void {
  checkKeys(input, '', RUN_KEYS);
}

/** Refuses an unknown key anywhere in the service options. */
export function serviceKeys(service: ServiceInput): void {
  checkKeys(service, 'service', SERVICE_KEYS);
}
