import { readFileSync } from 'node:fs';
import type { CommandDeps } from './commands/common.js';
import { planCommand } from './commands/plan.js';
import { reportCommand } from './commands/report.js';
import { runCommand } from './commands/run.js';
import { sandboxCommand, sandboxHelp } from './commands/sandbox.js';
import { stylesCommand } from './commands/styles.js';
import { EXIT, exitCodeFor, InterruptedError, KitchenError } from './errors.js';

const HELP = `kitchen-batch: run a manifest of kitchen photos through the kitchen-image generation service.

Usage:
  kitchen-batch run <manifest> [options]     plan, preflight, submit, poll, download, report (resumes)
  kitchen-batch plan <manifest> [options]    everything up to submission; submits nothing
  kitchen-batch report <out-dir>             rebuild report.json/csv/html from the run's journal
  kitchen-batch styles                       print the valid style keys
  kitchen-batch sandbox [--port N] [knobs]   run the built-in service emulator in the foreground
  kitchen-batch enqueue <manifest> --redis URL [--out DIR] [--json]
                                             worker mode: queue the new items in Redis (BullMQ)
  kitchen-batch status --redis URL [--json]  worker mode: items by state, rate in use, workers connected
  kitchen-batch worker --redis URL [--concurrency N] [--until-drained] [--max-rate R]
                                             worker mode: work on the queued items (any number of
                                             workers, one rate for the key); --stall-timeout S,
                                             --grace S, --job-timeout S, --keep-metadata, --max-side PX

Options of run (and plan where they apply):
  --out DIR               output folder (default output/<manifest name>)
  --concurrency N         jobs in flight (default 8)
  --retry-failed          resubmit items whose job failed in an earlier run
  --retry-ambiguous       resend submissions whose outcome is unknown (possible duplicate charge)
  --job-timeout SECONDS   a job not ended by then is incomplete/job_timeout (default 1800)
  --max-submissions N     submit at most N new jobs in this run (cost guard)
  --shard K/N             run only part K of N (1-based) of the items
  --keep-metadata         send images the service takes as they are: EXIF/GPS, orientation tag
                          and colour profile kept (default: upright 8-bit sRGB, no metadata)
  --strip-metadata        (the default now; accepted for old scripts)
  --max-side PX           longest side of an uploaded image (default 4096)
  --verify                hash every finished result on resume (default: size and mtime)
  --log-level LEVEL       run.log level: fatal|error|warn|info|debug|trace|silent (default info)
  --no-progress           no progress display on stderr
  --json                  print the final summary as one JSON object on stdout
  --sandbox               start the built-in emulator and use it (no key or URL needed)
  --base-url URL          service root (or KITCHEN_API_BASE_URL)
  --api-key-file FILE     read the API key from FILE (or KITCHEN_API_KEY)

Exit codes: 0 all succeeded, 1 some failed/rejected/incomplete, 2 usage/manifest/state error,
3 service refused (401/403) or unreachable, 130 interrupted (a rerun resumes).
`;

const COMMANDS: Record<string, (args: string[], deps: CommandDeps) => Promise<number>> = {
  run: runCommand,
  plan: planCommand,
  report: reportCommand,
  styles: stylesCommand,
  sandbox: sandboxCommand,
  // The worker-mode commands load BullMQ and ioredis only when used (about 20 MB a run would carry).
  enqueue: async (args, deps) => (await import('./commands/enqueue.js')).enqueueCommand(args, deps),
  status: async (args, deps) => (await import('./commands/status.js')).statusCommand(args, deps),
  worker: async (args, deps) => (await import('./commands/worker.js')).workerCommand(args, deps),
};

/** Runs the CLI; the one place errors become exit codes. */
export async function main(argv: string[], deps: CommandDeps): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    deps.stdout.write(HELP);
    if (command === undefined) return EXIT.usage;
    return EXIT.ok;
  }
  if (command === '--version' || command === '-v') {
    deps.stdout.write(`${version()}\n`);
    return EXIT.ok;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    deps.stderr.write(`kitchen-batch: unknown command "${command}"\n\n${HELP}`);
    return EXIT.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    deps.stdout.write(
      command === 'sandbox' ? `Usage: kitchen-batch sandbox [options]\n${sandboxHelp()}\n` : HELP,
    );
    return EXIT.ok;
  }
  try {
    return await handler(rest, deps);
  } catch (error) {
    const parseError = isParseArgsError(error);
    const code = parseError ? EXIT.usage : exitCodeFor(error);
    let message: string;
    if (error instanceof InterruptedError) {
      message = 'interrupted; state is saved, rerun the same command to resume';
    } else if (error instanceof KitchenError) {
      message = error.message;
    } else if (parseError) {
      message = `${(error as Error).message}\n(see kitchen-batch --help)`;
    } else {
      message = `unexpected error: ${(error as Error)?.stack ?? String(error)}`;
    }
    deps.stderr.write(`kitchen-batch: ${message}\n`);
    // Scripts that asked for JSON get JSON on stdout whatever happened.
    if (rest.includes('--json')) {
      const errorCode = error instanceof KitchenError ? error.code : parseError ? 'usage' : 'internal';
      deps.stdout.write(
        `${JSON.stringify({ exit_code: code, error: { code: errorCode, message: message.split('\n')[0] } })}\n`,
      );
    }
    return code;
  }
}

function isParseArgsError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
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
