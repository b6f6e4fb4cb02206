import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceRefusedError } from '../../src/errors.js';
import { closeWorkspaces, thrown, type Workspace, workspace } from '../helpers/batch.js';
import { createRequests } from '../helpers/sandbox.js';
import { kitchenJpeg } from '../support/images.js';

let ws: Workspace | undefined;
afterEach(closeWorkspaces);

/** A loopback port with nothing listening on it. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('run: edge cases of the service', () => {
  it('a service that cannot be reached at all ends the run with exit 3 before submitting', async () => {
    ws = await workspace({ items: 2 });
    const port = await deadPort();
    const error = await thrown(() =>
      ws!.run({
        service: { baseUrl: `http://127.0.0.1:${port}`, retry: { retries: 2, baseMs: 20, capMs: 50 } },
      }),
    );
    expect(error).toBeInstanceOf(ServiceRefusedError);
    expect((error as Error).message).toMatch(/cannot be reached/);
  });

  it('a styles list in a shape we do not understand: one warning, then the service judges each style', async () => {
    ws = await workspace({ items: 2, sandbox: { stylesShape: 'unrecognised' } });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const warnings = ws.events.filter((e) => e.type === 'warning');
    expect(warnings).toHaveLength(1);
    expect(JSON.stringify(warnings[0])).toMatch(/styles/);
  });

  it('garbage Retry-After falls back to computed backoff, never a 0 ms loop', async () => {
    ws = await workspace({ items: 3, sandbox: { seed: 8, faults: { rate429: 0.3, retryAfter: 'garbage' } } });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const service = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
    const limited = service.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    // After each 429 the next request waits at least the 50 ms backoff floor (in-flight ones aside).
    for (const hit of limited) {
      const next = service.filter((r) => r.at > hit.at + 5 && r.at < hit.at + 45);
      expect(next.length).toBeLessThanOrEqual(3);
    }
  });

  it("the report's stats say what the key allowed: API requests, per job, 429 share, rate used and learnt", async () => {
    ws = await workspace({ items: 4, sandbox: { seed: 8, faults: { rate429: 0.3 } } });
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const stats = (await ws.report()).run.stats!;
    // Counted by the sandbox: every request to /v1 (styles, submissions, polls), 429s included.
    const service = ws.sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
    const limited = service.filter((r) => r.status === 429).length;
    expect(limited).toBeGreaterThan(0);
    expect(stats.api_requests).toBe(service.length);
    expect(stats.rate_limited).toBe(limited);
    expect(stats.rate_limited_share).toBeCloseTo(limited / service.length, 3);
    expect(stats.requests_per_job).toBeCloseTo(service.length / 4, 2);
    expect(stats.rate_used).toBeCloseTo(service.length / (stats.duration_ms / 1000), 1);
    expect(stats.rate_learnt).toBeGreaterThan(0);
    // Polls: what the sandbox answered on /v1/jobs per job, and the jobs its first poll saw done.
    const polls = service.filter((r) => r.method === 'GET' && r.path.startsWith('/v1/jobs/'));
    const perJob = new Map<string, number>();
    for (const r of polls) perJob.set(r.path, (perJob.get(r.path) ?? 0) + 1);
    expect(stats.polls_per_job).toBeCloseTo(polls.length / perJob.size, 2);
    expect(stats.first_poll_hit_share).toBeGreaterThanOrEqual(0);
    expect(stats.first_poll_hit_share).toBeLessThanOrEqual(1);
    const log = await readFile(path.join(ws.out, 'run.log'), 'utf8');
    const end = log.split('\n').find((line) => line.includes('"event":"run_end"'))!;
    expect(JSON.parse(end).stats).toMatchObject({ api_requests: service.length, rate_limited: limited });
  });

  it('a 429 storm longer than the retry deadline leaves items incomplete (exit 1), never a busy loop', async () => {
    ws = await workspace({ items: 2 });
    ws.sandbox.setFaults({});
    const styles = ws.sandbox.stats.requests.length;
    // Styles go through; then every create is rate limited for good.
    const result = await (async () => {
      const run = ws!.run({
        service: { retry: { retries: 3, baseMs: 50, capMs: 200, maxRetryTimeMs: 2500 } },
      });
      while (ws!.sandbox.stats.requests.length === styles) await new Promise((r) => setTimeout(r, 5));
      ws!.sandbox.setFaults({ rate429: 1, retryAfter: 'none' });
      return run;
    })();
    expect(result.exitCode).toBe(1);
    const report = await ws.report();
    expect(report.run.totals.incomplete).toBe(2);
    expect(report.items.every((i) => i.submissions === 0)).toBe(true);
    expect(ws.sandbox.stats.rateLimited).toBeLessThan(100);
  });

  it('a hung POST counts as ambiguous: submit_unknown, not resent', async () => {
    ws = await workspace({ items: 1, sandbox: { faults: { hangRate: 1, hangOn: 'create' } } });
    const result = await ws.run({ service: { timeouts: { upload: 500 } } });
    expect(result.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(1);
    const report = await ws.report();
    expect(report.items[0]?.error?.code).toBe('submit_unknown');
  });

  it('a poll answered 404 for a known job: incomplete/job_not_found, never an automatic resubmit', async () => {
    ws = await workspace({ items: 2, sandbox: { faults: { pollNotFoundRate: 1 } } });
    const result = await ws.run();
    expect(result.exitCode).toBe(1);
    expect(createRequests(ws.sandbox)).toBe(2);
    const report = await ws.report();
    expect(report.items.map((i) => i.error?.code)).toEqual(['job_not_found', 'job_not_found']);
    expect(report.items.every((i) => i.job_id)).toBe(true);
  });

  it('ids that try to leave results/ stay inside it', async () => {
    ws = await workspace({ items: 0, extraRows: ['..,images/k0.jpg,kitchen-configurator,,,'] });
    await writeFile(`${ws.dir}/images/k0.jpg`, await kitchenJpeg(1, 320, 240, 'tinted'));
    const result = await ws.run();
    expect(result.exitCode).toBe(0);
    const report = await ws.report();
    expect(report.items[0]?.id).toBe('--');
    expect(report.items[0]?.output).toBe('results/--.jpg');
  });
});
