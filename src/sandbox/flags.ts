/**
 * Flags of the `kitchen-batch sandbox` command and their translation into {@link SandboxOptions}.
 * Validation happens once, here, with messages naming the flag, what was expected and what was got.
 */
import { UsageError } from '../errors.js';
import type { FlagTable } from '../util/flags.js';
import { OptionError, oneOf } from '../util/validate.js';
import {
  BAD_RESULTS,
  type BadResult,
  type FaultScope,
  type ResultFault,
  type RetryAfterMode,
  type SandboxFaults,
} from './faults.js';
import { STYLES_SHAPES, type StylesShape } from './style-catalogue.js';
import type { SandboxOptions } from './types.js';

const RESULT_FAULTS: readonly ResultFault[] = [
  'not-found',
  'truncated',
  'truncated-unsized',
  'wrong-type',
  'redirect-cross-origin',
  'slow-drip',
  'oversized',
];
const RETRY_AFTER_MODES: readonly RetryAfterMode[] = ['seconds', 'date', 'none', 'garbage'];
const SCOPES: readonly FaultScope[] = ['create', 'poll', 'all'];

/** A probability knob (`--error-rate P`): how often a fault happens, 0 to 1. */
const chance = (of: string, shown?: string) =>
  ({
    type: 'string',
    value: 'P',
    help: `probability ${of}`,
    ...(shown === undefined ? {} : { shown }),
  }) as const;

/** A flag that narrows a fault to some requests: `--error-on`, `--reset-on`, `--hang-on`. */
const scopeFlag = (fault: string) =>
  ({
    type: 'string',
    value: 'SCOPE',
    help: `requests the ${fault} applies to: ${SCOPES.join('|')}`,
    shown: 'all',
  }) as const;

/**
 * Flags of the `sandbox` command, declared once (see `util/flags.ts`): each also a `util.parseArgs`
 * option, its placeholder, help line and default.
 */
export const SANDBOX_FLAGS = {
  host: { type: 'string', value: 'HOST', help: 'interface to listen on', shown: '127.0.0.1' },
  port: { type: 'string', value: 'PORT', help: 'port to listen on', shown: '0: a free port' },
  'any-key': {
    type: 'boolean',
    help: 'accept any non-empty Bearer token instead of KITCHEN_API_KEY / sandbox-key',
  },
  'processing-ms': { type: 'string', value: 'MS', help: 'mean job processing time in ms', shown: '1500' },
  'jitter-ms': {
    type: 'string',
    value: 'MS',
    help: '± uniform jitter on processing time in ms',
    shown: '500',
  },
  'queued-ms': {
    type: 'string',
    value: 'MS',
    help: 'time a job stays queued in ms',
    shown: 'min(300, processing/4)',
  },
  'max-jobs': {
    type: 'string',
    value: 'N',
    help: 'jobs kept in memory; older ones are forgotten and answer 404',
    shown: '1000',
  },
  results: {
    type: 'string',
    value: 'MODE',
    help: 'render|render-once|echo: styled results (render-once: each upload and style rendered once, then kept), or the upload itself with no image work',
    shown: 'render',
  },
  seed: { type: 'string', value: 'N', help: 'PRNG seed for fault rolls (integer)' },
  'styles-shape': {
    type: 'string',
    value: 'SHAPE',
    help: `GET /v1/styles shape: one of ${STYLES_SHAPES.join(', ')}`,
  },
  'rate-limit': {
    type: 'string',
    value: 'RPS',
    help: 'token bucket rate in requests per second over /v1/*',
    shown: 'off',
  },
  burst: { type: 'string', value: 'N', help: 'token bucket size (default: the rate, at least 1)' },
  'retry-after': {
    type: 'string',
    value: 'MODE',
    help: `Retry-After on 429: ${RETRY_AFTER_MODES.join('|')}`,
    shown: 'seconds',
  },
  'rate-429': chance('of an extra random 429'),
  'error-rate': chance('of a random 5xx'),
  'error-statuses': {
    type: 'string',
    value: 'LIST',
    help: 'comma-separated 5xx statuses to pick from',
    shown: '500,502,503,504',
  },
  'error-on': scopeFlag('5xx'),
  'reset-rate': chance('of a TCP reset'),
  'reset-when': {
    type: 'string',
    value: 'WHEN',
    help: 'mid-upload|after-body',
    shown: 'after-body: a create IS made',
  },
  'reset-on': scopeFlag('reset'),
  'hang-rate': chance('that a request is never answered'),
  'hang-on': scopeFlag('hang'),
  'slow-ms': { type: 'string', value: 'MS', help: 'delay before every response in ms' },
  'fail-rate': chance('that a job ends failed'),
  'fail-code': {
    type: 'string',
    value: 'CODE',
    help: 'error.code of failed jobs',
    shown: 'generation_failed',
  },
  'stuck-rate': chance('that a job stays processing forever'),
  'bad-status-rate': chance('that a poll answers status "exploded"'),
  'malformed-rate': chance('that a poll answers malformed JSON or a job without id/status'),
  'poll-not-found-rate': chance('that a poll of a known job answers 404'),
  'result-ttl-ms': {
    type: 'string',
    value: 'MS',
    help: 'result URLs expire (410) after this many ms; a new poll rotates the URL',
  },
  'result-fault': {
    type: 'string',
    value: 'FAULT',
    help: `result download fault: one of ${RESULT_FAULTS.join(', ')}`,
  },
  'result-fault-rate': chance('that a download suffers --result-fault', '1'),
  'bad-result-rate': chance('that a succeeded job hands out a bad result on purpose', '0'),
  'bad-results': {
    type: 'string',
    value: 'LIST',
    help: `the bad results to pick from, comma-separated: ${BAD_RESULTS.join(', ')}`,
    shown: 'all',
  },
  'date-skew-ms': {
    type: 'string',
    value: 'MS',
    help: 'skew of the Date header and job timestamps in ms (may be negative)',
  },
  'fail-create-with': {
    type: 'string',
    value: 'STATUS:CODE',
    help: 'every create answers STATUS:CODE, e.g. 403:forbidden',
  },
} as const satisfies FlagTable;

/** Values as `util.parseArgs` returns them (arrays only for `multiple` flags, which we do not use). */
type FlagValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

function str(values: FlagValues, flag: string): string | undefined {
  const given = values[flag];
  // A repeated flag: the last one wins, as with most CLIs.
  const value = Array.isArray(given) ? given.at(-1) : given;
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new UsageError(`--${flag}: expected a value, got none`);
  return value;
}

function number(
  values: FlagValues,
  flag: string,
  what: string,
  check: (n: number) => boolean,
  integer = false,
): number | undefined {
  const raw = str(values, flag);
  if (raw === undefined) return undefined;
  const n = raw.trim() === '' ? Number.NaN : Number(raw);
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || !check(n)) {
    throw new OptionError(`--${flag}`, what, raw);
  }
  return n;
}

const nonNegative = (values: FlagValues, flag: string) =>
  number(values, flag, 'a number of milliseconds >= 0', (n) => n >= 0);
const probability = (values: FlagValues, flag: string) =>
  number(values, flag, 'a probability between 0 and 1', (n) => n >= 0 && n <= 1);

function choice<T extends string>(values: FlagValues, flag: string, allowed: readonly T[]): T | undefined {
  const raw = str(values, flag);
  return raw === undefined ? undefined : oneOf(`--${flag}`, raw, allowed, raw as T);
}

/**
 * Turns parsed `sandbox` flags into options. `env.KITCHEN_API_KEY`, when set, becomes the key the
 * sandbox requires (the CLI passes the environment in; this module never reads it itself).
 * @throws UsageError naming the flag and what was expected.
 */
export function sandboxOptionsFromFlags(
  values: FlagValues,
  env: { KITCHEN_API_KEY?: string | undefined } = {},
): SandboxOptions {
  const options: SandboxOptions = {};
  const faults: Partial<SandboxFaults> = {};
  const host = str(values, 'host');
  if (host !== undefined) options.host = host;
  const port = number(values, 'port', 'a port number 0..65535', (n) => n >= 0 && n <= 65535, true);
  if (port !== undefined) options.port = port;
  if (values['any-key'] === true) options.apiKey = null;
  else if (env.KITCHEN_API_KEY) options.apiKey = env.KITCHEN_API_KEY;
  const processingMs = nonNegative(values, 'processing-ms');
  if (processingMs !== undefined) options.processingMs = processingMs;
  const jitterMs = nonNegative(values, 'jitter-ms');
  if (jitterMs !== undefined) options.jitterMs = jitterMs;
  const queuedMs = nonNegative(values, 'queued-ms');
  if (queuedMs !== undefined) options.queuedMs = queuedMs;
  const maxJobs = number(values, 'max-jobs', 'an integer >= 1', (n) => n >= 1, true);
  if (maxJobs !== undefined) options.maxJobs = maxJobs;
  const results = choice(values, 'results', ['render', 'render-once', 'echo'] as const);
  if (results !== undefined) options.results = results;
  const seed = number(values, 'seed', 'an integer', () => true, true);
  if (seed !== undefined) options.seed = seed;
  const shape = choice<StylesShape>(values, 'styles-shape', STYLES_SHAPES);
  if (shape !== undefined) options.stylesShape = shape;

  const rps = number(values, 'rate-limit', 'requests per second > 0', (n) => n > 0);
  const burst = number(values, 'burst', 'an integer >= 1', (n) => n >= 1, true);
  if (burst !== undefined && rps === undefined)
    throw new UsageError('--burst: only makes sense with --rate-limit');
  if (rps !== undefined) faults.rateLimit = { rps, burst: burst ?? Math.max(1, Math.floor(rps)) };
  const retryAfter = choice(values, 'retry-after', RETRY_AFTER_MODES);
  if (retryAfter !== undefined) faults.retryAfter = retryAfter;

  const probabilities = [
    ['rate-429', 'rate429'],
    ['error-rate', 'errorRate'],
    ['reset-rate', 'resetRate'],
    ['hang-rate', 'hangRate'],
    ['fail-rate', 'failRate'],
    ['stuck-rate', 'stuckRate'],
    ['bad-status-rate', 'badStatusRate'],
    ['malformed-rate', 'malformedRate'],
    ['poll-not-found-rate', 'pollNotFoundRate'],
    ['result-fault-rate', 'resultFaultRate'],
    ['bad-result-rate', 'badResultRate'],
  ] as const;
  for (const [flag, key] of probabilities) {
    const p = probability(values, flag);
    if (p !== undefined) faults[key] = p;
  }

  const statuses = str(values, 'error-statuses');
  if (statuses !== undefined) {
    const list = statuses.split(',').map((s) => Number(s.trim()));
    if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 500 || n > 599)) {
      throw new OptionError('--error-statuses', 'comma-separated 5xx statuses', statuses);
    }
    faults.errorStatuses = list;
  }
  const errorOn = choice(values, 'error-on', SCOPES);
  if (errorOn !== undefined) faults.errorOn = errorOn;
  const resetWhen = choice(values, 'reset-when', ['mid-upload', 'after-body'] as const);
  if (resetWhen !== undefined) faults.resetWhen = resetWhen;
  const resetOn = choice(values, 'reset-on', SCOPES);
  if (resetOn !== undefined) faults.resetOn = resetOn;
  const hangOn = choice(values, 'hang-on', SCOPES);
  if (hangOn !== undefined) faults.hangOn = hangOn;
  const slowMs = nonNegative(values, 'slow-ms');
  if (slowMs !== undefined) faults.slowMs = slowMs;
  const failCode = str(values, 'fail-code');
  if (failCode !== undefined) {
    if (!/^[a-z0-9_]+$/i.test(failCode)) {
      throw new OptionError('--fail-code', 'a code like generation_failed', failCode);
    }
    faults.failCode = failCode;
  }
  const ttl = number(values, 'result-ttl-ms', 'a number of milliseconds > 0', (n) => n > 0);
  if (ttl !== undefined) faults.resultTtlMs = ttl;
  const resultFault = choice(values, 'result-fault', RESULT_FAULTS);
  if (resultFault !== undefined) faults.resultFault = resultFault;
  const bad = str(values, 'bad-results');
  if (bad !== undefined) {
    const kinds = bad.split(',').map((k) => k.trim());
    const unknown = kinds.filter((k) => !(BAD_RESULTS as readonly string[]).includes(k));
    if (kinds.length === 0 || unknown.length > 0) {
      throw new OptionError('--bad-results', `some of ${BAD_RESULTS.join(',')}`, bad);
    }
    faults.badResults = kinds as BadResult[];
  }
  const skew = number(values, 'date-skew-ms', 'a number of milliseconds (may be negative)', () => true);
  if (skew !== undefined) faults.dateSkewMs = skew;
  const failCreate = str(values, 'fail-create-with');
  if (failCreate !== undefined) {
    const match = /^([1-5]\d\d):([a-z0-9_]+)$/i.exec(failCreate);
    if (!match?.[1] || !match[2]) {
      throw new OptionError('--fail-create-with', 'STATUS:CODE such as 403:forbidden', failCreate);
    }
    faults.failCreateWith = { status: Number(match[1]), code: match[2] };
  }
  if (Object.keys(faults).length > 0) options.faults = faults;
  return options;
}
