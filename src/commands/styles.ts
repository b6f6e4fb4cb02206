import { UsageError } from '../errors.js';
import { type CommandDeps, fetchStyles, serviceTarget } from './common.js';
import { parseFlags } from './parse.js';

/** `kitchen-batch styles`: prints the valid style keys from `GET /v1/styles`. */
export async function stylesCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('styles', args);
  if (positionals.length > 0) throw new UsageError('usage: kitchen-batch styles [--json]');
  const service = (await serviceTarget(values, deps, true))!;
  const styles = await fetchStyles(service);
  if (!styles) {
    deps.stderr.write('the service answered GET /v1/styles in a shape this tool does not understand\n');
    return 1;
  }
  if (values.json) deps.stdout.write(`${JSON.stringify(styles)}\n`);
  else for (const s of styles) deps.stdout.write(`${s.key}${s.name ? `\t${s.name}` : ''}\n`);
  return 0;
}
