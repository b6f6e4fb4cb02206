import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_STYLES, type Sandbox, type SandboxOptions, STYLES_SHAPES } from '../../src/sandbox/index.js';
import { create, createJob, get, pollUntilDone, sandboxForTest } from '../helpers/sandbox.js';
import { kitchenImage } from '../support/images.js';

const ISO_WITH_OFFSET = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$/;

let sandbox: Sandbox;
let jpeg: Buffer;

beforeAll(async () => {
  jpeg = await kitchenImage({ width: 1600, height: 1200 });
});

/** Starts this test's sandbox (closed after the test) with fast jobs. */
async function start(options: SandboxOptions = {}): Promise<Sandbox> {
  sandbox = await sandboxForTest({ processingMs: 50, jitterMs: 0, ...options });
  return sandbox;
}

async function download(url: string): Promise<{ res: Response; bytes: Buffer }> {
  const res = await fetch(url);
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

describe('sandbox: spec behaviour', () => {
  it('runs change-style from create to a downloadable, styled image', async () => {
    await start();
    expect(sandbox.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await create(sandbox, { image: jpeg, style: 'scandinavian', prompt: 'more wood' });
    expect(res.status).toBe(202);
    const body = (await res.json()) as {
      job: Record<string, unknown>;
      links: { self: string };
    };
    expect(body.job.id).toMatch(/^job_[0-9a-f]{24}$/);
    expect(body.job).toMatchObject({ module: 'change-style', status: 'queued' });
    expect(body.job.created_at).toMatch(ISO_WITH_OFFSET);
    expect(body.job.updated_at).toMatch(ISO_WITH_OFFSET);
    expect(body.links.self).toBe(`${sandbox.url}/v1/jobs/${String(body.job.id)}`);

    const job = await pollUntilDone(sandbox, String(body.job.id));
    expect(job.status).toBe('succeeded');
    expect(Number.isInteger(job.processing_time_ms)).toBe(true);
    const url = job.result?.image_url ?? '';
    expect(url).toMatch(new RegExp(`^${sandbox.url}/storage/[0-9a-f]{32}/${job.id}\\.jpg$`));

    const { res: img, bytes } = await download(url);
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/jpeg');
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 1024, 768]);

    // Another style of the same input gives clearly different pixels; the same style, the same bytes.
    const other = await pollUntilDone(
      sandbox,
      (await createJob(sandbox, { image: jpeg, style: 'industrial' })).id,
    );
    const again = await pollUntilDone(
      sandbox,
      (await createJob(sandbox, { image: jpeg, style: 'scandinavian' })).id,
    );
    const otherBytes = (await download(other.result?.image_url ?? '')).bytes;
    const againBytes = (await download(again.result?.image_url ?? '')).bytes;
    expect(againBytes.equals(bytes)).toBe(true);
    const means = async (b: Buffer) => (await sharp(b).stats()).channels.map((c) => c.mean);
    const [a, b] = [await means(bytes), await means(otherBytes)];
    const distance = a.reduce((sum, v, i) => sum + Math.abs(v - (b[i] ?? 0)), 0);
    expect(distance).toBeGreaterThan(30);
  });

  it('runs kitchen-configurator with a configuration object, keeping alpha as PNG', async () => {
    await start();
    const png = await kitchenImage({ format: 'png', alpha: true, width: 300, height: 200 });
    const job = await createJob(sandbox, {
      module: 'kitchen-configurator',
      image: png,
      imageType: 'image/png',
      filename: 'k.png',
      configuration: JSON.stringify({ door_style: 'shaker', finish: 'matte' }),
      prompt: 'ignored on this module',
    });
    expect(job.module).toBe('kitchen-configurator');
    const done = await pollUntilDone(sandbox, job.id);
    expect(done.status).toBe('succeeded');
    const { res, bytes } = await download(done.result?.image_url ?? '');
    expect(res.headers.get('content-type')).toBe('image/png');
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.height, meta.hasAlpha]).toEqual(['png', 300, 200, true]);
  });

  it('walks queued -> processing -> succeeded with timestamps', async () => {
    await start({ processingMs: 300, queuedMs: 100 });
    const job = await createJob(sandbox, { image: jpeg, style: 'coastal' });
    expect(job.status).toBe('queued');
    const seen = new Set<string>();
    for (let i = 0; i < 200 && !seen.has('succeeded'); i++) {
      const { job: now } = (await (await get(sandbox, `/v1/jobs/${job.id}`)).json()) as {
        job: { status: string; updated_at: string };
      };
      expect(now.updated_at).toMatch(ISO_WITH_OFFSET);
      seen.add(now.status);
      await new Promise((r) => setTimeout(r, 30));
    }
    // Set order is first-seen order; a loaded machine may miss the short queued phase, never the order.
    const order = ['queued', 'processing', 'succeeded'];
    expect([...seen]).toEqual(order.filter((s) => seen.has(s)));
    expect(seen.has('processing') && seen.has('succeeded')).toBe(true);
    expect(sandbox.stats.polls.get(job.id)?.length).toBeGreaterThanOrEqual(3);
  });

  it('answers 401 without or with a wrong Bearer key, and accepts any key when apiKey is null', async () => {
    await start();
    const none = await create(sandbox, { image: jpeg, style: 'modern', key: null });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
    const wrong = await create(sandbox, { image: jpeg, style: 'modern', key: 'nope' });
    expect(wrong.status).toBe(401);
    expect((await get({ ...sandbox, apiKey: 'x' }, '/v1/styles')).status).toBe(401);
    expect(sandbox.stats.requests.map((r) => r.hasAuthorization)).toEqual([false, true, true]);
    expect(sandbox.stats.jobs).toBe(0);
    await sandbox.close();

    await start({ apiKey: null });
    expect((await create(sandbox, { image: jpeg, style: 'modern', key: 'whatever' })).status).toBe(202);
    expect((await create(sandbox, { image: jpeg, style: 'modern', key: null })).status).toBe(401);
  });

  it('answers 404 for unknown jobs, modules and paths', async () => {
    await start();
    const job = await get(sandbox, '/v1/jobs/job_000000000000000000000000');
    expect(job.status).toBe(404);
    expect(((await job.json()) as { error: { code: string } }).error.code).toBe('not_found');
    expect((await create(sandbox, { module: 'paint-walls', image: jpeg, style: 'modern' })).status).toBe(404);
    expect((await get(sandbox, '/v2/jobs/x')).status).toBe(404);
    expect((await fetch(`${sandbox.url}/storage/nope/job_x.jpg`)).status).toBe(404);
  });

  it('answers 413 for an image over 10,000,000 bytes and 415 by content, not by name', async () => {
    await start();
    const big = Buffer.alloc(10_000_001, 7);
    jpeg.copy(big, 0, 0, 64);
    const tooBig = await create(sandbox, { image: big, style: 'modern' });
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');

    const text = Buffer.from('this is not an image at all, just text\n'.repeat(10));
    const res = await create(sandbox, { image: text, style: 'modern', filename: 'kitchen.jpg' });
    expect(res.status).toBe(415);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    // A real PNG mislabelled as JPEG is fine.
    const png = await kitchenImage({ format: 'png', width: 64, height: 48 });
    expect((await create(sandbox, { image: png, style: 'modern', filename: 'x.jpg' })).status).toBe(202);
    expect(sandbox.stats.jobs).toBe(1);
  });

  it('answers 422 naming the field', async () => {
    await start();
    const cases: Array<[Parameters<typeof create>[1], string]> = [
      [{ style: 'modern' }, 'image'],
      [{ image: jpeg }, 'style'],
      [{ image: jpeg, style: 'baroque' }, 'style'],
      [{ module: 'kitchen-configurator', image: jpeg, configuration: '[1]' }, 'configuration'],
      [{ module: 'kitchen-configurator', image: jpeg, configuration: '{"door_style":' }, 'configuration'],
    ];
    for (const [input, field] of cases) {
      const res = await create(sandbox, input);
      expect(res.status).toBe(422);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('validation_error');
      expect(error.message.startsWith(`${field}:`)).toBe(true);
    }
    expect(sandbox.stats.creates).toBe(cases.length);
    expect(sandbox.stats.jobs).toBe(0);
  });

  it('counts creates per item (image hash, module, style)', async () => {
    await start();
    const hash = createHash('sha256').update(jpeg).digest('hex');
    await createJob(sandbox, { image: jpeg, style: 'japandi' });
    await createJob(sandbox, { image: jpeg, style: 'japandi' });
    await createJob(sandbox, { image: jpeg, style: 'farmhouse' });
    await createJob(sandbox, { module: 'kitchen-configurator', image: jpeg });
    expect(Object.fromEntries(sandbox.stats.createsByItem)).toEqual({
      [`${hash}|change-style|japandi`]: 2,
      [`${hash}|change-style|farmhouse`]: 1,
      [`${hash}|kitchen-configurator|`]: 1,
    });
    expect([sandbox.stats.creates, sandbox.stats.jobs]).toEqual([4, 4]);
    sandbox.reset();
    expect([sandbox.stats.creates, sandbox.stats.createsByItem.size, sandbox.stats.requests.length]).toEqual([
      0, 0, 0,
    ]);
  });

  it('records every storage request with all its headers, and never the key elsewhere', async () => {
    const lines: string[] = [];
    await start({ apiKey: 'sk_canary_123456', logger: (line) => lines.push(line) });
    const job = await pollUntilDone(sandbox, (await createJob(sandbox, { image: jpeg, style: 'modern' })).id);
    const url = job.result?.image_url ?? '';
    await download(url);
    expect(sandbox.stats.storageRequests).toHaveLength(1);
    const [first] = sandbox.stats.storageRequests;
    expect(first?.origin).toBe('primary');
    expect(first?.headers.host).toBe(new URL(url).host);
    expect(first?.headers.authorization).toBeUndefined();
    // Storage never demands a key, and a client that sends one anyway is recorded doing so.
    await fetch(url, { headers: { authorization: 'Bearer leaked' } });
    expect(sandbox.stats.storageRequests[1]?.headers.authorization).toBe('Bearer leaked');
    const everything = JSON.stringify({ ...sandbox.stats, polls: [...sandbox.stats.polls] });
    expect(everything).not.toContain('sk_canary_123456');
    expect(lines.some((line) => line.startsWith('POST /v1/modules/change-style 202'))).toBe(true);
    expect(lines.join('\n')).not.toContain('sk_canary_123456');
  });

  it('serves every styles shape', async () => {
    const expected: Record<string, (body: unknown) => void> = {
      objects: (b) => expect(b).toEqual(SANDBOX_STYLES.map((s) => ({ ...s }))),
      strings: (b) => expect(b).toEqual(SANDBOX_STYLES.map((s) => s.key)),
      'wrapped-objects': (b) => expect(b).toEqual({ styles: SANDBOX_STYLES.map((s) => ({ ...s })) }),
      'wrapped-strings': (b) => expect(b).toEqual({ styles: SANDBOX_STYLES.map((s) => s.key) }),
      data: (b) => expect(b).toEqual({ data: SANDBOX_STYLES.map((s) => ({ ...s })) }),
      items: (b) => expect(b).toEqual({ items: SANDBOX_STYLES.map((s) => ({ ...s })) }),
      unrecognised: (b) => expect(b).toMatchObject({ catalogue: expect.any(Object) }),
    };
    expect(SANDBOX_STYLES.length).toBeGreaterThanOrEqual(6);
    for (const shape of STYLES_SHAPES) {
      await start({ stylesShape: shape });
      const res = await get(sandbox, '/v1/styles');
      if (shape === 'missing') {
        expect(res.status).toBe(404);
      } else {
        expect(res.status).toBe(200);
        expected[shape]?.(await res.json());
      }
      await sandbox.close();
    }
    await start();
    expect(await (await get(sandbox, '/v1/styles')).json()).toEqual({
      styles: SANDBOX_STYLES.map((s) => ({ ...s })),
    });
  });
});
