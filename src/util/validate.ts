/**
 * Option checks with one message form: `<name>: expected <what>, got <value>`. Every boundary that
 * takes options (run options, preflight options, CLI flags, sandbox knobs, report options) uses
 * these, so a user reads the same shape of message wherever a value is refused.
 */
import { UsageError } from '../errors.js';

/** How a refused value is shown: strings quoted, everything else as JavaScript prints it. */
function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The error every check throws: a {@link UsageError} (exit 2) whose `option` names what was refused. */
export class OptionError extends UsageError {
  /** The option as the caller named it (an option path, or a CLI flag). */
  readonly option: string;
  readonly expected: string;
  readonly got: unknown;

  constructor(option: string, expected: string, got: unknown) {
    super(`${option}: expected ${expected}, got ${shown(got)}`);
    this.option = option;
    this.expected = expected;
    this.got = got;
  }

  /** The same refusal under another name (an option path shown as the CLI flag that set it). */
  renamed(option: string): OptionError {
    return new OptionError(option, this.expected, this.got);
  }
}

/** Bounds of a number check; both inclusive. */
export interface Range {
  min?: number;
  max?: number;
}

function rangeWords(kind: string, { min, max }: Range): string {
  if (min !== undefined && max !== undefined) return `${kind} from ${min} to ${max}`;
  if (min !== undefined) return `${kind} of at least ${min}`;
  if (max !== undefined) return `${kind} of at most ${max}`;
  return kind;
}

/** A whole number within `range`, or `fallback` when absent. */
export function wholeNumber(name: string, value: unknown, range: Range, fallback: number): number;
export function wholeNumber(name: string, value: unknown, range: Range): number | undefined;
export function wholeNumber(name: string, value: unknown, range: Range, fallback?: number) {
  if (value === undefined) return fallback;
  const ok =
    typeof value === 'number' &&
    Number.isSafeInteger(value) &&
    (range.min === undefined || value >= range.min) &&
    (range.max === undefined || value <= range.max);
  if (!ok) throw new OptionError(name, rangeWords('a whole number', range), value);
  return value;
}

/** A finite number above `above` (exclusive), or `fallback` when absent. */
export function numberAbove(
  name: string,
  value: unknown,
  above: number,
  fallback: number,
  unit = '',
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= above) {
    throw new OptionError(name, `a number${unit ? ` of ${unit}` : ''} above ${above}`, value);
  }
  return value;
}

/** true or false, or `fallback` when absent. */
export function flag(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new OptionError(name, 'true or false', value);
  return value;
}

/** One of `allowed`, or `fallback` when absent. */
export function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new OptionError(name, `one of ${allowed.join(', ')}`, value);
  }
  return value as T;
}

/** A non-empty string (after trimming); `missing` is the whole message when it is absent or empty. */
export function text(name: string, value: unknown, missing: string): string {
  if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) {
    throw new UsageError(missing);
  }
  if (typeof value !== 'string') throw new OptionError(name, 'a string', value);
  return value;
}

// Flags arrive as strings. These read one into a number (undefined when the flag is absent) and
// refuse it with the same OptionError, naming the flag as typed (`--max-rate`) and the text as given.

/** A finite number read from `raw` that passes `ok`, else an {@link OptionError} expecting `what`. */
function numberFlag(name: string, raw: string | undefined, what: string, ok: (n: number) => boolean) {
  if (raw === undefined) return undefined;
  const value = raw.trim() === '' ? Number.NaN : Number(raw);
  if (!Number.isFinite(value) || !ok(value)) throw new OptionError(name, what, raw);
  return value;
}

/** A whole number flag (any sign: the range is the option's to check), or undefined when absent. */
export function intFlag(name: string, raw: string | undefined): number | undefined {
  if (raw !== undefined && !/^\s*-?\d+\s*$/.test(raw))
    throw new OptionError(`--${name}`, 'a whole number', raw);
  return numberFlag(`--${name}`, raw, 'a whole number', Number.isSafeInteger);
}

/** A positive number (`--max-rate`), or undefined when absent. */
export function positiveFlag(name: string, raw: string | undefined, what: string): number | undefined {
  return numberFlag(`--${name}`, raw, what, (n) => n > 0);
}

/** A request rate (`--max-rate`, of `run` and `worker`): a positive number, or undefined when absent. */
export function rateFlag(name: string, raw: string | undefined): number | undefined {
  return positiveFlag(name, raw, 'a positive number of requests per second');
}

/** A number from 0 to 1 (`--review-threshold`), or undefined when absent. */
export function fractionFlag(name: string, raw: string | undefined): number | undefined {
  return numberFlag(`--${name}`, raw, 'a number from 0 to 1', (n) => n >= 0 && n <= 1);
}

/** A positive number of seconds (`--job-timeout`), as milliseconds. */
export function secondsFlag(name: string, raw: string | undefined): number | undefined {
  const seconds = numberFlag(`--${name}`, raw, 'a positive number of seconds', (n) => n > 0);
  return seconds === undefined ? undefined : Math.round(seconds * 1000);
}

/** A number of seconds of at least `min`, as milliseconds (the worker's `--stall-timeout`, `--grace`). */
export function secondsAtLeast(name: string, raw: string | undefined, min: number): number | undefined {
  const seconds = numberFlag(`--${name}`, raw, `a number of seconds of at least ${min}`, (n) => n >= min);
  return seconds === undefined ? undefined : Math.round(seconds * 1000);
}

/** A duration such as `45m`, `6h`, `1h30m`, `90s` or `90` (seconds), in ms (`--max-duration`). */
export function durationFlag(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const text = raw.trim().toLowerCase();
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)?/g)];
  const total = parts.reduce((ms, [, n, u]) => ms + Number(n) * unit[u ?? 's']!, 0);
  if (text === '' || parts.map((p) => p[0]).join('') !== text || !(total > 0)) {
    throw new OptionError(`--${name}`, 'a duration such as 45m, 6h, 1h30m or 90s', raw);
  }
  return Math.round(total);
}
