/**
 * Flags of the `kitchen-batch sandbox` command and their translation into {@link SandboxOptions}.
 * Validation happens once, here, with messages naming the flag, what was expected and what was got.
 */
import type { ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.js';
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

/**
 * Flag definitions of the `sandbox` command, for `util.parseArgs`. All values arrive as strings
 * except the boolean `--any-key`; typed exactly (`as const`) so parseArgs infers the value types.
 */
export const SANDBOX_FLAGS = {
  host: { type: 'string' },
  port: { type: 'string' },
  'any-key': { type: 'boolean' },
  'processing-ms': { type: 'string' },
  'jitter-ms': { type: 'string' },
  'queued-ms': { type: 'string' },
  'max-jobs': { type: 'string' },
  results: { type: 'string' },
  seed: { type: 'string' },
  'styles-shape': { type: 'string' },
  'rate-limit': { type: 'string' },
  burst: { type: 'string' },
  'retry-after': { type: 'string' },
  'rate-429': { type: 'string' },
  'error-rate': { type: 'string' },
  'error-statuses': { type: 'string' },
  'error-on': { type: 'string' },
  'reset-rate': { type: 'string' },
  'reset-when': { type: 'string' },
  'reset-on': { type: 'string' },
  'hang-rate': { type: 'string' },
  'hang-on': { type: 'string' },
  'slow-ms': { type: 'string' },
  'fail-rate': { type: 'string' },
  'fail-code': { type: 'string' },
  'stuck-rate': { type: 'string' },
  'bad-status-rate': { type: 'string' },
  'malformed-rate': { type: 'string' },
  'poll-not-found-rate': { type: 'string' },
  'result-ttl-ms': { type: 'string' },
  'result-fault': { type: 'string' },
  'result-fault-rate': { type: 'string' },
  'bad-result-rate': { type: 'string' },
  'bad-results': { type: 'string' },
  'date-skew-ms': { type: 'string' },
  'fail-create-with': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** One-line help per flag, for the CLI's usage text. */
export const SANDBOX_FLAG_HELP: Readonly<Record<string, string>> = {
  host: 'interface to listen on (default 127.0.0.1)',
  port: 'port to listen on (default 0: a free port)',
  'any-key': 'accept any non-empty Bearer token instead of KITCHEN_API_KEY / sandbox-key',
  'processing-ms': 'mean job processing time in ms (default 1500)',
  'jitter-ms': '± uniform jitter on processing time in ms (default 500)',
  'queued-ms': 'time a job stays queued in ms (default min(300, processing/4))',
  'max-jobs': 'jobs kept in memory; older ones are forgotten and answer 404 (default 1000)',
  results:
    'render|render-once|echo: styled results (render-once: each upload and style rendered once, then kept), or the upload itself with no image work (default render)',
  seed: 'PRNG seed for fault rolls (integer)',
  'styles-shape': `GET /v1/styles shape: ${STYLES_SHAPES.join('|')}`,
  'rate-limit': 'token bucket rate in requests per second over /v1/* (default off)',
  burst: 'token bucket size (default: the rate, at least 1)',
  'retry-after': `Retry-After on 429: ${RETRY_AFTER_MODES.join('|')} (default seconds)`,
  'rate-429': 'probability of an extra random 429',
  'error-rate': 'probability of a random 5xx',
  'error-statuses': 'comma-separated 5xx statuses to pick from (default 500,502,503,504)',
  'error-on': `requests the 5xx applies to: ${SCOPES.join('|')} (default all)`,
  'reset-rate': 'probability of a TCP reset',
  'reset-when': 'mid-upload|after-body (default after-body: a create IS made)',
  'reset-on': `requests the reset applies to: ${SCOPES.join('|')} (default all)`,
  'hang-rate': 'probability that a request is never answered',
  'hang-on': `requests the hang applies to: ${SCOPES.join('|')} (default all)`,
  'slow-ms': 'delay before every response in ms',
  'fail-rate': 'probability that a job ends failed',
  'fail-code': 'error.code of failed jobs (default generation_failed)',
  'stuck-rate': 'probability that a job stays processing forever',
  'bad-status-rate': 'probability that a poll answers status "exploded"',
  'malformed-rate': 'probability that a poll answers malformed JSON or a job without id/status',
  'poll-not-found-rate': 'probability that a poll of a known job answers 404',
  'result-ttl-ms': 'result URLs expire (410) after this many ms; a new poll rotates the URL',
  'result-fault': `result download fault: ${RESULT_FAULTS.join('|')}`,
  'result-fault-rate': 'probability that a download suffers --result-fault (default 1)',
  'bad-result-rate': 'probability that a succeeded job hands out a bad result on purpose (default 0)',
  'bad-results': `the bad results to pick from, comma-separated: ${BAD_RESULTS.join(',')} (default all)`,
  'date-skew-ms': 'skew of the Date header and job timestamps in ms (may be negative)',
  'fail-create-with': 'every create answers STATUS:CODE, e.g. 403:forbidden',
};

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
    throw new UsageError(`--${flag}: expected ${what}, got "${raw}"`);
  }
  return n;
}

const nonNegative = (values: FlagValues, flag: string) =>
  number(values, flag, 'a number of milliseconds >= 0', (n) => n >= 0);
const probability = (values: FlagValues, flag: string) =>
  number(values, flag, 'a probability between 0 and 1', (n) => n >= 0 && n <= 1);

function oneOf<T extends string>(values: FlagValues, flag: string, allowed: readonly T[]): T | undefined {
  const raw = str(values, flag);
  if (raw === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new UsageError(`--${flag}: expected one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return raw as T;
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
  const results = oneOf(values, 'results', ['render', 'render-once', 'echo'] as const);
  if (results !== undefined) options.results = results;
  const seed = number(values, 'seed', 'an integer', () => true, true);
  if (seed !== undefined) options.seed = seed;
  const shape = oneOf<StylesShape>(values, 'styles-shape', STYLES_SHAPES);
  if (shape !== undefined) options.stylesShape = shape;

  const rps = number(values, 'rate-limit', 'requests per second > 0', (n) => n > 0);
  const burst = number(values, 'burst', 'an integer >= 1', (n) => n >= 1, true);
  if (burst !== undefined && rps === undefined)
    throw new UsageError('--burst: only makes sense with --rate-limit');
  if (rps !== undefined) faults.rateLimit = { rps, burst: burst ?? Math.max(1, Math.floor(rps)) };
  const retryAfter = oneOf(values, 'retry-after', RETRY_AFTER_MODES);
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
      throw new UsageError(`--error-statuses: expected comma-separated 5xx statuses, got "${statuses}"`);
    }
    faults.errorStatuses = list;
  }
  const errorOn = oneOf(values, 'error-on', SCOPES);
  if (errorOn !== undefined) faults.errorOn = errorOn;
  const resetWhen = oneOf(values, 'reset-when', ['mid-upload', 'after-body'] as const);
  if (resetWhen !== undefined) faults.resetWhen = resetWhen;
  const resetOn = oneOf(values, 'reset-on', SCOPES);
  if (resetOn !== undefined) faults.resetOn = resetOn;
  const hangOn = oneOf(values, 'hang-on', SCOPES);
  if (hangOn !== undefined) faults.hangOn = hangOn;
  const slowMs = nonNegative(values, 'slow-ms');
  if (slowMs !== undefined) faults.slowMs = slowMs;
  const failCode = str(values, 'fail-code');
  if (failCode !== undefined) {
    if (!/^[a-z0-9_]+$/i.test(failCode)) {
      throw new UsageError(`--fail-code: expected a code like generation_failed, got "${failCode}"`);
    }
    faults.failCode = failCode;
  }
  const ttl = number(values, 'result-ttl-ms', 'a number of milliseconds > 0', (n) => n > 0);
  if (ttl !== undefined) faults.resultTtlMs = ttl;
  const resultFault = oneOf(values, 'result-fault', RESULT_FAULTS);
  if (resultFault !== undefined) faults.resultFault = resultFault;
  const bad = str(values, 'bad-results');
  if (bad !== undefined) {
    const kinds = bad.split(',').map((k) => k.trim());
    const unknown = kinds.filter((k) => !(BAD_RESULTS as readonly string[]).includes(k));
    if (kinds.length === 0 || unknown.length > 0) {
      throw new UsageError(`--bad-results: expected some of ${BAD_RESULTS.join(',')}, got "${bad}"`);
    }
    faults.badResults = kinds as BadResult[];
  }
  const skew = number(values, 'date-skew-ms', 'a number of milliseconds (may be negative)', () => true);
  if (skew !== undefined) faults.dateSkewMs = skew;
  const failCreate = str(values, 'fail-create-with');
  if (failCreate !== undefined) {
    const match = /^([1-5]\d\d):([a-z0-9_]+)$/i.exec(failCreate);
    if (!match?.[1] || !match[2]) {
      throw new UsageError(
        `--fail-create-with: expected STATUS:CODE such as 403:forbidden, got "${failCreate}"`,
      );
    }
    faults.failCreateWith = { status: Number(match[1]), code: match[2] };
  }
  if (Object.keys(faults).length > 0) options.faults = faults;
  return options;
}
