import { once } from 'node:events';
import { UsageError } from '../errors.js';
import { sandboxOptionsFromFlags, startSandbox } from '../sandbox/index.js';
import { COMMANDS } from './command-table.js';
import type { CommandDeps } from './common.js';
import { optionLines } from './help.js';
import { parseFlags } from './parse.js';

/** `kitchen-batch sandbox`: the built-in emulator in the foreground until SIGINT/SIGTERM. */
export async function sandboxCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('sandbox', args);
  if (positionals.length > 0)
    throw new UsageError(`usage: kitchen-batch sandbox [options]\n${optionLines(COMMANDS.sandbox.flags)}`);
  const options = sandboxOptionsFromFlags(values, deps.env);
  const apiKey = deps.env.KITCHEN_API_KEY?.trim();
  const sandbox = await startSandbox(options);
  deps.stdout.write(`${sandbox.url}\n`);
  deps.stderr.write(
    `sandbox listening on ${sandbox.url} (${sandbox.apiKey === null ? 'any Bearer key' : apiKey ? 'key from KITCHEN_API_KEY' : `key "${sandbox.apiKey}"`}); Ctrl-C stops it\n`,
  );
  if (deps.signal && !deps.signal.aborted) await once(deps.signal, 'abort');
  await sandbox.close();
  return 0;
}
