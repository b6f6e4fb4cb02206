import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Sandbox, SandboxFaults } from '../../src/sandbox/index.js';
import { create, createJob, get, type JobJson, pollUntilDone, sandboxForTest } from '../helpers/sandbox.js';
import { kitchenImage } from '../support/images.js';

let sandbox: Sandbox;
let jpeg: Buffer;

beforeAll(async () => {
  jpeg = await kitchenImage({ width: 400, height: 300 });
});

/** Starts this test's sandbox (closed after the test) with fast jobs, seed 42 and these faults. */
async function start(faults: Partial<SandboxFaults> = {}, processingMs = 50): Promise<Sandbox> {
  sandbox = await sandboxForTest({ processingMs, jitterMs: 0, seed: 42, faults });
  return sandbox;
}

async function poll(id: string): Promise<Response> {
  return get(sandbox, `/v1/jobs/${id}`);
}

/** A succeeded job's result URL, made before any result fault is switched on. */
async function resultUrl(): Promise<string> {
  const job = await pollUntilDone(sandbox, (await createJob(sandbox, { image: jpeg, style: 'modern' })).id);
  return job.result?.image_url ?? '';
}

describe('sandbox: fault knobs', () => {
  it('rate-limits with a token bucket and Retry-After in seconds, as a date, or not at all', async () => {
    await start({ rateLimit: { rps: 0.5, burst: 2 } });
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
    const limited = await get(sandbox, '/v1/styles');
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    expect(limited.headers.get('retry-after')).toBe('2');
    // Storage is outside the bucket.
    expect((await fetch(`${sandbox.url}/storage/x/y.jpg`)).status).toBe(404);

    sandbox.setFaults({ retryAfter: 'date', dateSkewMs: 7_200_000 });
    const dated = await get(sandbox, '/v1/styles');
    expect(dated.status).toBe(429);
    const serverDate = Date.parse(dated.headers.get('date') ?? '');
    const retryAt = Date.parse(dated.headers.get('retry-after') ?? '');
    expect(serverDate - Date.now()).toBeGreaterThan(7_100_000);
    expect(retryAt - serverDate).toBeGreaterThanOrEqual(1000);
    expect(retryAt - serverDate).toBeLessThanOrEqual(2000);

    sandbox.setFaults({ retryAfter: 'none' });
    const bare = await get(sandbox, '/v1/styles');
    expect([bare.status, bare.headers.get('retry-after')]).toEqual([429, null]);
    sandbox.setFaults({ retryAfter: 'garbage' });
    expect((await get(sandbox, '/v1/styles')).headers.get('retry-after')).toBe('soon');
    expect(sandbox.stats.rateLimited).toBe(4);
    sandbox.setFaults({ rateLimit: null, rate429: 1, retryAfter: 'seconds' });
    const random = await get(sandbox, '/v1/styles');
    expect([random.status, random.headers.get('retry-after')]).toEqual([429, '1']);
  });

  it('injects 5xx on the chosen requests without creating a job', async () => {
    await start({ errorRate: 1, errorStatuses: [503], errorOn: 'create' });
    const res = await create(sandbox, { image: jpeg, style: 'modern' });
    expect(res.status).toBe(503);
    expect(sandbox.stats.jobs).toBe(0);
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
    sandbox.setFaults({ errorOn: 'all', errorStatuses: [502] });
    expect((await get(sandbox, '/v1/styles')).status).toBe(502);
  });

  it('resets after the body (the job IS created) and mid-upload (it is not)', async () => {
    await start({ resetRate: 1, resetWhen: 'after-body', resetOn: 'create' });
    await expect(create(sandbox, { image: jpeg, style: 'modern' })).rejects.toThrow(TypeError);
    expect(sandbox.stats.jobs).toBe(1);
    expect([...sandbox.stats.createsByItem.values()]).toEqual([1]);
    expect(sandbox.stats.requests.at(-1)?.fault).toBe('reset');

    sandbox.setFaults({ resetWhen: 'mid-upload' });
    const error = await create(sandbox, { image: jpeg, style: 'modern' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(((error as TypeError).cause as { code?: string }).code).toBe('ECONNRESET');
    expect(sandbox.stats.jobs).toBe(1);

    sandbox.setFaults({ resetOn: 'poll' });
    await expect(get(sandbox, '/v1/jobs/job_x')).rejects.toThrow(TypeError);
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
  });

  it('hangs without answering until the client gives up, and close() does not wait for it', async () => {
    await start({ hangRate: 1, hangOn: 'poll' });
    const started = performance.now();
    const error = await get(sandbox, '/v1/jobs/job_x', { signal: AbortSignal.timeout(300) }).catch(
      (e: unknown) => e,
    );
    expect((error as Error).name).toBe('TimeoutError');
    expect(performance.now() - started).toBeLessThan(2000);
    expect(sandbox.stats.requests.at(-1)).toMatchObject({ status: 0, fault: 'hang' });
    // Leave one hung request open: close() must still return promptly.
    void get(sandbox, '/v1/jobs/job_y').catch(() => {});
    await new Promise((r) => setTimeout(r, 50));
    const closing = performance.now();
    await sandbox.close();
    expect(performance.now() - closing).toBeLessThan(1000);
  });

  it('delays every response by slowMs', async () => {
    await start({ slowMs: 200 });
    const started = performance.now();
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });

  it('keeps a job stuck in processing, or ends it failed with the configured code', async () => {
    await start({ stuckRate: 1 });
    const stuck = await createJob(sandbox, { image: jpeg, style: 'modern' });
    const after = await pollUntilDone(sandbox, stuck.id, 400);
    expect(after.status).toBe('processing');

    sandbox.setFaults({
      stuckRate: 0,
      failRate: 1,
      failCode: 'not_a_kitchen',
      failMessage: 'no kitchen found',
    });
    const failed = await pollUntilDone(
      sandbox,
      (await createJob(sandbox, { image: jpeg, style: 'modern' })).id,
    );
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: 'not_a_kitchen', message: 'no kitchen found' },
    });
    expect(failed.result).toBeUndefined();
  });

  it('answers unknown status values, malformed bodies and 404 for known jobs on demand', async () => {
    await start();
    const job = await createJob(sandbox, { image: jpeg, style: 'modern' });
    sandbox.setFaults({ badStatusRate: 1 });
    const bad = (await (await poll(job.id)).json()) as { job: JobJson };
    expect(bad.job.status).toBe('exploded');

    sandbox.setFaults({ badStatusRate: 0, malformedRate: 1 });
    const kinds = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await poll(job.id);
      expect(res.status).toBe(200);
      const text = await res.text();
      let parsed: { job: Partial<JobJson> } | undefined;
      try {
        parsed = JSON.parse(text) as { job: Partial<JobJson> };
      } catch {
        kinds.add('invalid-json');
        continue;
      }
      expect(parsed.job.id === undefined || parsed.job.status === undefined).toBe(true);
      kinds.add(parsed.job.id === undefined ? 'no-id' : 'no-status');
    }
    expect(kinds).toEqual(new Set(['invalid-json', 'no-id', 'no-status']));

    sandbox.setFaults({ malformedRate: 0, pollNotFoundRate: 1 });
    expect((await poll(job.id)).status).toBe(404);
    sandbox.setFaults({ pollNotFoundRate: 0 });
    expect((await poll(job.id)).status).toBe(200);
  });

  it('expires result URLs after resultTtlMs and rotates the URL on the next poll', async () => {
    await start({ resultTtlMs: 500 });
    const job = await pollUntilDone(
      sandbox,
      (await createJob(sandbox, { image: jpeg, style: 'japandi' })).id,
    );
    const first = job.result?.image_url ?? '';
    expect((await fetch(first)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 550));
    const expired = await fetch(first);
    expect(expired.status).toBe(410);
    expect(((await expired.json()) as { error: { code: string } }).error.code).toBe('expired');
    const again = (await (await poll(job.id)).json()) as { job: JobJson };
    const second = again.job.result?.image_url ?? '';
    expect(second).not.toBe(first);
    const fresh = await fetch(second);
    expect(fresh.status).toBe(200);
    expect((await sharp(Buffer.from(await fresh.arrayBuffer())).metadata()).format).toBe('jpeg');
  });

  it('breaks result downloads: 404, truncated (sized or not), wrong type, slow drip, oversized', async () => {
    await start();
    const url = await resultUrl();
    const whole = (await (await fetch(url)).arrayBuffer()).byteLength;

    sandbox.setFaults({ resultFault: 'not-found' });
    expect((await fetch(url)).status).toBe(404);

    sandbox.setFaults({ resultFault: 'truncated' });
    const cut = await fetch(url);
    expect(cut.status).toBe(200);
    expect(Number(cut.headers.get('content-length'))).toBeGreaterThan(1000);
    await expect(cut.arrayBuffer()).rejects.toThrow(/terminated/);

    // Close-delimited: no length, no chunking; half the body, then a clean close, no error.
    sandbox.setFaults({ resultFault: 'truncated-unsized' });
    const unsized = await fetch(url);
    expect(unsized.status).toBe(200);
    expect([unsized.headers.get('content-length'), unsized.headers.get('transfer-encoding')]).toEqual([
      null,
      null,
    ]);
    expect((await unsized.arrayBuffer()).byteLength).toBe(Math.floor(whole / 2));

    sandbox.setFaults({ resultFault: 'wrong-type' });
    const html = await fetch(url);
    expect([html.status, html.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    expect(await html.text()).toContain('<html>');

    sandbox.setFaults({ resultFault: 'slow-drip' });
    const slow = await fetch(url, { signal: AbortSignal.timeout(400) });
    expect(slow.status).toBe(200);
    await expect(slow.arrayBuffer()).rejects.toThrow();

    sandbox.setFaults({ resultFault: 'oversized' });
    const huge = await fetch(url);
    expect(Number(huge.headers.get('content-length'))).toBeGreaterThan(100_000_000);
    await huge.body?.cancel();

    sandbox.setFaults({ resultFault: 'not-found', resultFaultRate: 0 });
    expect((await fetch(url)).status).toBe(200);
  });

  it('redirects results to a second origin that records headers (fetch drops Authorization there)', async () => {
    await start();
    const url = await resultUrl();
    sandbox.setFaults({ resultFault: 'redirect-cross-origin' });
    const res = await fetch(url, { headers: { authorization: `Bearer ${sandbox.apiKey}` } });
    expect(res.status).toBe(200);
    expect(res.url).not.toBe(url);
    expect((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).format).toBe('jpeg');
    const [primary, secondary] = sandbox.stats.storageRequests;
    expect(primary?.origin).toBe('primary');
    expect(secondary?.origin).toBe('secondary');
    expect(secondary?.headers.host).not.toBe(primary?.headers.host);
    expect(secondary?.headers.authorization).toBeUndefined();
  });

  it('answers every create with failCreateWith', async () => {
    await start({ failCreateWith: { status: 403, code: 'forbidden' } });
    const res = await create(sandbox, { image: jpeg, style: 'modern' });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect(sandbox.stats.jobs).toBe(0);
    expect((await get(sandbox, '/v1/styles')).status).toBe(200);
  });

  it('skews the Date header and job timestamps', async () => {
    await start({ dateSkewMs: -3_600_000 });
    const res = await create(sandbox, { image: jpeg, style: 'modern' });
    const date = Date.parse(res.headers.get('date') ?? '');
    expect(Date.now() - date).toBeGreaterThan(3_500_000);
    const { job } = (await res.json()) as { job: JobJson };
    expect(Date.now() - Date.parse(job.created_at ?? '')).toBeGreaterThan(3_500_000);
  });
});
