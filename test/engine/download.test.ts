import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeWorkspaces, type Workspace, workspace } from '../helpers/batch.js';
import { createRequests } from '../helpers/sandbox.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

async function leftovers(out: string): Promise<string[]> {
  return (await readdir(path.join(out, 'results'))).filter((n) => n.endsWith('.part') || n.endsWith('.tmp'));
}

describe('run: result downloads', () => {
  it('an expired result URL re-polls the job once for a fresh one; a rerun fetches it without resubmitting', async () => {
    ws = await workspace({ items: 2, sandbox: { faults: { resultTtlMs: 1 } } });
    const first = await ws.run();
    expect(first.exitCode).toBe(1);
    let report = await ws.report();
    for (const item of report.items) {
      expect(item.status).toBe('incomplete');
      expect(item.error?.code).toBe('download_failed');
    }
    // Each item: first URL 410, one re-poll, the fresh URL 410 again.
    const storage = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/storage/'));
    expect(storage.every((r) => r.status === 410)).toBe(true);
    expect(new Set(storage.map((r) => r.path)).size).toBe(4);
    ws.sandbox.setFaults({ resultTtlMs: null });
    const second = await ws.run();
    expect(second.exitCode).toBe(0);
    report = await ws.report();
    expect(report.run.totals.succeeded).toBe(2);
    expect(createRequests(ws.sandbox)).toBe(2);
    expect(await leftovers(ws.out)).toEqual([]);
  });

  it('a truncated body, an HTML page with 200 and a 404 are never saved as results', async () => {
    for (const fault of ['truncated', 'wrong-type', 'not-found'] as const) {
      ws = await workspace({ items: 1, sandbox: { faults: { resultFault: fault } } });
      const result = await ws.run({ service: { retry: { retries: 1, baseMs: 50, capMs: 100 } } });
      expect(result.exitCode, fault).toBe(1);
      const report = await ws.report();
      expect(report.items[0]?.status, fault).toBe('incomplete');
      expect(report.items[0]?.error?.code, fault).toBe('download_failed');
      expect(await readdir(path.join(ws.out, 'results')), fault).toEqual([]);
      await ws.close();
      ws = undefined;
    }
  });

  it('a redirect to another origin is followed without the Authorization header', async () => {
    ws = await workspace({ items: 2, sandbox: { faults: { resultFault: 'redirect-cross-origin' } } });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const storage = ws.sandbox.stats.storageRequests;
    expect(storage.some((r) => r.origin === 'secondary')).toBe(true);
    for (const request of storage) {
      expect(request.headers.authorization).toBeUndefined();
      expect(JSON.stringify(request.headers)).not.toContain(ws.apiKey);
    }
  });

  it('a result over the byte cap or dripping past the deadline is abandoned and removed', async () => {
    ws = await workspace({ items: 1, sandbox: { faults: { resultFault: 'slow-drip' } } });
    const result = await ws.run({
      service: { timeouts: { download: 1500 }, retry: { retries: 1, baseMs: 50, capMs: 100 } },
    });
    expect(result.exitCode).toBe(1);
    const report = await ws.report();
    expect(report.items[0]?.error?.code).toBe('download_failed');
    expect(await readdir(path.join(ws.out, 'results'))).toEqual([]);
  });
});
