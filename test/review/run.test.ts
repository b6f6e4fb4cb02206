/**
 * The review in a run (issue 15): the sandbox hands out bad results on purpose, and report.json,
 * report.csv and the totals say which results are worth a look and why; `--no-review` skips it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeWorkspaces, workspace } from '../helpers/batch.js';
import { EXPECTED_FLAG } from '../support/bad-result-flags.js';

afterEach(closeWorkspaces);

describe('review in a run', () => {
  it('flags the bad results the sandbox made on purpose, with their reason, and passes the good ones', async () => {
    // Mosaic kitchens: every seed another layout, so no two items share a result by right.
    const ws = await workspace({ items: 60, look: 'mosaic', sandbox: { seed: 15 } });
    ws.sandbox.setFaults({ badResultRate: 0.6 });
    const result = await ws.run({ review: { enabled: true } });
    expect(result.exitCode).toBe(0);
    const report = await ws.report();
    const bad = ws.sandbox.stats.badResults;
    expect(bad.size).toBeGreaterThan(20);
    const missed: string[] = [];
    const falseAlarms: string[] = [];
    for (const item of report.items) {
      expect(item.review, item.id).not.toBeNull();
      const kind = bad.get(item.job_id!);
      if (kind && !item.review!.flags.includes(EXPECTED_FLAG[kind]))
        missed.push(`${item.id} ${kind} ${JSON.stringify(item.review)}`);
      if (!kind && item.review!.flags.length > 0)
        falseAlarms.push(`${item.id} ${JSON.stringify(item.review)}`);
      if (kind) expect(item.review!.score).toBeLessThan(0.5);
    }
    // The acceptance of issue 15: at least 95 % of bad results flagged, at most 3 % of good ones.
    expect(missed.length / bad.size, missed.join('\n')).toBeLessThanOrEqual(0.05);
    expect(falseAlarms.length / (report.items.length - bad.size), falseAlarms.join('\n')).toBeLessThanOrEqual(
      0.03,
    );
    expect(report.run.totals.needs_review).toBe(
      report.items.filter((i) => i.review!.flags.length > 0).length,
    );
    const csv = await readFile(path.join(ws.out, 'report.csv'), 'utf8');
    expect(csv.split('\r\n')[0]).toMatch(/,preflight,review_score,review_flags,ambiguous_resends$/);
    const flagged = report.items.find((i) => i.review!.flags.length > 0)!;
    expect(csv).toContain(`,${flagged.review!.score},${flagged.review!.flags.join('; ')},0\r\n`);
    // The sources were as-is uploads: the review took their renditions from the preflight's check.
    const log = (await readFile(path.join(ws.out, 'run.log'), 'utf8')).split('\n');
    const end = JSON.parse(log.find((line) => line.includes('"event":"review_end"'))!);
    expect(end).toMatchObject({ reviewed: 60, sources_decoded: 0 });
    // A rerun does not review again what was reviewed.
    const again = await ws.run({ review: { enabled: true } });
    expect(again.run.totals.needs_review).toBe(report.run.totals.needs_review);
  }, 120_000);

  it('with --no-review, review is null and needs_review 0', async () => {
    const ws = await workspace({ items: 4 });
    ws.sandbox.setFaults({ badResultRate: 1, badResults: ['blank'] });
    await ws.run({ review: { enabled: false } });
    const report = await ws.report();
    expect(report.run.totals.needs_review).toBe(0);
    for (const item of report.items) expect(item.review).toBeNull();
  });
});
