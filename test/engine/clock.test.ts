/**
 * docs/faults.md J.44: a client whose clock is hours off. The CLI runs as a real child process under
 * libfaketime (Debian's `faketime`, installed by .ci/run; skipped where missing) against the sandbox
 * on the real clock, with 429s whose Retry-After is an HTTP-date.
 */
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { closeWorkspaces, type Workspace, workspace } from '../helpers/batch.js';
import { type CliResult, killAllClis, runCli } from '../helpers/cli.js';

const hasFaketime = spawnSync('faketime', ['-f', '+0', 'true']).status === 0;

let ws: Workspace | undefined;
afterEach(async () => {
  await killAllClis();
  await closeWorkspaces();
});

/** Runs the fixture's manifest through the CLI under faketime `offset`; SIGKILLed (and failed) after 60 s. */
function runSkewed(offset: string, w: Workspace): Promise<CliResult> {
  return runCli(['run', w.manifest], {
    prefix: ['faketime', '-f', offset],
    cwd: w.dir,
    env: {
      KITCHEN_API_KEY: w.apiKey,
      KITCHEN_API_BASE_URL: w.sandbox.url,
      // Timers and backoffs must run on the monotonic clock: leave it real, fake the wall clock.
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
    timeoutMs: 60_000,
  });
}

describe.skipIf(!hasFaketime)('a client clock hours off (faketime)', () => {
  for (const offset of ['-2h', '+2h']) {
    it(`${offset}: Retry-After dates are measured against the server's Date; the run finishes on time`, async () => {
      ws = await workspace({
        items: 4,
        sandbox: { seed: 12, faults: { rate429: 0.25, retryAfter: 'date' } },
      });
      const started = performance.now();
      const { code, stderr } = await runSkewed(offset, ws);
      expect(code, stderr).toBe(0);
      // Measured against the local clock, a date 1 s ahead of the server is 2 h away (or long past).
      expect(performance.now() - started).toBeLessThan(45_000);
      expect(ws.sandbox.stats.rateLimited).toBeGreaterThan(0);
      // Each 429's wait, as the run logged it: the Retry-After date less the response's Date (1 or 2 s,
      // in whole seconds). Against the local clock it would be 0 (+2h: long past) or the cap (-2h).
      // The client's own record, not the sandbox's arrival times: on a loaded machine a request
      // already sent when the 429 came back can arrive hundreds of ms after it.
      const log = await readFile(path.join(ws.dir, 'output/manifest/run.log'), 'utf8');
      const waits = log
        .split('\n')
        .filter((line) => line.includes('"event":"retry"'))
        .map((line) => JSON.parse(line) as { status?: number; delay_ms: number })
        .filter((r) => r.status === 429)
        .map((r) => r.delay_ms);
      expect(waits.length).toBeGreaterThan(0);
      for (const ms of waits) {
        expect(ms, `waits after 429s: ${waits.join(', ')} ms`).toBeGreaterThanOrEqual(800);
        expect(ms, `waits after 429s: ${waits.join(', ')} ms`).toBeLessThanOrEqual(2100);
      }
      expect(log).not.toContain('retry_after_capped');
      for (const [, times] of ws.sandbox.stats.polls) {
        for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1990);
      }
      const report = JSON.parse(
        await readFile(path.join(ws.dir, 'output/manifest/report.json'), 'utf8'),
      ) as Report;
      expect(report.run.started_at).toMatch(/T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$/);
      expect(report.run.totals.succeeded).toBe(4);
    });
  }
});
