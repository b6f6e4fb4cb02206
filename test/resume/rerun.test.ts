/**
 * Reruns of a finished or partly finished run folder (docs/faults.md A.4, A.5; docs/contract.md#rules): what is sent
 * again, what is fetched again, and what is left alone. Real CLI children against the sandbox.
 */
import { appendFile, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/index.js';
import { waitFor } from '../helpers/cli.js';
import { createRequests, jobRequests } from '../helpers/sandbox.js';
import { kitchenJpeg } from '../support/images.js';
import {
  createsPerItem,
  expectSecretAbsent,
  type Fixture,
  fileSha,
  perTest,
  readJournalRecords,
  readReport,
  run,
  startRun,
  writeManifest,
} from './world.js';

const { setup } = perTest({ processingMs: 200, jitterMs: 100 });

/** Runs to the end and expects every item succeeded. */
async function runOk(fixture: Fixture, sandbox: Sandbox, out: string, extra: string[] = []): Promise<void> {
  const result = await run(fixture, sandbox, out, extra);
  expect(result.code, `stdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(0);
  await expectSecretAbsent(fixture.apiKey, out, [result.stdout, result.stderr]);
}

function sum(map: Map<string, number>): number {
  return [...map.values()].reduce((a, b) => a + b, 0);
}

describe('rerun of a finished run', () => {
  it('sends no job request and exits 0', async () => {
    const { fixture, sandbox, out } = await setup(3);
    await runOk(fixture, sandbox, out);
    const since = sandbox.stats.requests.length;
    const storage = sandbox.stats.storageRequests.length;
    await runOk(fixture, sandbox, out);
    expect(jobRequests(sandbox, since)).toBe(0);
    expect(sandbox.stats.storageRequests.length).toBe(storage);
    const report = await readReport(out);
    expect(report.run.totals.succeeded).toBe(3);
    expect(report.items.every((i) => i.submissions === 1)).toBe(true);
  });

  it('resubmits only the item whose source image changed', async () => {
    const { fixture, sandbox, out } = await setup(3);
    await runOk(fixture, sandbox, out);
    const changed = fixture.items[1]!;
    await writeFile(changed.image, await kitchenJpeg(101));
    const beforeCreates = await createsPerItem(fixture, sandbox); // keyed by the new bytes: 0
    expect(beforeCreates.get(changed.id)).toBe(0);
    const since = sandbox.stats.requests.length;
    await runOk(fixture, sandbox, out);
    expect(createRequests(sandbox, since)).toBe(1);
    const after = await createsPerItem(fixture, sandbox);
    expect(after.get(changed.id)).toBe(1);
    const report = await readReport(out);
    const row = report.items.find((i) => i.id === changed.id)!;
    // A new item, not a duplicate: the old job was for other bytes.
    expect(row.submissions).toBe(1);
    expect(report.run.totals.possible_duplicates).toBe(0);
    expect(await fileSha(path.join(out, row.output!))).toBe(row.sha256);
  });

  it('treats an item whose style changed as new, and leaves the others alone', async () => {
    const { fixture, sandbox, out } = await setup(3);
    await runOk(fixture, sandbox, out);
    fixture.items[2]!.style = 'minimalist';
    fixture.items[2]!.id = 'k2__minimalist';
    await writeManifest(fixture);
    const since = sandbox.stats.requests.length;
    await runOk(fixture, sandbox, out);
    expect(createRequests(sandbox, since)).toBe(1);
    const creates = await createsPerItem(fixture, sandbox);
    expect([...creates.values()]).toEqual([1, 1, 1]);
    const report = await readReport(out);
    expect(report.items.map((i) => i.id).sort()).toEqual(fixture.items.map((i) => i.id).sort());
    expect(report.run.totals.succeeded).toBe(3);
  });

  it('treats an edited row with the same id (new prompt) as new', async () => {
    const { fixture, sandbox, out } = await setup(2);
    await runOk(fixture, sandbox, out);
    const text = await readFile(fixture.manifest, 'utf8');
    const lines = text.trim().split('\n');
    const edited = [`${lines[0]},prompt`, `${lines[1]},`, `${lines[2]},warmer light please`];
    await writeFile(fixture.manifest, `${edited.join('\n')}\n`);
    const since = sandbox.stats.requests.length;
    await runOk(fixture, sandbox, out);
    expect(createRequests(sandbox, since)).toBe(1);
    const creates = await createsPerItem(fixture, sandbox);
    expect(creates.get(fixture.items[1]!.id)).toBe(2); // same bytes and style, new prompt
    expect(creates.get(fixture.items[0]!.id)).toBe(1);
    const report = await readReport(out);
    expect(report.run.totals.succeeded).toBe(2);
  });

  it('re-fetches a deleted result without a new POST', async () => {
    const { fixture, sandbox, out } = await setup(3);
    await runOk(fixture, sandbox, out);
    const first = await readReport(out);
    const victim = first.items[0]!;
    const { rm } = await import('node:fs/promises');
    await rm(path.join(out, victim.output!));
    const creates = sum(await createsPerItem(fixture, sandbox));
    const storage = sandbox.stats.storageRequests.length;
    await runOk(fixture, sandbox, out);
    expect(sum(await createsPerItem(fixture, sandbox))).toBe(creates);
    const fetched = sandbox.stats.storageRequests.slice(storage);
    expect(fetched.map((r) => r.path.includes(victim.job_id!))).toEqual([true]);
    const report = await readReport(out);
    const row = report.items.find((i) => i.id === victim.id)!;
    expect(row.job_id).toBe(victim.job_id);
    expect(await fileSha(path.join(out, row.output!))).toBe(victim.sha256);
    expect(row.submissions).toBe(1);
  });

  it('re-fetches a result altered in place (same size) when --verify is given', async () => {
    const { fixture, sandbox, out } = await setup(2);
    await runOk(fixture, sandbox, out);
    const victim = (await readReport(out)).items[1]!;
    const file = path.join(out, victim.output!);
    const bytes = await readFile(file);
    const st = await stat(file);
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1]! + 1) & 0xff;
    await writeFile(file, bytes);
    await utimes(file, st.atime, st.mtime); // same size, same mtime: only a hash can tell
    const since = sandbox.stats.requests.length;
    const storage = sandbox.stats.storageRequests.length;
    await runOk(fixture, sandbox, out, ['--verify']);
    expect(createRequests(sandbox, since)).toBe(0);
    expect(sandbox.stats.storageRequests.slice(storage).length).toBe(1);
    expect(await fileSha(file)).toBe(victim.sha256);
  });

  it('re-fetches a result whose size changed, without --verify', async () => {
    const { fixture, sandbox, out } = await setup(2);
    await runOk(fixture, sandbox, out);
    const victim = (await readReport(out)).items[0]!;
    const file = path.join(out, victim.output!);
    await writeFile(file, (await readFile(file)).subarray(0, 100));
    const since = sandbox.stats.requests.length;
    const storage = sandbox.stats.storageRequests.length;
    await runOk(fixture, sandbox, out);
    expect(createRequests(sandbox, since)).toBe(0);
    expect(sandbox.stats.storageRequests.slice(storage).length).toBe(1);
    expect(await fileSha(file)).toBe(victim.sha256);
  });
});

describe('failed jobs', () => {
  it('stay failed on rerun (exit 1, no POST); --retry-failed resubmits them', async () => {
    const { fixture, sandbox, out } = await setup(2, { faults: { failRate: 1, failCode: 'no_kitchen' } });
    const first = await run(fixture, sandbox, out);
    expect(first.code, first.stderr).toBe(1);
    let report = await readReport(out);
    expect(report.run.totals.failed).toBe(2);
    expect(report.items.map((i) => i.error?.code)).toEqual(['no_kitchen', 'no_kitchen']);
    sandbox.setFaults({ failRate: 0 });

    let since = sandbox.stats.requests.length;
    const again = await run(fixture, sandbox, out);
    expect(again.code, again.stderr).toBe(1);
    expect(createRequests(sandbox, since)).toBe(0);
    expect(jobRequests(sandbox, since)).toBe(0);
    report = await readReport(out);
    expect(report.run.totals.failed).toBe(2);

    since = sandbox.stats.requests.length;
    const retried = await run(fixture, sandbox, out, ['--retry-failed']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(createRequests(sandbox, since)).toBe(2);
    report = await readReport(out);
    expect(report.run.totals.succeeded).toBe(2);
    await expectSecretAbsent(fixture.apiKey, out, [
      first.stderr,
      again.stderr,
      retried.stderr,
      retried.stdout,
    ]);
  });
});

describe('possible duplicates (issue 29, item 5)', () => {
  it('--retry-failed resubmissions are deliberate, not possible duplicates; a resend after an unknown outcome is', async () => {
    const { fixture, sandbox, out } = await setup(3, { faults: { failRate: 1, failCode: 'no_kitchen' } });
    const first = await run(fixture, sandbox, out);
    expect(first.code, first.stderr).toBe(1);
    expect((await readReport(out)).run.totals.failed).toBe(3);
    // A --retry-failed run that crashed right after sending the first item's job: its `submitting`
    // record has no answer, so that POST's outcome is unknown.
    const unknown = fixture.items[0]!;
    const fp = (await readJournalRecords(out)).find((r) => r.t === 'item' && r.id === unknown.id);
    expect(fp?.t).toBe('item');
    await appendFile(
      path.join(out, 'journal.jsonl'),
      `${JSON.stringify({ t: 'submitting', id: unknown.id, fp: fp?.t === 'item' ? fp.fp : '', at: '' })}\n`,
    );
    sandbox.setFaults({ failRate: 0 });

    const since = sandbox.stats.requests.length;
    const retried = await run(fixture, sandbox, out, ['--retry-failed']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(createRequests(sandbox, since)).toBe(3);
    const report = await readReport(out);
    expect(report.run.totals.succeeded).toBe(3);
    // Every POST that may have created a job is counted ...
    expect(report.items.map((i) => i.submissions)).toEqual([3, 2, 2]);
    // ... but only the one sent again while an earlier one's outcome was unknown is a possible duplicate.
    expect(report.items.map((i) => i.ambiguous_resends)).toEqual([1, 0, 0]);
    expect(report.run.totals.possible_duplicates).toBe(1);
    expect(retried.stdout).toMatch(/, 1 possible duplicate charge \(/);
    const csv = (await readFile(path.join(out, 'report.csv'), 'utf8')).split('\r\n');
    expect(csv[0]).toMatch(/,ambiguous_resends$/);
    expect(csv[1]).toMatch(/,1$/);
    expect(csv[2]).toMatch(/,0$/);

    // A plain rerun of the finished folder still says so (the report is rebuilt from the journal).
    const again = await run(fixture, sandbox, out, ['--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).totals.possible_duplicates).toBe(1);
  });

  it('retrying failed jobs alone reports no possible duplicate', async () => {
    const { fixture, sandbox, out } = await setup(2, { faults: { failRate: 1 } });
    expect((await run(fixture, sandbox, out)).code).toBe(1);
    sandbox.setFaults({ failRate: 0 });
    const retried = await run(fixture, sandbox, out, ['--retry-failed']);
    expect(retried.code, retried.stderr).toBe(0);
    const report = await readReport(out);
    expect(report.items.map((i) => i.submissions)).toEqual([2, 2]);
    expect(report.run.totals.possible_duplicates).toBe(0);
    expect(retried.stdout).not.toMatch(/possible duplicate/);
  });
});

describe('ambiguous submissions', () => {
  it('a reset after the body leaves submit_unknown (exit 1); the rerun resubmits and flags it', async () => {
    const { fixture, sandbox, out } = await setup(2, {
      faults: { resetRate: 1, resetWhen: 'after-body', resetOn: 'create' },
    });
    const first = await run(fixture, sandbox, out);
    expect(first.code, first.stderr).toBe(1);
    let report = await readReport(out);
    expect(report.run.totals.incomplete).toBe(2);
    for (const item of report.items) {
      expect(item.status).toBe('incomplete');
      expect(item.error?.code).toBe('submit_unknown');
    }
    // Not resent within the run: one create per item reached the service (and created a job).
    expect(createRequests(sandbox)).toBe(2);
    expect([...(await createsPerItem(fixture, sandbox)).values()]).toEqual([1, 1]);

    sandbox.setFaults({ resetRate: 0 });
    const rerun = await run(fixture, sandbox, out);
    expect(rerun.code, rerun.stderr).toBe(0);
    report = await readReport(out);
    expect(report.run.totals.succeeded).toBe(2);
    expect(report.items.map((i) => i.submissions)).toEqual([2, 2]);
    expect(report.run.totals.possible_duplicates).toBe(2);
    expect([...(await createsPerItem(fixture, sandbox)).values()]).toEqual([2, 2]);
    await expectSecretAbsent(fixture.apiKey, out, [first.stdout, first.stderr, rerun.stdout, rerun.stderr]);
  });

  it('--retry-ambiguous resends within the run and flags the duplicate', async () => {
    const { fixture, sandbox, out } = await setup(1, {
      faults: { resetRate: 1, resetWhen: 'after-body', resetOn: 'create' },
    });
    const cli = startRun(fixture, sandbox, out, ['--retry-ambiguous']);
    await waitFor(() => sandbox.stats.requests.some((r) => r.fault === 'reset') || cli.exitedYet(), {
      intervalMs: 1,
      what: 'a reset create',
    });
    sandbox.setFaults({ resetRate: 0 });
    const result = await cli.exited;
    expect(result.code, result.stderr).toBe(0);
    const creates = (await createsPerItem(fixture, sandbox)).get(fixture.items[0]!.id) ?? 0;
    expect(creates).toBeGreaterThanOrEqual(2);
    const report = await readReport(out);
    expect(report.items[0]!.submissions).toBe(creates);
    expect(report.run.totals.possible_duplicates).toBe(1);
    const kinds = (await readJournalRecords(out)).map((r) => r.t);
    expect(kinds.filter((t) => t === 'submitting').length).toBe(creates);
  });
});
