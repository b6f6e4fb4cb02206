import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { afterEach, describe, expect, it } from 'vitest';
import { closeWorkspaces, type Workspace, workspace } from '../helpers/batch.js';
import { createRequests } from '../helpers/sandbox.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

describe('run: the main flow against the sandbox', () => {
  it('takes a clean batch of both modules to downloaded, checked results and the contract report', async () => {
    ws = await workspace({
      items: 4,
      extraRows: [`cfg,images/k0.jpg,kitchen-configurator,,,"{""door_style"":""shaker""}"`],
    });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const report = await ws.report();
    expect(report.run.totals).toEqual({
      items: 5,
      succeeded: 5,
      failed: 0,
      rejected: 0,
      incomplete: 0,
      possible_duplicates: 0,
      needs_review: 0,
    });
    expect(Object.keys(report.items[0]!)).toEqual([
      'id',
      'image',
      'module',
      'style',
      'status',
      'job_id',
      'output',
      'sha256',
      'processing_time_ms',
      'submissions',
      'error',
      'preflight',
      'review',
      'ambiguous_resends',
    ]);
    for (const item of report.items) {
      const file = path.join(ws.out, item.output!);
      const bytes = await readFile(file);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(item.sha256);
      const meta = await sharp(bytes).metadata();
      expect(meta.format).toBe('jpeg');
      expect(item.submissions).toBe(1);
      expect(item.job_id).toMatch(/\S/);
    }
    expect(report.items.find((i) => i.id === 'cfg')?.module).toBe('kitchen-configurator');
    const csv = await readFile(path.join(ws.out, 'report.csv'), 'utf8');
    expect(csv.split('\r\n')[0]).toBe(
      'id,image,module,style,status,job_id,output,sha256,processing_time_ms,submissions,error_code,error_message,preflight,review_score,review_flags,ambiguous_resends',
    );
    expect(csv.trim().split('\r\n')).toHaveLength(6);
    // One POST per item, and every job created exactly once.
    expect(createRequests(ws.sandbox)).toBe(5);
    expect([...ws.sandbox.stats.createsByItem.values()].every((n) => n === 1)).toBe(true);
    // The journal and the log exist; no .part is left behind.
    await stat(path.join(ws.out, 'journal.jsonl'));
    await stat(path.join(ws.out, 'run.log'));
    const names = (await import('node:fs/promises')).readdir(path.join(ws.out, 'results'));
    expect((await names).some((n) => n.endsWith('.part'))).toBe(false);
  });

  it('never polls a job twice within 2 s, and places the first poll from the processing times seen', async () => {
    ws = await workspace({ items: 8, sandbox: { processingMs: 2500, jitterMs: 200, queuedMs: 0 } });
    const result = await ws.run({ limits: { concurrency: 8 } });
    expect(result.exitCode).toBe(0);
    for (const [, times] of ws.sandbox.stats.polls) {
      for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1990);
    }
    const polls = [...ws.sandbox.stats.polls.values()].reduce((n, t) => n + t.length, 0);
    // 8 jobs of ~2.5 s with a 2 s floor: two polls each at most.
    expect(polls).toBeLessThanOrEqual(16);
  });

  it('reports failed jobs with the service code and message, exit 1', async () => {
    ws = await workspace({ items: 3, sandbox: { faults: { failRate: 1, failCode: 'not_a_kitchen' } } });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    const report = await ws.report();
    expect(report.run.totals.failed).toBe(3);
    for (const item of report.items) {
      expect(item.status).toBe('failed');
      expect(item.error?.code).toBe('not_a_kitchen');
      expect(item.error?.message).toMatch(/\S/);
    }
  });

  it('--job-timeout leaves a stuck job incomplete with its job id kept', async () => {
    ws = await workspace({ items: 2, sandbox: { faults: { stuckRate: 1 } } });
    const result = await ws.run({ limits: { jobTimeoutMs: 2500 } });
    expect(result.exitCode).toBe(1);
    const report = await ws.report();
    for (const item of report.items) {
      expect(item.status).toBe('incomplete');
      expect(item.error?.code).toBe('job_timeout');
      expect(item.job_id).toMatch(/^job_/);
    }
  });

  it('--max-submissions caps new jobs; the rest are incomplete/max_submissions and a rerun continues', async () => {
    ws = await workspace({ items: 5 });
    const first = await ws.run({ limits: { maxSubmissions: 2 } });
    expect(first.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(2);
    const report = await ws.report();
    expect(report.items.filter((i) => i.error?.code === 'max_submissions')).toHaveLength(3);
    const second = await ws.run();
    expect(second.exitCode).toBe(0);
    expect(createRequests(ws.sandbox)).toBe(5);
  });

  it('--max-submissions counts an item once however often its submission is retried', async () => {
    ws = await workspace({
      items: 4,
      sandbox: { seed: 6, faults: { errorRate: 0.6, errorOn: 'create', errorStatuses: [503] } },
    });
    const result = await ws.run({ limits: { maxSubmissions: 2 } });
    expect(result.exitCode).toBe(1);
    // 503s are retried (the job cannot exist), yet only two items were let through the cost guard.
    expect(createRequests(ws.sandbox)).toBeGreaterThan(2);
    expect(ws.sandbox.stats.createsByItem.size).toBe(2);
    const report = await ws.report();
    expect(report.run.totals.succeeded).toBe(2);
    expect(report.items.filter((i) => i.error?.code === 'max_submissions')).toHaveLength(2);
  });

  it('rejects items the service does not offer a style for, and submits the rest', async () => {
    ws = await workspace({ items: 2, extraRows: ['bad,images/k0.jpg,change-style,scandinavain,,'] });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    const report = await ws.report();
    const bad = report.items.find((i) => i.id === 'bad__scandinavain')!;
    expect(bad.status).toBe('rejected');
    expect(bad.error?.code).toBe('unknown_style');
    expect(bad.error?.message).toContain('scandinavian');
    expect(createRequests(ws.sandbox)).toBe(2);
  });
});
