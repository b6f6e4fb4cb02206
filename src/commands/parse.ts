/**
 * Reads a command's arguments against its declared flags (`command-table.ts`) and words a refusal
 * the way docs/contract.md#help-and-version says: the flag as typed, the closest one the command
 * takes (or where an option of another command belongs), and where the command's options are listed.
 */
import { runFlagOptions } from '../config.js';
import { UsageError } from '../errors.js';
import { suggestStyles } from '../manifest/style-check.js';
import { type FlagProblem, FlagRefusal, type ParsedFlags, readFlags } from '../util/flags.js';
import { COMMANDS, type CommandName } from './command-table.js';
import type { CommandDeps } from './common.js';

/** Options a user reaches for on one command that another command takes, and where they go. */
const ELSEWHERE: Readonly<Partial<Record<CommandName, Readonly<Record<string, string>>>>> = {
  worker: {
    '--retry-failed':
      'in worker mode the failed items are put back in the queue by `kitchen-batch enqueue <manifest> --retry-failed`, and the workers submit them again',
  },
};

/**
 * `command`'s arguments: its flags' values (typed by its table) and the other words.
 * @throws {UsageError} (exit 2) for a flag the command does not take, or one missing its value.
 */
export function parseFlags<C extends CommandName>(
  command: C,
  args: readonly string[],
): ParsedFlags<(typeof COMMANDS)[C]['flags']> {
  try {
    return readFlags(COMMANDS[command].flags, args);
  } catch (error) {
    if (error instanceof FlagRefusal) throw new UsageError(refusal(command, error.problem));
    throw error;
  }
}

/** A refused command line in words; the second line points to the command's help page. */
function refusal(command: CommandName, problem: FlagProblem): string {
  const pointer = `(kitchen-batch help ${command} lists its options)`;
  const { typed } = problem;
  switch (problem.kind) {
    case 'unknown': {
      const elsewhere = ELSEWHERE[command]?.[typed];
      if (elsewhere) return `unknown option ${typed} for ${command}: ${elsewhere}\n${pointer}`;
      const [best] = suggestStyles(typed.replace(/^-+/, ''), Object.keys(COMMANDS[command].flags), 1);
      return `unknown option ${typed} for ${command}${best ? `; did you mean --${best}?` : ''}\n${pointer}`;
    }
    case 'needs-value':
      return problem.dashed === undefined
        ? `option ${typed} needs a value\n${pointer}`
        : `option ${typed} needs a value (one that starts with "-" is written ${typed}=${problem.dashed})\n${pointer}`;
    case 'takes-no-value':
      return `option ${typed} takes no value\n${pointer}`;
  }
}

/**
 * Parses `run`'s (and `plan`'s) arguments: one manifest and the run flags mapped onto run options.
 * Both commands check them with `resolvePlanOptions` (exit 2 naming the flag) before any file or
 * network is touched, so a `run` command line turned into `plan` fails the same way.
 */
export function parseRunArgs<C extends 'run' | 'plan'>(args: string[], command: C, deps: CommandDeps) {
  const { values, positionals } = parseFlags(command, args);
  const manifest = positionals[0];
  if (!manifest || positionals.length > 1) {
    throw new UsageError(`usage: kitchen-batch ${command} <manifest> [options]`);
  }
  return { input: runFlagOptions(manifest, deps.cwd, values, deps.env), values };
}
