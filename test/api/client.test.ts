/**
 * KitchenClient over real HTTP against the sandbox: the happy path of both modules, every HTTP error
 * the service can answer, 429 with each kind of Retry-After, 5xx, resets, refusals, hangs, malformed
 * bodies, every styles shape and every broken result download. No HTTP mocking.
 */
import { createHash } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { normaliseBaseUrl } from '../../src/api/base-url.js';
import { sniffImage } from '../../src/image/format.js';
import { SANDBOX_STYLES, STYLES_SHAPES, type StylesShape } from '../../src/sandbox/index.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenImage } from '../support/images.js';
import { API_KEY, apiError, client, sandbox, styleInput, waitDone } from './helpers.js';

let jpeg: Buffer;
let png: Buffer;

beforeAll(async () => {
  jpeg = await kitchenImage({ width: 320, height: 240 });
  png = await kitchenImage({ width: 300, height: 200, format: 'png' });
});

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** A succeeded job's result URL on a fresh sandbox, and the client and sandbox behind it. */
async function succeededJob(options: { maxDownloadBytes?: number; downloadTimeoutMs?: number } = {}) {
  const sb = await sandbox();
  const c = client(sb.url, options);
  const job = await waitDone(c, (await c.createJob(styleInput(jpeg))).id);
  expect(job.status).toBe('succeeded');
  return { sb, c, url: job.imageUrl ?? '' };
}

describe('KitchenClient: happy path', () => {
  it('creates a change-style job, polls it to succeeded and downloads a whole, verified result', async () => {
    const sb = await sandbox();
    const c = client(`${sb.url}//`);
    const created = await c.createJob(styleInput(jpeg, 'scandinavian', { prompt: 'keep the window' }));
    expect(created).toMatchObject({ module: 'change-style', status: 'queued', imageUrl: null, error: null });
    expect(created.id).toMatch(/^job_/);
    expect(created.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T.*[+-]\d{2}:\d{2}$/);

    const done = await waitDone(c, created.id);
    expect(done.status).toBe('succeeded');
    expect(done.processingTimeMs).toBeGreaterThanOrEqual(0);
    const url = done.imageUrl ?? '';
    expect(url.startsWith(`${sb.url}/storage/`)).toBe(true);

    const dest = (await tempDirForTest()).file('result.part');
    const file = await c.downloadResult(url, dest);
    const written = await readFile(dest);
    expect(file.bytes).toBe(written.length);
    expect(file.sha256).toBe(sha256(written));
    expect(file.format).toBe('jpeg');
    expect(file.contentType).toBe('image/jpeg');
    const meta = await sharp(written).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 320, 240]);
    // The same bytes the storage serves to anyone.
    expect(sha256(Buffer.from(await (await fetch(url)).arrayBuffer()))).toBe(file.sha256);
    expect(file.body).toBeNull();

    // Kept in memory too when asked and no larger than asked (a bucket puts them from there).
    const kept = await c.downloadResult(url, `${dest}.kept`, { keepBytes: written.length });
    expect(kept.body?.equals(written)).toBe(true);
    expect(kept.sha256).toBe(file.sha256);
    expect((await readFile(`${dest}.kept`)).equals(written)).toBe(true);
    const over = await c.downloadResult(url, `${dest}.over`, { keepBytes: written.length - 1 });
    expect(over.body).toBeNull();
    expect((await readFile(`${dest}.over`)).equals(written)).toBe(true);
  });

  it('creates a kitchen-configurator job from a PNG with a configuration object', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const created = await c.createJob({
      module: 'kitchen-configurator',
      image: png,
      filename: 'elevation.png',
      contentType: 'image/png',
      configuration: { door_style: 'shaker', finish: 'matte', units: ['base', 'wall'] },
    });
    expect(created.module).toBe('kitchen-configurator');
    const done = await waitDone(c, created.id);
    expect(done.status).toBe('succeeded');
    const dest = (await tempDirForTest()).file('result.part');
    const file = await c.downloadResult(done.imageUrl ?? '', dest);
    const meta = await sharp(await readFile(dest)).metadata();
    expect(meta.format).toBe(file.format);
    expect([meta.width, meta.height]).toEqual([300, 200]);
    expect((await stat(dest)).size).toBe(file.bytes);
    expect([...sb.stats.createsByItem.entries()]).toEqual([[`${sha256(png)}|kitchen-configurator|`, 1]]);
  });

  it('builds the multipart body afresh on every call: the same input object uploads whole twice', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const input = styleInput(jpeg, 'japandi');
    const first = await c.createJob(input);
    const second = await c.createJob(input);
    expect(first.id).not.toBe(second.id);
    expect(sb.stats.creates).toBe(2);
    // Keyed by the sha256 of the image bytes the sandbox received: both uploads carried the whole image.
    expect(sb.stats.createsByItem.get(`${sha256(jpeg)}|change-style|japandi`)).toBe(2);
  });

  it('reports a failed job with the service code and message', async () => {
    const sb = await sandbox({
      faults: { failRate: 1, failCode: 'not_a_kitchen', failMessage: 'no kitchen here' },
    });
    const c = client(sb.url);
    const done = await waitDone(c, (await c.createJob(styleInput(jpeg))).id);
    expect(done).toMatchObject({ status: 'failed', imageUrl: null });
    expect(done.error).toEqual({ code: 'not_a_kitchen', message: 'no kitchen here' });
  });
});

describe('KitchenClient: permanent HTTP errors', () => {
  it('401 with a wrong key: auth, not transient, the service code, method + path, never the key', async () => {
    const sb = await sandbox();
    const wrongKey = 'sk_wrong_0123456789abcdef';
    const c = client(sb.url, { apiKey: wrongKey });
    const calls = [() => c.createJob(styleInput(jpeg)), () => c.getJob('job_abc'), () => c.listStyles()];
    for (const call of calls) {
      const error = await apiError(call());
      expect(error).toMatchObject({
        kind: 'http',
        status: 401,
        auth: true,
        transient: false,
        rateLimited: false,
      });
      expect(error.serviceCode).toBe('unauthorized');
      expect(error.serviceMessage).toBe('missing or invalid Bearer API key');
      expect(error.mayHaveCreatedJob).toBe(false);
      expect(error.message).toMatch(
        /^(POST \/v1\/modules\/change-style|GET \/v1\/jobs\/job_abc|GET \/v1\/styles): /,
      );
      expect(error.message).toContain('HTTP 401');
      for (const text of [error.message, JSON.stringify(error), String(error.stack)]) {
        expect(text).not.toContain(wrongKey);
        expect(text).not.toContain(API_KEY);
      }
    }
    expect(sb.stats.jobs).toBe(0);
  });

  it('403 on create is auth too', async () => {
    const sb = await sandbox({
      faults: { failCreateWith: { status: 403, code: 'forbidden', message: 'plan expired' } },
    });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg)));
    expect(error).toMatchObject({ status: 403, auth: true, transient: false, serviceCode: 'forbidden' });
    expect(error.serviceMessage).toBe('plan expired');
  });

  it('404 for an unknown job id and an unknown module', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const error = await apiError(c.getJob('job_does_not_exist'));
    expect(error).toMatchObject({
      kind: 'http',
      status: 404,
      transient: false,
      auth: false,
      serviceCode: 'not_found',
    });
    expect(error.request).toEqual({ method: 'GET', path: '/v1/jobs/job_does_not_exist' });
    expect(error.serviceMessage).toContain('job_does_not_exist');
    const module = await apiError(c.createJob({ ...styleInput(jpeg), module: 'paint-walls' }));
    expect(module).toMatchObject({ status: 404, transient: false, mayHaveCreatedJob: false });
    expect(module.serviceMessage).toContain('unknown module');
  });

  it('413 for an image over 10,000,000 bytes', async () => {
    const sb = await sandbox();
    // A real JPEG padded past the limit: the size check comes before any decoding.
    const big = Buffer.concat([jpeg, Buffer.alloc(10_000_001 - jpeg.length)]);
    const error = await apiError(client(sb.url).createJob(styleInput(big)));
    expect(error).toMatchObject({ kind: 'http', status: 413, transient: false, mayHaveCreatedJob: false });
    expect(error.serviceCode).toBe('payload_too_large');
    expect(error.serviceMessage).toContain('10000000');
    expect(sb.stats.jobs).toBe(0);
  });

  it('415 for text bytes sent as an image', async () => {
    const sb = await sandbox();
    const text = Buffer.from('this is a kitchen, honestly\n'.repeat(20));
    const error = await apiError(client(sb.url).createJob(styleInput(text)));
    expect(error).toMatchObject({ status: 415, transient: false, serviceCode: 'unsupported_media_type' });
    expect(error.serviceMessage).toContain('not a JPEG, PNG or WebP');
  });

  it('422 with the service message for a missing style, an unknown style, and a configuration not an object', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const { style: _style, ...noStyle } = styleInput(jpeg);
    const missing = await apiError(c.createJob(noStyle));
    expect(missing).toMatchObject({ status: 422, transient: false, serviceCode: 'validation_error' });
    expect(missing.serviceMessage).toBe('style: required for change-style');
    expect(missing.message).toContain('style: required for change-style');

    const unknown = await apiError(c.createJob(styleInput(jpeg, 'brutalist')));
    expect(unknown.status).toBe(422);
    expect(unknown.serviceMessage).toMatch(/^style: unknown style "brutalist"; valid styles: scandinavian/);

    const config = await apiError(
      c.createJob({
        module: 'kitchen-configurator',
        image: png,
        filename: 'k.png',
        contentType: 'image/png',
        configuration: ['shaker'] as unknown as Record<string, unknown>,
      }),
    );
    expect(config).toMatchObject({ status: 422, transient: false, mayHaveCreatedJob: false });
    expect(config.serviceMessage).toBe('configuration: must be a JSON object');
    expect(sb.stats.jobs).toBe(0);
  });
});

describe('KitchenClient: 429 and Retry-After', () => {
  it('Retry-After in seconds from the token bucket → retryAfterMs = seconds × 1000', async () => {
    const sb = await sandbox({ faults: { rateLimit: { rps: 0.25, burst: 1 }, retryAfter: 'seconds' } });
    const c = client(sb.url);
    await c.listStyles();
    const error = await apiError(c.getJob('job_x'));
    expect(error).toMatchObject({
      kind: 'http',
      status: 429,
      rateLimited: true,
      transient: true,
      auth: false,
    });
    expect(error.serviceCode).toBe('rate_limited');
    expect(error.retryAfterMs).toBe(4000);
    expect(sb.stats.rateLimited).toBe(1);
  });

  it('an HTTP-date Retry-After is measured against the (skewed) server Date, not the local clock', async () => {
    for (const skew of [2 * 3600_000, -2 * 3600_000]) {
      const sb = await sandbox({ faults: { rate429: 1, retryAfter: 'date', dateSkewMs: skew } });
      const error = await apiError(client(sb.url).getJob('job_x'));
      expect(error.status).toBe(429);
      // The sandbox says "one second after my Date"; the local clock is two hours off from that Date.
      expect(error.retryAfterMs).toBe(1000);
    }
  });

  it('no Retry-After → retryAfterMs undefined; garbage → undefined', async () => {
    const sb = await sandbox({ faults: { rate429: 1, retryAfter: 'none' } });
    const c = client(sb.url);
    const none = await apiError(c.listStyles());
    expect(none).toMatchObject({ status: 429, rateLimited: true, transient: true });
    expect(none.retryAfterMs).toBeUndefined();
    sb.setFaults({ retryAfter: 'garbage' });
    const garbage = await apiError(c.getJob('job_x'));
    expect(garbage.status).toBe(429);
    expect(garbage.retryAfterMs).toBeUndefined();
  });

  it('429 on create: transient and the job was certainly not created', async () => {
    const sb = await sandbox({ faults: { rate429: 1 } });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg)));
    expect(error).toMatchObject({
      status: 429,
      transient: true,
      mayHaveCreatedJob: false,
      retryAfterMs: 1000,
    });
    expect(sb.stats.jobs).toBe(0);
  });
});

describe('KitchenClient: 5xx, resets, refusals, hangs', () => {
  it.each([500, 502, 504])('%i on create: transient and the job may have been created', async (status) => {
    const sb = await sandbox({ faults: { errorRate: 1, errorOn: 'create', errorStatuses: [status] } });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg)));
    expect(error).toMatchObject({
      kind: 'http',
      status,
      transient: true,
      auth: false,
      mayHaveCreatedJob: true,
    });
    expect(error.code).toBe('server_error');
    expect(error.serviceCode).toBe('server_error');
  });

  it('503 on create: transient and certainly not created', async () => {
    const sb = await sandbox({ faults: { errorRate: 1, errorOn: 'create', errorStatuses: [503] } });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg)));
    expect(error).toMatchObject({ status: 503, transient: true, mayHaveCreatedJob: false });
  });

  it('5xx on a poll is transient', async () => {
    const sb = await sandbox({ faults: { errorRate: 1, errorOn: 'poll', errorStatuses: [502] } });
    const error = await apiError(client(sb.url).getJob('job_x'));
    expect(error).toMatchObject({ kind: 'http', status: 502, transient: true });
  });

  it('a reset after the body on create: network, ambiguous, and the sandbox DID create the job', async () => {
    const sb = await sandbox({ faults: { resetRate: 1, resetWhen: 'after-body', resetOn: 'create' } });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg, 'coastal')));
    expect(error).toMatchObject({
      kind: 'network',
      errno: 'ECONNRESET',
      transient: true,
      mayHaveCreatedJob: true,
    });
    expect(error.status).toBeUndefined();
    expect(sb.stats.createsByItem.get(`${sha256(jpeg)}|change-style|coastal`)).toBe(1);
  });

  it('a reset mid-upload cannot be told apart from one after the body: also ambiguous (B.9)', async () => {
    const sb = await sandbox({ faults: { resetRate: 1, resetWhen: 'mid-upload', resetOn: 'create' } });
    const error = await apiError(client(sb.url).createJob(styleInput(jpeg)));
    expect(error).toMatchObject({ kind: 'network', transient: true, mayHaveCreatedJob: true });
    expect(sb.stats.jobs).toBe(0);
  });

  it('a reset on a poll is a transient network error', async () => {
    const sb = await sandbox({ faults: { resetRate: 1, resetOn: 'poll' } });
    const error = await apiError(client(sb.url).getJob('job_x'));
    expect(error).toMatchObject({ kind: 'network', transient: true });
  });

  it('connection refused: nothing was sent, so the job was certainly not created', async () => {
    const sb = await sandbox();
    const url = sb.url;
    await sb.close();
    const c = client(url);
    const error = await apiError(c.createJob(styleInput(jpeg)));
    expect(error).toMatchObject({
      kind: 'network',
      errno: 'ECONNREFUSED',
      transient: true,
      mayHaveCreatedJob: false,
    });
    expect(error.request).toEqual({ method: 'POST', path: '/v1/modules/change-style' });
    expect((await apiError(c.getJob('job_x'))).errno).toBe('ECONNREFUSED');
  });

  it('a hung service times out (not before the timeout): kind timeout, a hung POST counts as ambiguous', async () => {
    const sb = await sandbox({ faults: { hangRate: 1 } });
    const c = client(sb.url, { requestTimeoutMs: 300, uploadTimeoutMs: 300 });
    let t0 = performance.now();
    const post = await apiError(c.createJob(styleInput(jpeg)));
    const postMs = performance.now() - t0;
    expect(post).toMatchObject({
      kind: 'timeout',
      code: 'timeout',
      transient: true,
      mayHaveCreatedJob: true,
    });
    expect(postMs).toBeGreaterThanOrEqual(290);
    t0 = performance.now();
    const poll = await apiError(c.getJob('job_x'));
    const pollMs = performance.now() - t0;
    expect(poll).toMatchObject({ kind: 'timeout', transient: true });
    expect(pollMs).toBeGreaterThanOrEqual(290);
    expect(sb.stats.requests.map((r) => r.fault)).toEqual(['hang', 'hang']);
  });

  it('the caller’s abort is passed through as is, not turned into a service failure', async () => {
    const sb = await sandbox({ faults: { hangRate: 1 } });
    const c = client(sb.url);
    const reason = new Error('shutting down');
    const controller = new AbortController();
    setTimeout(() => controller.abort(reason), 100);
    await expect(c.getJob('job_x', { signal: controller.signal })).rejects.toBe(reason);
  });
});

describe('KitchenClient: malformed job bodies', () => {
  it('malformed poll bodies (bad JSON, no id, no status) are transient protocol errors', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const job = await c.createJob(styleInput(jpeg));
    sb.setFaults({ malformedRate: 1 });
    const messages = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const error = await apiError(c.getJob(job.id));
      expect(error).toMatchObject({ kind: 'protocol', code: 'bad_response', transient: true, auth: false });
      expect(error.status).toBe(200);
      messages.add(error.message.replaceAll(job.id, '<id>'));
    }
    // All three malformed variants were seen and each says what was wrong.
    expect([...messages].sort()).toEqual([
      'GET /v1/jobs/<id>: job <id>: job.status is missing or not a string',
      'GET /v1/jobs/<id>: job.id is missing or not a string',
      expect.stringMatching(/^GET \/v1\/jobs\/<id>: response is not JSON \(HTTP 200, \d+ bytes\)$/),
    ]);
  });

  it('an unknown status value is a transient protocol error, never "succeeded"', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const job = await c.createJob(styleInput(jpeg));
    sb.setFaults({ badStatusRate: 1 });
    const error = await apiError(c.getJob(job.id));
    expect(error).toMatchObject({ kind: 'protocol', transient: true });
    expect(error.message).toContain('unknown job.status "exploded"');
  });
});

describe('KitchenClient: styles', () => {
  const understood = STYLES_SHAPES.filter((s) => s !== 'unrecognised' && s !== 'missing');

  it.each(understood)('reads the %s shape', async (shape: StylesShape) => {
    const sb = await sandbox({ stylesShape: shape });
    const styles = await client(sb.url).listStyles();
    expect(styles?.map((s) => s.key)).toEqual(SANDBOX_STYLES.map((s) => s.key));
    const named = shape !== 'strings' && shape !== 'wrapped-strings';
    expect(styles?.[0]?.name).toBe(named ? 'Scandinavian' : null);
  });

  it('an answer whose shape is not understood → null', async () => {
    const sb = await sandbox({ stylesShape: 'unrecognised' });
    expect(await client(sb.url).listStyles()).toBeNull();
  });

  it('a missing endpoint → a permanent 404 (callers then skip the style check, as for null)', async () => {
    const sb = await sandbox({ stylesShape: 'missing' });
    const error = await apiError(client(sb.url).listStyles());
    expect(error).toMatchObject({ status: 404, transient: false, auth: false });
  });
});

describe('KitchenClient: result downloads', () => {
  async function dest(): Promise<string> {
    return (await tempDirForTest()).file('result.part');
  }

  it('leaves no listener on the caller’s signal behind: a long run must not keep every request alive', async () => {
    const { c, url } = await succeededJob();
    const signal = new AbortController().signal;
    const tmp = await tempDirForTest('kb-client-');
    for (let i = 0; i < 5; i++) {
      await c.getJob((await c.createJob(styleInput(jpeg), { signal })).id, { signal });
      await c.downloadResult(url, tmp.file(`r${i}.jpg`), { signal });
    }
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('404 → ApiError status 404, file removed', async () => {
    const { sb, c, url } = await succeededJob();
    sb.setFaults({ resultFault: 'not-found' });
    const file = await dest();
    const error = await apiError(c.downloadResult(url, file));
    expect(error).toMatchObject({ kind: 'http', status: 404, transient: false, serviceCode: 'not_found' });
    expect(existsSync(file)).toBe(false);
  });

  it('410 for an expired URL', async () => {
    const { sb, c, url } = await succeededJob();
    sb.setFaults({ resultTtlMs: 0 });
    const error = await apiError(c.downloadResult(url, await dest()));
    expect(error).toMatchObject({ status: 410, serviceCode: 'expired', transient: false });
  });

  it('an HTML page with 200 → protocol error, file removed', async () => {
    const { sb, c, url } = await succeededJob();
    sb.setFaults({ resultFault: 'wrong-type' });
    const file = await dest();
    const error = await apiError(c.downloadResult(url, file));
    expect(error).toMatchObject({ kind: 'protocol', transient: true });
    expect(error.message).toContain('not a JPEG, PNG or WebP image (content-type text/html');
    expect(existsSync(file)).toBe(false);
  });

  it('a body cut short → network error, file removed', async () => {
    const { sb, c, url } = await succeededJob();
    sb.setFaults({ resultFault: 'truncated' });
    const file = await dest();
    const error = await apiError(c.downloadResult(url, file));
    expect(error).toMatchObject({ kind: 'network', transient: true });
    expect(existsSync(file)).toBe(false);
  });

  it('a close-delimited body cut short ends without an error: lengthChecked is false, so the caller must decode', async () => {
    const { sb, c, url } = await succeededJob();
    const whole = await c.downloadResult(url, await dest());
    expect(whole.lengthChecked).toBe(true);
    sb.setFaults({ resultFault: 'truncated-unsized' });
    const file = await dest();
    const cut = await c.downloadResult(url, file);
    expect(cut.lengthChecked).toBe(false);
    expect(cut.bytes).toBe(Math.floor(whole.bytes / 2));
    expect(existsSync(file)).toBe(true);
  });

  it('an oversized body → aborted at the byte cap, file removed', async () => {
    const { sb, c, url } = await succeededJob({ maxDownloadBytes: 200_000 });
    sb.setFaults({ resultFault: 'oversized' });
    const file = await dest();
    const error = await apiError(c.downloadResult(url, file));
    expect(error).toMatchObject({ kind: 'protocol' });
    expect(error.message).toContain('larger than the 200000-byte cap');
    expect(existsSync(file)).toBe(false);
  });

  it('a slow drip hits the total deadline, not only an idle timeout; file removed', async () => {
    const { sb, c, url } = await succeededJob({ downloadTimeoutMs: 600 });
    sb.setFaults({ resultFault: 'slow-drip' });
    const file = await dest();
    const error = await apiError(c.downloadResult(url, file));
    // The drip would outlast the test; only the total deadline can end it with a timeout.
    expect(error).toMatchObject({ kind: 'timeout', transient: true });
    expect(existsSync(file)).toBe(false);
  });

  it('follows a cross-origin redirect to the image', async () => {
    const { sb, c, url } = await succeededJob();
    sb.setFaults({ resultFault: 'redirect-cross-origin' });
    const file = await dest();
    const result = await c.downloadResult(url, file);
    expect(result.sha256).toBe(sha256(await readFile(file)));
    expect(sb.stats.storageRequests.map((r) => r.origin)).toEqual(['primary', 'secondary']);
  });

  it('refuses non-http(s) schemes and non-URLs without touching the network or the file', async () => {
    const sb = await sandbox();
    const c = client(sb.url);
    const file = await dest();
    for (const url of [
      'file:///etc/passwd',
      'ftp://127.0.0.1/x.jpg',
      'data:image/png;base64,AAAA',
      'not a url',
    ]) {
      const error = await apiError(c.downloadResult(url, file));
      expect(error).toMatchObject({ kind: 'protocol' });
      expect(existsSync(file)).toBe(false);
    }
    expect(sb.stats.requests).toHaveLength(0);
  });
});

describe('client helpers', () => {
  it('normaliseBaseUrl trims slashes and refuses bad URLs, other schemes and credentials', () => {
    expect(normaliseBaseUrl('http://127.0.0.1:8080///')).toBe('http://127.0.0.1:8080');
    expect(normaliseBaseUrl('https://api.example.com/kitchen/')).toBe('https://api.example.com/kitchen');
    expect(() => normaliseBaseUrl('api.example.com')).toThrow(/not a valid URL/);
    expect(() => normaliseBaseUrl('ftp://api.example.com')).toThrow(/http or https/);
    expect(() => normaliseBaseUrl('https://user:pw@api.example.com')).toThrow(/credentials/);
  });

  it('sniffImage tells JPEG, PNG and WebP by magic bytes', async () => {
    const webp = await sharp(jpeg).webp().toBuffer();
    expect(sniffImage(jpeg)).toBe('jpeg');
    expect(sniffImage(png)).toBe('png');
    expect(sniffImage(webp)).toBe('webp');
    expect(sniffImage(Buffer.from('<!doctype html>'))).toBeNull();
    expect(sniffImage(jpeg.subarray(0, 2))).toBeNull();
  });
});
