/**
 * docs/faults.md J.44: a client whose clock is hours off. The CLI runs as a real child process under
 * libfaketime (Debian's `faketime`, installed by .ci/run; skipped where missing) against the sandbox
 * on the real clock, with 429s whose Retry-After is an HTTP-date.
 */
import { spawnSync } from 'node:child_process';
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
      const service = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
      for (const hit of service.filter((r) => r.status === 429)) {
        expect(service.filter((r) => r.at > hit.at + 150 && r.at < hit.at + 900)).toEqual([]);
      }
      for (const [, times] of ws.sandbox.stats.polls) {
        for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1990);
      }
      const report = JSON.parse(
        await (await import('node:fs/promises')).readFile(
          path.join(ws.dir, 'output/manifest/report.json'),
          'utf8',
        ),
      ) as Report;
      expect(report.run.started_at).toMatch(/T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$/);
      expect(report.run.totals.succeeded).toBe(4);
    });
  }
});
