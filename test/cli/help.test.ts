/**
 * Help that teaches (issue 14): per-command pages with placeholders and examples, `help <command>`,
 * did-you-mean for commands and options, `-V`, and help on stderr when it comes with an error. Real
 * child processes; each page is checked against the flags its command really parses.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { COMMANDS, type CommandName } from '../../src/commands/command-table.js';
import { COMMAND_NAMES, commandHelp, withOptionTables } from '../../src/commands/help.js';
import { parseFlags } from '../../src/commands/parse.js';
import { UsageError } from '../../src/errors.js';
import { flagTerm } from '../../src/util/flags.js';
import { killAllClis, REPO_ROOT, runCli } from '../helpers/cli.js';

afterEach(killAllClis);

describe('help', () => {
  it('one declaration per command drives its parse, its help page and the README', async () => {
    for (const command of COMMAND_NAMES as CommandName[]) {
      const { flags } = COMMANDS[command];
      const page = commandHelp(command)!;
      expect(page, command).toMatch(/^Usage: kitchen-batch /);
      expect(page, command).toMatch(/\nExamples:\n {2}kitchen-batch /);
      for (const line of page.split('\n'))
        expect(line.length, `${command}: ${line}`).toBeLessThanOrEqual(100);
      // The page lists exactly the declared flags, each with its placeholder, in order.
      const options = page.slice(page.indexOf('Options:\n'), page.indexOf('\nExamples:'));
      const listed = options.split('\n').filter((line) => /^ {2}-/.test(line));
      expect(
        listed.map((line) => line.trim().split(/ {2,}/)[0]),
        command,
      ).toEqual(Object.entries(flags).map(([name, spec]) => flagTerm(name, spec)));
      // The parse takes every declared flag (with a value where it has a placeholder) and no other.
      for (const [name, spec] of Object.entries(flags)) {
        const args = spec.type === 'string' ? [`--${name}`, 'x'] : [`--${name}`];
        const { values } = parseFlags(command, args) as { values: Record<string, unknown> };
        // A repeatable flag gives every value in order.
        const expected = spec.type === 'string' ? ('multiple' in spec && spec.multiple ? ['x'] : 'x') : true;
        expect(values[name], `${command} --${name}`).toEqual(expected);
      }
      expect(() => parseFlags(command, ['--not-a-flag-of-any-command'])).toThrow(UsageError);
    }
    const readme = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('<!-- options:run -->');
    expect(
      withOptionTables(readme) === readme,
      "README.md's option tables differ from the flag declarations: run `npm run docs:options`",
    ).toBe(true);
  });

  it('prints one page per command, for help <command> and <command> --help alike', async () => {
    const run = await runCli(['run', '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Usage: kitchen-batch run <manifest> \[options\]/);
    expect(run.stdout).toMatch(/--concurrency N +jobs in flight/);
    expect(run.stdout).not.toContain('--merge');
    const report = await runCli(['help', 'report']);
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(/--merge +combine/);
    expect(report.stdout).toContain('--no-html');
    const styles = await runCli(['styles', '-h']);
    expect(styles.stdout).toMatch(/--json +print them as JSON/);
    const overview = await runCli(['--help']);
    expect(overview.code).toBe(0);
    for (const command of COMMAND_NAMES) expect(overview.stdout).toMatch(new RegExp(`\\n  ${command} +\\S`));
    const version = await runCli(['-V']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it('answers typos with the closest command or option, briefly, on stderr, exit 2', async () => {
    const command = await runCli(['rnu', 'manifests/sample.csv']);
    expect(command.code).toBe(2);
    expect(command.stdout).toBe('');
    expect(command.stderr).toBe(
      'kitchen-batch: unknown command "rnu"; did you mean "run"?\n(see kitchen-batch --help)\n',
    );
    const option = await runCli(['run', 'manifests/sample.csv', '--concurency', '4']);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain('unknown option --concurency for run; did you mean --concurrency?');
    expect(option.stderr).toContain('kitchen-batch help run');
    expect(option.stderr).not.toMatch(/positional argument/);
    const missing = await runCli(['report', '--out']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('option --out needs a value');
    // No arguments at all is a mistake: the overview goes to stderr, nothing to stdout.
    const none = await runCli([]);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/no command given[\s\S]*Commands:/);
  });
});
