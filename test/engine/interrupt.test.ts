import { afterEach, describe, expect, it } from 'vitest';
import { InterruptedError } from '../../src/errors.js';
import { closeWorkspaces, thrown, type Workspace, workspace } from '../helpers/batch.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

describe('run: stop and resume', () => {
  it('a stop signal mid-run ends with InterruptedError (exit 130); the rerun polls accepted jobs and submits nothing twice', async () => {
    ws = await workspace({ items: 6, sandbox: { processingMs: 1500, jitterMs: 200 } });
    const stop = new AbortController();
    const running = thrown(() =>
      ws!.run({ limits: { concurrency: 3 }, signals: { stop: stop.signal }, timing: { graceMs: 500 } }),
    );
    // Stop once the first jobs are accepted.
    while (ws.sandbox.stats.jobs < 3) await new Promise((r) => setTimeout(r, 20));
    stop.abort(new InterruptedError('SIGINT'));
    expect(await running).toBeInstanceOf(InterruptedError);
    const partial = await ws.report();
    expect(partial.run.totals.succeeded).toBeLessThan(6);
    const second = await ws.run();
    expect(second.exitCode).toBe(0);
    expect([...ws.sandbox.stats.createsByItem.values()].every((n) => n === 1)).toBe(true);
    expect(ws.sandbox.stats.createsByItem.size).toBe(6);
  });
});
