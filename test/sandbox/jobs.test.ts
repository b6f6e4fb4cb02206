/**
 * Unit tests of the sandbox's job state machine on a fake clock: no server, no timers. Results are
 * rendered for real (with sharp), so the tests wait for `job.rendered` where a result is needed.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { createRng, DEFAULT_FAULTS } from '../../src/sandbox/faults.js';
import { type JobFaults, type JobRecord, JobStore, type JobStoreOptions } from '../../src/sandbox/jobs.js';

const BASE_URL = 'http://sandbox.test';
/** Wall clock at the start of every test: 2026-03-01T12:00:00Z. */
const WALL_START = Date.UTC(2026, 2, 1, 12, 0, 0);
/** Monotonic clock at the start of every test (not 0, so no code can get away with assuming 0). */
const MONO_START = 5_000;

/** A PRNG that returns exactly these values, in order, and fails the test if asked for more. */
function scripted(...values: number[]): () => number {
  let next = 0;
  return () => {
    const value = values[next];
    if (value === undefined) throw new Error(`rng drawn ${next + 1} times, only ${values.length} scripted`);
    next += 1;
    return value;
  };
}

interface World {
  store: JobStore;
  faults: JobFaults;
  clock: { mono: number; wall: number };
  /** Moves both clocks forward by `ms`. */
  advance(ms: number): void;
}

function world(options: Partial<JobStoreOptions> = {}, faults: Partial<JobFaults> = {}): World {
  const clock = { mono: MONO_START, wall: WALL_START };
  const knobs: JobFaults = { ...DEFAULT_FAULTS, ...faults };
  const store = new JobStore({
    processingMs: 1000,
    jitterMs: 0,
    queuedMs: 200,
    maxJobs: 100,
    now: () => clock.mono,
    wallNow: () => clock.wall,
    rng: createRng(1),
    faults: () => knobs,
    ...options,
  });
  return {
    store,
    faults: knobs,
    clock,
    advance(ms) {
      clock.mono += ms;
      clock.wall += ms;
    },
  };
}

let jpeg: Buffer;
let pngWithAlpha: Buffer;
beforeAll(async () => {
  jpeg = await sharp({ create: { width: 48, height: 32, channels: 3, background: '#2e6b8a' } })
    .jpeg()
    .toBuffer();
  pngWithAlpha = await sharp({
    create: { width: 48, height: 32, channels: 4, background: { r: 240, g: 230, b: 210, alpha: 0.5 } },
  })
    .png()
    .toBuffer();
});

/** Creates a change-style job and waits for its render (the clock does not move meanwhile). */
async function rendered(w: World, image: Buffer = jpeg): Promise<JobRecord> {
  const job = w.store.create('change-style', 'industrial', image);
  await job.rendered;
  return job;
}

/** The `<token>` and `<file>` of a result URL. */
function tokenOf(url: string | undefined): { token: string; file: string } {
  const match = /^http:\/\/sandbox\.test\/storage\/([0-9a-f]{32})\/(job_[0-9a-f]{24}\.(?:jpg|png))$/.exec(
    url ?? '',
  );
  if (!match) throw new Error(`not a result URL: ${url}`);
  return { token: match[1] ?? '', file: match[2] ?? '' };
}

describe('timeline', () => {
  it('reads queued, then processing, then succeeded at exact clock times', async () => {
    const w = world();
    const job = await rendered(w);
    expect(job.renderedAt).toBe(MONO_START);
    const statusAt = (offset: number) => {
      w.clock.mono = MONO_START + offset;
      return w.store.view(job, BASE_URL).status;
    };
    expect([0, 199].map(statusAt)).toEqual(['queued', 'queued']);
    expect([200, 1199].map(statusAt)).toEqual(['processing', 'processing']);
    expect([1200, 60_000].map(statusAt)).toEqual(['succeeded', 'succeeded']);

    w.clock.mono = MONO_START + 1200;
    const view = w.store.view(job, BASE_URL);
    expect(view.processing_time_ms).toBe(1000);
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 1200);
    expect(tokenOf(view.result?.image_url).file).toBe(`${job.id}.jpg`);
    expect(view.error).toBeUndefined();
    // Wire key order of a succeeded job.
    expect(Object.keys(view)).toEqual([
      'id',
      'module',
      'created_at',
      'status',
      'updated_at',
      'result',
      'processing_time_ms',
    ]);
  });

  it('keeps a job processing past its time while the render runs, and ends it when the render does', async () => {
    const w = world();
    const job = w.store.create('change-style', 'scandinavian', jpeg);
    w.clock.mono = MONO_START + 4000;
    // The render is asynchronous: it cannot have finished yet.
    expect(w.store.view(job, BASE_URL).status).toBe('processing');
    await job.rendered;
    const view = w.store.view(job, BASE_URL);
    expect(view.status).toBe('succeeded');
    expect(view.processing_time_ms).toBe(4000 - 200);
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 4000);
  });

  it('draws the jitter first and spreads the processing time by ± jitterMs', async () => {
    // 0.75 -> +0.5 * jitter; failRate and stuckRate are 0, so nothing else is drawn.
    const w = world({ jitterMs: 400, rng: scripted(0.75) });
    const job = await rendered(w);
    expect(job.doneAt - job.queuedUntil).toBe(1200);
    w.clock.mono = MONO_START + 200 + 1199;
    expect(w.store.view(job, BASE_URL).status).toBe('processing');
    w.clock.mono = MONO_START + 200 + 1200;
    expect(w.store.view(job, BASE_URL).processing_time_ms).toBe(1200);

    // The processing time never goes below 0.
    const short = world({ processingMs: 100, jitterMs: 400, rng: scripted(0) });
    const job2 = short.store.create('change-style', 'industrial', jpeg);
    expect(job2.doneAt).toBe(job2.queuedUntil);
    await job2.rendered;
  });

  it('shows a PNG result for an image with alpha, and the module as created', async () => {
    const w = world();
    const job = w.store.create('kitchen-configurator', null, pngWithAlpha);
    await job.rendered;
    w.advance(1200);
    const view = w.store.view(job, BASE_URL);
    expect(view).toMatchObject({ module: 'kitchen-configurator', status: 'succeeded' });
    expect(tokenOf(view.result?.image_url).file).toBe(`${job.id}.png`);
    expect(job.result?.contentType).toBe('image/png');
  });
});

describe('result modes', () => {
  it('render-once renders each upload, module and style once and hands the kept result to repeated jobs', async () => {
    const w = world({ results: 'render-once' });
    const other = await sharp({ create: { width: 48, height: 32, channels: 3, background: '#8a2e4b' } })
      .jpeg()
      .toBuffer();
    const first = await rendered(w);
    const again = await rendered(w);
    expect(again.id).not.toBe(first.id);
    // The same object: kept, not rendered again.
    expect(again.result).toBe(first.result);
    const otherStyle = w.store.create('change-style', 'japandi', jpeg);
    const otherImage = w.store.create('change-style', 'industrial', other);
    const configurator = w.store.create('kitchen-configurator', null, jpeg);
    await Promise.all([otherStyle.rendered, otherImage.rendered, configurator.rendered]);
    const results = [first, otherStyle, otherImage, configurator].map((job) => job.result!.data);
    expect(new Set(results.map((data) => data.toString('base64'))).size).toBe(4);
    // The same image as `render` makes it.
    const rendering = await rendered(world({ results: 'render' }));
    expect(rendering.result!.data.equals(first.result!.data)).toBe(true);
    expect(rendering.result).not.toBe(first.result);
  });

  it('echo hands back the upload itself', async () => {
    const job = await rendered(world({ results: 'echo' }));
    expect(job.result!.data.equals(jpeg)).toBe(true);
    expect(job.result!.contentType).toBe('image/jpeg');
  });
});

describe('fates', () => {
  it('fails a job when the fail roll strikes, with the configured code and message', () => {
    const w = world(
      { rng: scripted(0.5, 0.29) },
      { failRate: 0.3, failCode: 'nsfw', failMessage: 'Refused.' },
    );
    const job = w.store.create('change-style', 'industrial', jpeg);
    expect(job.fate).toBe('fail');
    w.clock.mono = MONO_START + 1199;
    expect(w.store.view(job, BASE_URL).status).toBe('processing');
    w.clock.mono = MONO_START + 1200;
    const view = w.store.view(job, BASE_URL);
    expect(view).toMatchObject({ status: 'failed', error: { code: 'nsfw', message: 'Refused.' } });
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 1200);
    expect(view.result).toBeUndefined();
    expect(view.processing_time_ms).toBeUndefined();
    // The knobs are read when the job is shown, as the sandbox always did.
    w.faults.failCode = 'changed';
    expect(w.store.view(job, BASE_URL).error?.code).toBe('changed');
  });

  it('keeps a job processing forever when the stuck roll strikes, and draws no fail roll at rate 0', () => {
    // Exactly two draws: jitter and the stuck roll (scripted() throws on a third).
    const w = world({ rng: scripted(0.5, 0.1) }, { failRate: 0, stuckRate: 0.2 });
    const job = w.store.create('change-style', 'industrial', jpeg);
    expect(job.fate).toBe('stuck');
    w.clock.mono = MONO_START + 86_400_000;
    const view = w.store.view(job, BASE_URL);
    expect(view.status).toBe('processing');
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 200);
  });

  it('succeeds when neither roll strikes', async () => {
    const w = world({ rng: scripted(0.5, 0.3, 0.2) }, { failRate: 0.3, stuckRate: 0.2 });
    const job = w.store.create('change-style', 'industrial', jpeg);
    expect(job.fate).toBe('succeed');
    await job.rendered;
  });

  it('replays the same fates from the same seed, at about the configured rates', async () => {
    const fates = async (seed: number) => {
      const w = world({ rng: createRng(seed), maxJobs: 1000 }, { failRate: 0.3, stuckRate: 0.2 });
      const jobs = Array.from({ length: 150 }, () => w.store.create('change-style', 'industrial', jpeg));
      await Promise.all(jobs.map((job) => job.rendered));
      return jobs.map((job) => job.fate);
    };
    const first = await fates(42);
    expect(await fates(42)).toEqual(first);
    expect(await fates(43)).not.toEqual(first);
    const count = (fate: string) => first.filter((f) => f === fate).length;
    // 150 jobs: fail ~ 0.3 * 150 = 45, stuck ~ 0.7 * 0.2 * 150 = 21 (bounds about 3.5 sigma).
    expect(count('fail')).toBeGreaterThan(25);
    expect(count('fail')).toBeLessThan(65);
    expect(count('stuck')).toBeGreaterThan(6);
    expect(count('stuck')).toBeLessThan(36);
  });

  it('fails a job whose image passes the magic-byte check but cannot be decoded', async () => {
    const w = world();
    const corrupt = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(200, 0x5a)]);
    const job = await rendered(w, corrupt);
    w.advance(1200);
    const view = w.store.view(job, BASE_URL);
    expect(view.status).toBe('failed');
    expect(view.error?.code).toBe('invalid_image');
    expect(view.error?.message).toMatch(/^the image could not be decoded: \S/);
    expect(w.store.lookupResult('0'.repeat(32), `${job.id}.jpg`)).toEqual({ kind: 'not-found' });
  });
});

describe('result URLs', () => {
  it('keeps one URL until resultTtlMs, then answers expired and hands out a new one on the next view', async () => {
    const w = world({}, { resultTtlMs: 1000 });
    const job = await rendered(w);
    w.advance(1200);
    const first = tokenOf(w.store.view(job, BASE_URL).result?.image_url);
    expect(w.store.lookupResult(first.token, first.file)).toMatchObject({ kind: 'ok', job });

    w.advance(999);
    expect(tokenOf(w.store.view(job, BASE_URL).result?.image_url)).toEqual(first);
    expect(w.store.lookupResult(first.token, first.file).kind).toBe('ok');

    w.advance(1);
    // Expired, not unknown: the old URL answers 410 before and after the job is viewed again.
    expect(w.store.lookupResult(first.token, first.file)).toEqual({ kind: 'expired' });
    const second = tokenOf(w.store.view(job, BASE_URL).result?.image_url);
    expect(second.token).not.toBe(first.token);
    expect(second.file).toBe(first.file);
    expect(job.tokens).toEqual([first.token, second.token]);
    expect(w.store.lookupResult(first.token, first.file)).toEqual({ kind: 'expired' });
    const ok = w.store.lookupResult(second.token, second.file);
    expect(ok.kind === 'ok' && ok.result.data.equals(job.result?.data ?? Buffer.alloc(0))).toBe(true);

    w.advance(999);
    expect(w.store.lookupResult(second.token, second.file).kind).toBe('ok');
  });

  it('never rotates or expires a URL when resultTtlMs is null', async () => {
    const w = world();
    const job = await rendered(w);
    w.advance(1200);
    const first = tokenOf(w.store.view(job, BASE_URL).result?.image_url);
    w.advance(365 * 86_400_000);
    expect(tokenOf(w.store.view(job, BASE_URL).result?.image_url)).toEqual(first);
    expect(w.store.lookupResult(first.token, first.file).kind).toBe('ok');
  });

  it('knows only a token with its own file name, and issues none before the job succeeded', async () => {
    const w = world();
    const job = await rendered(w);
    expect(w.store.view(job, BASE_URL).result).toBeUndefined();
    expect(job.tokens).toEqual([]);
    w.advance(1200);
    const { token, file } = tokenOf(w.store.view(job, BASE_URL).result?.image_url);
    expect(w.store.lookupResult(token, file).kind).toBe('ok');
    expect(w.store.lookupResult(token, file.replace('.jpg', '.png'))).toEqual({ kind: 'not-found' });
    expect(w.store.lookupResult(token, undefined)).toEqual({ kind: 'not-found' });
    expect(w.store.lookupResult('f'.repeat(32), file)).toEqual({ kind: 'not-found' });
  });
});

describe('eviction', () => {
  it('forgets the oldest jobs beyond maxJobs, and their result URLs with them', async () => {
    const w = world({ maxJobs: 2 });
    const oldest = await rendered(w);
    w.advance(1200);
    const { token, file } = tokenOf(w.store.view(oldest, BASE_URL).result?.image_url);
    const second = w.store.create('change-style', 'industrial', jpeg);
    expect(w.store.get(oldest.id)).toBe(oldest);
    expect(w.store.lookupResult(token, file).kind).toBe('ok');

    const third = w.store.create('change-style', 'industrial', jpeg);
    expect(w.store.get(oldest.id)).toBeUndefined();
    expect(w.store.get(second.id)).toBe(second);
    expect(w.store.get(third.id)).toBe(third);
    expect(w.store.lookupResult(token, file)).toEqual({ kind: 'not-found' });
    await Promise.all([second.rendered, third.rendered]);
  });

  it('gives every job its own unguessable id', () => {
    const w = world({}, { failRate: 1 });
    const ids = Array.from({ length: 50 }, () => w.store.create('change-style', 'industrial', jpeg).id);
    expect(new Set(ids).size).toBe(50);
    for (const id of ids) expect(id).toMatch(/^job_[0-9a-f]{24}$/);
  });
});

describe('timestamps', () => {
  it('stamps created_at from the wall clock at creation and updated_at along the monotonic clock', async () => {
    const w = world();
    const job = await rendered(w);
    // A wall-clock step (NTP, DST, faketime) after creation moves neither timestamp.
    w.clock.wall += 3_600_000;
    w.clock.mono += 200;
    const view = w.store.view(job, BASE_URL);
    expect(view.status).toBe('processing');
    expect(Date.parse(view.created_at)).toBe(WALL_START);
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 200);
    // ISO 8601 with milliseconds and an explicit offset.
    expect(view.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$/);
  });

  it('shows a queued job with updated_at equal to created_at', () => {
    const w = world({}, { failRate: 1 });
    w.clock.wall = WALL_START + 123;
    const job = w.store.create('change-style', 'industrial', jpeg);
    w.advance(150);
    const view = w.store.view(job, BASE_URL);
    expect(view.status).toBe('queued');
    expect(Date.parse(view.created_at)).toBe(WALL_START + 123);
    expect(view.updated_at).toBe(view.created_at);
  });

  it('shifts every timestamp by dateSkewMs, read when the job is shown', async () => {
    const w = world({}, { dateSkewMs: -90_000 });
    const job = await rendered(w);
    expect(Date.parse(w.store.view(job, BASE_URL).created_at)).toBe(WALL_START - 90_000);
    w.advance(1200);
    const view = w.store.view(job, BASE_URL);
    expect(Date.parse(view.created_at)).toBe(WALL_START - 90_000);
    expect(Date.parse(view.updated_at)).toBe(WALL_START + 1200 - 90_000);
    w.faults.dateSkewMs = 7_000;
    const later = w.store.view(job, BASE_URL);
    expect(Date.parse(later.created_at)).toBe(WALL_START + 7_000);
    expect(Date.parse(later.updated_at)).toBe(WALL_START + 1200 + 7_000);
  });
});
