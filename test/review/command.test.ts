/**
 * `kitchen-batch review <out-dir>` (issue 15): reviews a finished run's results again, for a run
 * made without the review and with another threshold, journals the verdicts and rebuilds the
 * reports; it refuses a folder that is not a run and a threshold out of range.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import type { Report } from '../../src/types.js';
import { closeWorkspaces, workspace } from '../helpers/batch.js';
import { EXPECTED_FLAG } from '../support/bad-result-flags.js';

afterEach(closeWorkspaces);

/** Runs the CLI in-process; returns its exit code and what it wrote. */
async function cli(args: string[], cwd: string) {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: {},
    cwd,
  });
  return { code, stdout, stderr };
}

/** The `reviewed` records of a run folder's journal. */
async function reviewedRecords(out: string): Promise<Array<{ id: string; flags: string[] }>> {
  const lines = (await readFile(path.join(out, 'journal.jsonl'), 'utf8')).trim().split('\n');
  return lines.map((line) => JSON.parse(line)).filter((r) => r.t === 'reviewed');
}

describe('kitchen-batch review', () => {
  it('reviews a run made with --no-review, then again with another threshold, and rebuilds the reports', async () => {
    const ws = await workspace({ items: 12, look: 'mosaic', sandbox: { seed: 4 } });
    ws.sandbox.setFaults({ badResultRate: 0.5, badResults: ['rotated', 'blank', 'unchanged'] });
    const first = await ws.run({ review: { enabled: false } });
    expect(first.exitCode).toBe(0);
    expect((await ws.report()).items.every((i) => i.review === null)).toBe(true);
    expect(await reviewedRecords(ws.out)).toHaveLength(0);

    const reviewed = await cli(['review', 'out', '--json'], ws.dir);
    expect(reviewed.stderr).toBe('');
    expect(reviewed.code).toBe(0);
    const summary = JSON.parse(reviewed.stdout) as { out_dir: string; totals: Report['run']['totals'] };
    const report = await ws.report();
    const bad = ws.sandbox.stats.badResults;
    expect(bad.size).toBeGreaterThan(0);
    for (const item of report.items) {
      expect(item.review, item.id).not.toBeNull();
      const kind = bad.get(item.job_id!);
      if (kind) expect(item.review!.flags, item.id).toContain(EXPECTED_FLAG[kind]);
      else expect(item.review!.flags, item.id).toEqual([]);
    }
    expect(summary.totals.needs_review).toBe(bad.size);
    expect(report.run.totals.needs_review).toBe(bad.size);
    expect(await reviewedRecords(ws.out)).toHaveLength(12);
    const csv = await readFile(path.join(ws.out, 'report.csv'), 'utf8');
    expect(csv).toMatch(/,(rotated|blank|unchanged),0\r\n/);

    // Threshold 0 flags nothing (no signal is under 0); the journal keeps the newest verdicts.
    const lenient = await cli(['review', 'out', '--review-threshold', '0'], ws.dir);
    expect(lenient.code).toBe(0);
    expect(lenient.stderr).toMatch(/^reviewed 12 results: 0 worth a look\n/);
    expect((await ws.report()).run.totals.needs_review).toBe(0);
    expect(await reviewedRecords(ws.out)).toHaveLength(24);

    // A later run (review on, the default) leaves reviewed results alone.
    const rerun = await ws.run();
    expect(rerun.run.totals.needs_review).toBe(0);
    expect(await reviewedRecords(ws.out)).toHaveLength(24);
  }, 120_000);

  it('a source that cannot be read leaves its item unreviewed, says so, and the others are reviewed', async () => {
    const ws = await workspace({ items: 4 });
    await ws.run({ review: { enabled: false } });
    await rm(path.join(ws.dir, 'images', 'k2.jpg'));
    const reviewed = await cli(['review', 'out'], ws.dir);
    expect(reviewed.code).toBe(0);
    expect(reviewed.stderr).toBe(
      'reviewed 3 results: 0 worth a look, 1 could not be reviewed (see run.log)\n',
    );
    const report = await ws.report();
    expect(report.items.map((i) => [i.id, i.review === null])).toEqual([
      ['k0__scandinavian', false],
      ['k1__industrial', false],
      ['k2__japandi', true],
      ['k3__modern', false],
    ]);
    const log = await readFile(path.join(ws.out, 'run.log'), 'utf8');
    expect(log).toMatch(/"event":"review_skipped","item":"k2__japandi"/);
  });

  it('refuses a folder that is not a run, and a threshold out of range (exit 2)', async () => {
    const ws = await workspace({ items: 1 });
    const missing = await cli(['review', 'nowhere'], ws.dir);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/nowhere has no journal\.jsonl/);
    await ws.run();
    for (const value of ['1.5', '-0.1', 'abc', '']) {
      const bad = await cli(['review', 'out', `--review-threshold=${value}`], ws.dir);
      expect(bad.code, value).toBe(2);
      expect(bad.stderr, value).toMatch(/--review-threshold must be a number from 0 to 1/);
    }
    // A bad log level is refused before the folder is locked: the next review takes over nothing.
    const level = await cli(['review', 'out', '--log-level', 'loud'], ws.dir);
    expect(level.code).toBe(2);
    expect(level.stderr).toMatch(/--log-level: expected one of fatal, error/);
    const after = await cli(['review', 'out'], ws.dir);
    expect(after.code).toBe(0);
    expect(after.stderr).toBe('reviewed 1 result: 0 worth a look\n');
    const usage = await cli(['review'], ws.dir);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/usage: kitchen-batch review <out-dir>/);
  });
});
