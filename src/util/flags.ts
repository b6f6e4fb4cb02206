/**
 * How a command's flags are declared, once: each with its type, value placeholder, help line and the
 * default it shows. A declaration is also a valid `node:util` `parseArgs` options object (the extra
 * fields are ignored there), so the same table parses the command line, prints `help <command>`,
 * suggests the closest flag for a typo and writes the README's option tables.
 */
import { parseArgs } from 'node:util';

/** One flag. `string` flags take a value, shown by its placeholder; `boolean` flags are switches. */
export type FlagSpec =
  | {
      readonly type: 'string';
      /** The value's placeholder in help and the README (`N`, `DIR`, `SECONDS`). */
      readonly value: string;
      readonly help: string;
      /** The default as a person reads it (`8`, `info`); shown as `(default …)` and in the README. */
      readonly shown?: string;
      readonly short?: string;
      /** The run option it sets, by path (`limits.concurrency`): messages about it name the flag. */
      readonly sets?: string;
      /** Repeatable: every value given, in order (`--metrics-label a=1 --metrics-label b=2`). */
      readonly multiple?: true;
    }
  | {
      readonly type: 'boolean';
      readonly help: string;
      /** What the switch's absence means, when not simply "off" (`on` for a switch kept for old scripts). */
      readonly shown?: string;
      readonly short?: string;
      readonly sets?: string;
    };

/** A command's flags by name (without the leading `--`). */
export type FlagTable = Readonly<Record<string, FlagSpec>>;

/** What a parse gives for `table`: the value of each string flag, `true` for each switch given. */
export type FlagValues<T extends FlagTable> = {
  -readonly [K in keyof T]?: T[K] extends { readonly type: 'string'; readonly multiple: true }
    ? string[]
    : T[K] extends { readonly type: 'string' }
      ? string
      : boolean;
};

/** A command line read against a table: the flags' values and the other words in order. */
export interface ParsedFlags<T extends FlagTable> {
  values: FlagValues<T>;
  positionals: string[];
}

/** Why a command line does not fit its table; the caller words it (with a suggestion). */
export type FlagProblem =
  | { kind: 'unknown'; typed: string }
  | { kind: 'needs-value'; typed: string; dashed?: string }
  | { kind: 'takes-no-value'; typed: string };

/** `--out DIR`, `-v, --verbose`: a flag as help pages and the README name it. */
export function flagTerm(name: string, spec: FlagSpec): string {
  const long = `${spec.short ? `-${spec.short}, ` : ''}--${name}`;
  return spec.type === 'string' ? `${long} ${spec.value}` : long;
}

/**
 * The help line of a flag: what it does, then the default of a flag that takes a value. A switch's
 * `shown` is for the README's default column only: its help says what it does when given.
 */
export function flagHelp(spec: FlagSpec): string {
  return spec.type === 'boolean' || spec.shown === undefined
    ? spec.help
    : `${spec.help} (default ${spec.shown})`;
}

/**
 * Reads `args` against `table`. The words are split by `parseArgs` (which knows `--flag=value`,
 * grouped short flags and `--`), then checked here, so a refusal comes with the flag as typed and
 * no message of Node's has to be reworded. A value that starts with `-` is taken only as
 * `--flag=-value` (as `parseArgs` in strict mode): `--out --json` is a missing value, not a folder.
 * @throws {FlagRefusal} at the first word that does not fit.
 */
export function readFlags<T extends FlagTable>(table: T, args: readonly string[]): ParsedFlags<T> {
  const { tokens } = parseArgs({
    args: [...args],
    options: table as unknown as NonNullable<Parameters<typeof parseArgs>[0]>['options'],
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const values: Record<string, string | string[] | boolean> = {};
  const positionals: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    if (token.kind !== 'option') continue;
    const spec = Object.hasOwn(table, token.name) ? table[token.name] : undefined;
    if (!spec) throw new FlagRefusal({ kind: 'unknown', typed: token.rawName });
    if (spec.type === 'boolean') {
      if (token.value !== undefined) throw new FlagRefusal({ kind: 'takes-no-value', typed: token.rawName });
      values[token.name] = true;
    } else if (token.value === undefined) {
      throw new FlagRefusal({ kind: 'needs-value', typed: token.rawName });
    } else if (!token.inlineValue && token.value.startsWith('-')) {
      throw new FlagRefusal({ kind: 'needs-value', typed: token.rawName, dashed: token.value });
    } else if ('multiple' in spec && spec.multiple) {
      values[token.name] = [...((values[token.name] as string[] | undefined) ?? []), token.value];
    } else {
      values[token.name] = token.value;
    }
  }
  return { values: values as FlagValues<T>, positionals };
}

/** A command line that does not fit its flag table; {@link FlagProblem} says how. */
export class FlagRefusal extends Error {
  readonly problem: FlagProblem;

  constructor(problem: FlagProblem) {
    super(`${problem.kind}: ${problem.typed}`);
    this.problem = problem;
  }
}
