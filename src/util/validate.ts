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
