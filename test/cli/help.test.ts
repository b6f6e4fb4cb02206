/**
 * Help that teaches (issue 14): per-command pages with placeholders and examples, `help <command>`,
 * did-you-mean for commands and options, `-V`, and help on stderr when it comes with an error. Real
 * child processes; each page is checked against the flags its command really parses.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ENQUEUE_FLAGS } from '../../src/commands/enqueue.js';
import { COMMAND_NAMES, commandHelp, optionNames } from '../../src/commands/help.js';
import { REPORT_FLAGS } from '../../src/commands/report.js';
import { REVIEW_FLAGS } from '../../src/commands/review.js';
import { RUN_FLAGS } from '../../src/commands/run.js';
import { STATUS_FLAGS } from '../../src/commands/status.js';
import { STYLES_FLAGS } from '../../src/commands/styles.js';
import { WORKER_FLAGS } from '../../src/commands/worker.js';
import { SANDBOX_FLAGS } from '../../src/sandbox/index.js';
import { killAllClis, runCli } from '../helpers/cli.js';

afterEach(killAllClis);

describe('help', () => {
  it('lists on every page exactly the options its command parses', () => {
    const parsed: Record<string, object> = {
      run: RUN_FLAGS,
      plan: RUN_FLAGS,
      report: REPORT_FLAGS,
      review: REVIEW_FLAGS,
      styles: STYLES_FLAGS,
      enqueue: ENQUEUE_FLAGS,
      status: STATUS_FLAGS,
      worker: WORKER_FLAGS,
    };
    for (const command of COMMAND_NAMES) {
      const page = commandHelp(command)!;
      expect(page, command).toMatch(/^Usage: kitchen-batch /);
      expect(page, command).toMatch(/\nExamples:\n {2}kitchen-batch /);
      if (command === 'sandbox') {
        for (const flag of Object.keys(SANDBOX_FLAGS)) expect(page).toContain(`--${flag}`);
        continue;
      }
      const flags = Object.keys(parsed[command]!)
        .map((f) => `--${f}`)
        .sort();
      expect(optionNames(command).sort(), command).toEqual(flags);
      for (const line of page.split('\n'))
        expect(line.length, `${command}: ${line}`).toBeLessThanOrEqual(100);
    }
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
