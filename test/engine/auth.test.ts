import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceRefusedError } from '../../src/errors.js';
import { closeWorkspaces, thrown, type Workspace, workspace } from '../helpers/batch.js';
import { createRequests } from '../helpers/sandbox.js';
import { allFiles } from '../helpers/tmp.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

describe('run: auth and secrets', () => {
  it('a wrong key ends the run with ServiceRefusedError (exit 3) before anything is submitted', async () => {
    ws = await workspace({ items: 2 });
    const error = await thrown(() => ws!.run({ service: { apiKey: 'sk_wrong_key' } }));
    expect(error).toBeInstanceOf(ServiceRefusedError);
    expect(createRequests(ws.sandbox)).toBe(0);
    expect((error as Error).message).not.toContain('sk_wrong_key');
  });

  it('a key revoked mid-run (401 on submit) stops at once: no further POSTs, journal and report saved', async () => {
    ws = await workspace({
      items: 6,
      sandbox: { faults: { failCreateWith: { status: 401, code: 'unauthorized' } } },
    });
    const error = await thrown(() => ws!.run({ limits: { concurrency: 1 } }));
    expect(error).toBeInstanceOf(ServiceRefusedError);
    expect(createRequests(ws.sandbox)).toBe(1);
    const report = await ws.report();
    expect(report.run.totals.incomplete).toBe(6);
    expect(report.items[0]?.submissions).toBe(0);
  });

  it('the canary key appears in no output: journal, run.log, reports, events, storage requests', async () => {
    ws = await workspace({
      items: 4,
      sandbox: {
        seed: 3,
        faults: { rate429: 0.2, errorRate: 0.2, errorOn: 'poll', resultFault: 'redirect-cross-origin' },
      },
      extraRows: ['bad,images/missing.jpg,change-style,modern,,'],
    });
    await ws.run({ output: { logLevel: 'trace', html: true } });
    const key = ws.apiKey;
    for (const file of await allFiles(ws.out)) {
      expect((await readFile(file)).includes(Buffer.from(key)), file).toBe(false);
    }
    expect(JSON.stringify(ws.events)).not.toContain(key);
    expect(JSON.stringify(ws.sandbox.stats.storageRequests)).not.toContain(key);
    const log = await readFile(path.join(ws.out, 'run.log'), 'utf8');
    expect(log).toContain('"event":"retry"');
    expect(log).not.toContain(key);
  });
});
