/**
 * The live line in a real terminal (issue 14): a run in tmux at 80 columns leaves one progress row
 * behind, not a wrapped remnant per redraw; `TERM=dumb` gets plain lines without escape codes.
 */
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { cliCommand, killAllClis, REPO_ROOT, runCli, waitFor } from '../helpers/cli.js';
import { useTempDir } from '../helpers/tmp.js';

const HAS_TMUX = (() => {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn('tmux is not installed: the live-line terminal test is skipped (apt-get install tmux)');
    return false;
  }
})();

const tmp = useTempDir('kb-term-');
const socket = `kb-test-${process.pid}`;
afterEach(async () => {
  await killAllClis();
  try {
    execFileSync('tmux', ['-L', socket, 'kill-server'], { stdio: 'ignore' });
  } catch {}
});

const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

describe('the live line in a terminal', () => {
  it.skipIf(!HAS_TMUX)(
    'fits 80 columns: one progress row at the end, no wrapped leftovers',
    async () => {
      const { command, args } = cliCommand();
      const line = [command, ...args, 'run', 'manifests/sample.csv', '--sandbox', '--out', tmp.file('out')]
        .map(quote)
        .join(' ');
      execFileSync('tmux', [
        ...['-L', socket, 'new-session', '-d', '-x', '80', '-y', '40', '-c', REPO_ROOT],
        `env -u NO_COLOR TERM=xterm ${line}; echo KB-EXIT=$?; sleep 60`,
      ]);
      const pane = await waitFor(
        () => {
          const text = execFileSync('tmux', ['-L', socket, 'capture-pane', '-p', '-J'], { encoding: 'utf8' });
          return text.includes('KB-EXIT=') ? text : null;
        },
        { timeoutMs: 40_000, intervalMs: 200, what: 'the run in tmux to end' },
      );
      expect(pane).toContain('KB-EXIT=0');
      const rows = execFileSync('tmux', ['-L', socket, 'capture-pane', '-p'], { encoding: 'utf8' }).split(
        '\n',
      );
      const progress = rows.filter((row) => /\d+\/9 ok /.test(row) || /\/min/.test(row));
      expect(progress, rows.join('\n')).toHaveLength(1);
      for (const row of rows) expect(row.length).toBeLessThanOrEqual(80);
      expect(rows.join('\n')).toMatch(/9 items: 9 succeeded/);
    },
    60_000,
  );

  it('TERM=dumb gets plain lines, no escape codes', async () => {
    const result = await runCli(['run', 'manifests/sample.csv', '--sandbox', '--out', tmp.file('dumb')], {
      env: { TERM: 'dumb' },
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('\u001b[');
    // A rerun has nothing left: it says so instead of a bare "9 succeeded (0.0 s)".
    const again = await runCli(['run', 'manifests/sample.csv', '--sandbox', '--out', tmp.file('dumb')]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/9 were done by an earlier run; nothing submitted now/);
  }, 60_000);
});
