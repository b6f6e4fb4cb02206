/**
 * A nightly window (issue 14): `--max-duration` stops submitting on time, gives jobs in flight their
 * grace period, leaves the rest `incomplete/max_duration` with exit 1, and a rerun continues without
 * paying twice; `--max-rate` caps the request rate. Real CLI children against the sandbox.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Report } from '../../src/types.js';
import { perTest, run } from '../resume/world.js';

const { setup } = perTest({ processingMs: 4000, jitterMs: 0 });

describe('--max-duration and --max-rate', () => {
  it('stops submitting at the deadline, exits 1 with the rest incomplete/max_duration; the rerun finishes', async () => {
    const { fixture, sandbox, out } = await setup(6);
    const first = await run(fixture, sandbox, out, ['--concurrency', '2', '--max-duration', '3s', '--json']);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stderr).toMatch(/reached --max-duration 3s: no new submissions; jobs in flight have 1 s/);
    const posts = sandbox.stats.requests.filter((r) => r.method === 'POST');
    expect(posts).toHaveLength(2);
    // Every submission left within the window (counted from the run's first request).
    const started = sandbox.stats.requests[0]!.at;
    for (const post of posts) expect(post.at - started).toBeLessThan(3000);
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as Report;
    expect(report.run.totals).toMatchObject({ items: 6, incomplete: 6 });
    for (const item of report.items) expect(item.error?.code).toBe('max_duration');
    expect(report.items.filter((i) => i.job_id)).toHaveLength(2);
    const rerun = await run(fixture, sandbox, out, ['--json'], { timeoutMs: 60_000 });
    expect(rerun.code, rerun.stderr).toBe(0);
    // The two jobs accepted before the deadline were polled, not sent again.
    expect(sandbox.stats.jobs).toBe(6);
  }, 60_000);

  it('--max-rate caps the requests per second; bad values are usage errors naming the flag', async () => {
    const { fixture, sandbox, out } = await setup(4, { processingMs: 200, jitterMs: 0 });
    const capped = await run(fixture, sandbox, out, ['--max-rate', '2', '--concurrency', '4']);
    expect(capped.code, capped.stderr).toBe(0);
    const api = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
    // No second holds more than the cap plus the pacing bucket's one token of burst.
    const perSecond = new Map<number, number>();
    for (const r of api)
      perSecond.set(
        Math.floor((r.at - api[0]!.at) / 1000),
        (perSecond.get(Math.floor((r.at - api[0]!.at) / 1000)) ?? 0) + 1,
      );
    for (const n of perSecond.values()) expect(n).toBeLessThanOrEqual(3);
    for (const bad of [
      ['--max-duration', '6 hours'],
      ['--max-duration', '0'],
      ['--max-rate', '0'],
      ['--max-rate', 'fast'],
    ]) {
      const refused = await run(fixture, sandbox, out, bad);
      expect(refused.code, bad.join(' ')).toBe(2);
      expect(refused.stderr, bad.join(' ')).toContain(bad[0]!);
    }
  }, 60_000);
});
