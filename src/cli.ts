import { readFileSync } from 'node:fs';
import type { CommandDeps } from './commands/common.js';
import { commandHelp, commandSuggestion, globalHelp } from './commands/help.js';
import { EXIT, exitCodeFor, InterruptedError, KitchenError } from './errors.js';
import { redactUrlsInText } from './util/redact-url.js';

/**
 * Each command's code is loaded when it runs, so `--version`, `--help` and a usage error load none
 * of it, and the worker-mode commands' BullMQ and ioredis are never loaded by a run.
 */
const COMMANDS: Record<string, (args: string[], deps: CommandDeps) => Promise<number>> = {
  run: async (args, deps) => (await import('./commands/run.js')).runCommand(args, deps),
  plan: async (args, deps) => (await import('./commands/plan.js')).planCommand(args, deps),
  report: async (args, deps) => (await import('./commands/report.js')).reportCommand(args, deps),
  review: async (args, deps) => (await import('./commands/review.js')).reviewCommand(args, deps),
  styles: async (args, deps) => (await import('./commands/styles.js')).stylesCommand(args, deps),
  sandbox: async (args, deps) => (await import('./commands/sandbox.js')).sandboxCommand(args, deps),
  enqueue: async (args, deps) => (await import('./commands/enqueue.js')).enqueueCommand(args, deps),
  status: async (args, deps) => (await import('./commands/status.js')).statusCommand(args, deps),
  worker: async (args, deps) => (await import('./commands/worker.js')).workerCommand(args, deps),
};

/**
 * The line printed on stderr at the first SIGINT/SIGTERM, in the words of the command it stops: the
 * sandbox has no requests or state of its own to finish (docs/contract.md#sandbox, #interrupts).
 */
export function stopNotice(argv: readonly string[], signal: string): string {
  const what =
    argv[0] === 'sandbox'
      ? 'stopping the sandbox'
      : 'finishing in-flight requests and saving state (again to quit at once)';
  return `\nkitchen-batch: ${signal}: ${what}\n`;
}

/** Runs the CLI; the one place errors become exit codes. */
export async function main(argv: string[], deps: CommandDeps): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    // Not a request for help: a script that forgot its arguments. Help goes with the error, on stderr.
    deps.stderr.write(`kitchen-batch: no command given\n\n${globalHelp()}`);
    return EXIT.usage;
  }
  if (command === '--help' || command === '-h' || (command === 'help' && rest.length === 0)) {
    deps.stdout.write(globalHelp());
    return EXIT.ok;
  }
  if (command === '--version' || command === '-V' || command === '-v') {
    deps.stdout.write(`${version()}\n`);
    return EXIT.ok;
  }
  if (command === 'help') {
    const page = commandHelp(rest[0]!);
    if (page) {
      deps.stdout.write(page);
      return EXIT.ok;
    }
    deps.stderr.write(
      `kitchen-batch: no command "${rest[0]}"${commandSuggestion(rest[0]!)}\n(see kitchen-batch --help)\n`,
    );
    return EXIT.usage;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    deps.stderr.write(
      `kitchen-batch: unknown command "${command}"${commandSuggestion(command)}\n(see kitchen-batch --help)\n`,
    );
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    deps.stdout.write(commandHelp(command)!);
    return EXIT.ok;
  }
  try {
    return await handler(rest, deps);
  } catch (error) {
    const code = exitCodeFor(error);
    let message: string;
    if (error instanceof InterruptedError) {
      message = 'interrupted; state is saved, rerun the same command to resume';
    } else if (error instanceof KitchenError) {
      message = error.message;
    } else {
      message = `unexpected error: ${(error as Error)?.stack ?? String(error)}`;
    }
    // A message may quote a source's URL (a manifest at a pre-signed URL): its signature never shows.
    message = redactUrlsInText(message);
    deps.stderr.write(`kitchen-batch: ${message}\n`);
    // Scripts that asked for JSON get JSON on stdout whatever happened.
    if (rest.includes('--json')) {
      const errorCode = error instanceof KitchenError ? error.code : 'internal';
      deps.stdout.write(
        `${JSON.stringify({ exit_code: code, error: { code: errorCode, message: message.split('\n')[0] } })}\n`,
      );
    }
    return code;
  }
}

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
