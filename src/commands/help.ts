/**
 * What `kitchen-batch help [command]`, `<command> --help` and the CLI's errors print: one page per
 * command (usage, what it does, its options with their value placeholders, examples), the overview,
 * and "did you mean" for a mistyped command (docs/contract.md#commands); and the README's option
 * tables. All of it is rendered from the declarations in `command-table.ts`.
 */
import { suggestStyles } from '../manifest/style-check.js';
import { type FlagTable, flagHelp, flagTerm } from '../util/flags.js';
import { COMMANDS, isCommand } from './command-table.js';

/** The commands, in the order the overview lists them. */
export const COMMAND_NAMES = Object.keys(COMMANDS);

/** The overview `kitchen-batch --help` prints. */
export function globalHelp(): string {
  const width = Math.max(...COMMAND_NAMES.map((n) => n.length));
  const lines = [
    'kitchen-batch: run a manifest of kitchen photos through the kitchen-image generation service.',
    '',
    'Usage: kitchen-batch <command> [options]',
    '',
    'Commands:',
    ...COMMAND_NAMES.map((n) => `  ${n.padEnd(width)}  ${COMMANDS[n as keyof typeof COMMANDS].brief}`),
    '',
    "Run 'kitchen-batch help <command>' (or '<command> --help') for its options and examples.",
    "Try it without a key: 'kitchen-batch run manifests/sample.csv --sandbox'.",
    '',
    'Environment: KITCHEN_API_KEY, KITCHEN_API_BASE_URL, KITCHEN_REDIS_URL and KITCHEN_QUEUE (worker mode).',
    'Exit codes: 0 all succeeded, 1 some failed/rejected/incomplete, 2 usage/manifest/state error,',
    '3 service refused (401/403) or unreachable, 130 interrupted (a rerun resumes).',
    '-V, --version prints the version.',
    '',
  ];
  return lines.join('\n');
}

/** One command's page, or null for a command that does not exist. */
export function commandHelp(command: string): string | null {
  if (!isCommand(command)) return null;
  const page = COMMANDS[command];
  return [
    `Usage: ${page.usage}`,
    '',
    wrap(page.summary, 0, ''),
    '',
    'Options:',
    optionLines(page.flags),
    '',
    'Examples:',
    ...page.examples.map((e) => `  ${e}`),
    '',
  ].join('\n');
}

/** A command's options as its help page lists them: flag and placeholder, then the help wrapped. */
export function optionLines(flags: FlagTable): string {
  const rows = Object.entries(flags).map(([name, spec]) => [flagTerm(name, spec), flagHelp(spec)] as const);
  const width = Math.max(0, ...rows.map(([label]) => label.length));
  return rows.map(([label, text]) => wrap(text, 4 + width, `  ${label.padEnd(width)}  `)).join('\n');
}

/**
 * A command's options as a Markdown table (option, meaning, default): what the README shows between
 * `<!-- options:<command> -->` and `<!-- /options:<command> -->`, written by `npm run docs:options`.
 */
export function optionTable(command: string): string {
  if (!isCommand(command)) throw new Error(`no command ${command}`);
  // `|` would end the cell and `<name>` would be read as an HTML tag.
  const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('<', '\\<');
  const rows = Object.entries(COMMANDS[command].flags).map(([name, spec]) => {
    const label = flagTerm(name, spec)
      .split(', ')
      .map((part) => `\`${part}\``)
      .join(', ');
    const fallback = spec.shown ?? (spec.type === 'boolean' ? 'off' : '');
    return `| ${label} | ${cell(spec.help)} | ${cell(fallback)} |`;
  });
  return ['| option | meaning | default |', '| --- | --- | --- |', ...rows].join('\n');
}

/** `did you mean "run"?` for a mistyped command, or ''. */
export function commandSuggestion(typed: string): string {
  const [best] = suggestStyles(typed, COMMAND_NAMES, 1);
  return best ? `; did you mean "${best}"?` : '';
}

/** `text` after `lead`, wrapped at 80 columns, continuation lines indented by `indent`. */
function wrap(text: string, indent: number, lead: string): string {
  const lines: string[] = [];
  let line = lead;
  for (const word of text.split(' ')) {
    if (line.trim() !== '' && line.length + 1 + word.length > 80 && line.length > indent) {
      lines.push(line);
      line = ' '.repeat(indent);
    }
    line += line.length === 0 || line.endsWith(' ') ? word : ` ${word}`;
  }
  lines.push(line);
  return lines.join('\n');
}

/**
 * `readme` with every table between `<!-- options:<command> -->` and `<!-- /options:<command> -->`
 * written anew from the command's flags ({@link optionTable}); the text elsewhere as it was.
 */
export function withOptionTables(readme: string): string {
  return readme.replace(
    /(<!-- options:([a-z]+) -->\n)[\s\S]*?(\n<!-- \/options:\2 -->)/g,
    (_, open: string, command: string, close: string) => `${open}${optionTable(command)}${close}`,
  );
}
