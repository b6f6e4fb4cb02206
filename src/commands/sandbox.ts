import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { SANDBOX_FLAG_HELP, SANDBOX_FLAGS, sandboxOptionsFromFlags, startSandbox } from '../sandbox/index.js';
import type { CommandDeps } from './common.js';

/** `kitchen-batch sandbox`: the built-in emulator in the foreground until SIGINT/SIGTERM. */
export async function sandboxCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: SANDBOX_FLAGS,
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0)
    throw new UsageError(`usage: kitchen-batch sandbox [options]\n${sandboxHelp()}`);
  const options = sandboxOptionsFromFlags(values as Record<string, string | boolean | undefined>, deps.env);
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

/** Help lines of the sandbox flags. */
export function sandboxHelp(): string {
  return Object.entries(SANDBOX_FLAG_HELP)
    .map(([flag, help]) => `  --${flag.padEnd(20)} ${help}`)
    .join('\n');
}
