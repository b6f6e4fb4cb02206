/**
 * Issue 34's estimate before the night (docs/contract.md#plan): a `run` that meets the key's rate
 * limit remembers the rate it learnt per service URL (never the key); a following `plan` says how long
 * the new jobs take at it and whether `--max-duration` fits; `--json` carries the same. The run is
 * real, against a rate-limited sandbox on 127.0.0.1; the cache folder is the test's own.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli.js';
import { estimatePlan } from '../../src/commands/plan-estimate.js';
import { ratesFile, recallRate, rememberRate } from '../../src/state/rates.js';
import { textSink } from '../helpers/cli.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';
import { tempDirForTest } from '../helpers/tmp.js';
import { kitchenJpeg } from '../support/images.js';

async function cli(args: string[], env: NodeJS.ProcessEnv) {
  const stdout = textSink();
  const stderr = textSink();
  const code = await main(args, { stdout, stderr, env, cwd: process.cwd() });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** A manifest of `n` kitchens in `dir` (ids `<prefix><i>`, style modern). */
async function catalogue(dir: string, name: string, n: number): Promise<string> {
  let text = 'id,image,module,style\n';
  for (let i = 0; i < n; i++) {
    const image = path.join(dir, `${name}-${i}.jpg`);
    await writeFile(image, await kitchenJpeg(i + 1, 160, 120, 'tinted'));
    text += `${name}${i},${image},change-style,modern\n`;
  }
  const file = path.join(dir, `${name}.csv`);
  await writeFile(file, text);
  return file;
}

describe('estimatePlan (pure)', () => {
  const remembered = { rate_per_second: 4, learnt_at: '2026-11-27T01:00:00.000Z' };

  it('two requests a job at the remembered rate; fits or not against --max-duration', () => {
    const fits = estimatePlan({
      jobs: 100,
      concurrency: 8,
      remembered,
      maxRate: null,
      maxDurationMs: 60_000,
    });
    expect(fits).toMatchObject({
      jobs: 100,
      rate_per_second: 4,
      rate_source: 'learnt',
      seconds: 50,
      fits: true,
    });
    const short = estimatePlan({
      jobs: 100,
      concurrency: 8,
      remembered,
      maxRate: null,
      maxDurationMs: 49_000,
    });
    expect(short).toMatchObject({ seconds: 50, max_duration_seconds: 49, fits: false });
  });

  it('--max-rate caps a remembered rate, stands in for a missing one; with neither there is no figure', () => {
    expect(
      estimatePlan({ jobs: 10, concurrency: 8, remembered, maxRate: 2, maxDurationMs: null }),
    ).toMatchObject({
      rate_per_second: 2,
      rate_source: 'learnt',
      seconds: 10,
      fits: null,
    });
    expect(
      estimatePlan({ jobs: 10, concurrency: 8, remembered: null, maxRate: 5, maxDurationMs: null }),
    ).toMatchObject({ rate_per_second: 5, rate_source: 'max_rate', learnt_at: null, seconds: 4 });
    expect(
      estimatePlan({ jobs: 10, concurrency: 8, remembered: null, maxRate: null, maxDurationMs: 1000 }),
    ).toMatchObject({ rate_per_second: null, rate_source: null, seconds: null, fits: null });
  });
});

describe('rates.json', () => {
  it('keyed by the base URL without credentials; a corrupt file is no rates and is replaced whole', async () => {
    const tmp = await tempDirForTest('kb-rates-');
    const env = { XDG_CACHE_HOME: tmp.dir };
    await rememberRate('https://user:pw@api.example.test/', 2.71234, env);
    expect(await recallRate('https://api.example.test', env)).toMatchObject({ rate_per_second: 2.712 });
    const text = await readFile(ratesFile(env), 'utf8');
    expect(text).not.toContain('pw');
    await writeFile(ratesFile(env), '{"https://api.example.test": {"rate_per_sec');
    expect(await recallRate('https://api.example.test', env)).toBeNull();
    await rememberRate('https://other.example.test', 2, env);
    expect(Object.keys(JSON.parse(await readFile(ratesFile(env), 'utf8')))).toEqual([
      'https://other.example.test',
    ]);
  });
});

describe('a run learns the rate, plan estimates with it', () => {
  it('run on a rate-limited sandbox remembers its rate; plan (table and --json) says the time and the fit', async () => {
    const tmp = await tempDirForTest('kb-plan-estimate-');
    const key = canaryKey();
    const sandbox = await sandboxForTest({
      apiKey: key,
      processingMs: 100,
      jitterMs: 0,
      queuedMs: 0,
      faults: { rateLimit: { rps: 4, burst: 4 }, retryAfter: 'seconds' },
    });
    const env = { KITCHEN_API_KEY: key, KITCHEN_API_BASE_URL: sandbox.url, XDG_CACHE_HOME: tmp.dir };
    const next = await catalogue(tmp.dir, 'next', 40);

    // Before any run: no rate known, said so.
    const before = await cli(['plan', next, '--out', path.join(tmp.dir, 'out-next'), '--json'], env);
    expect(before.code, before.stderr).toBe(0);
    expect(JSON.parse(before.stdout).estimate).toMatchObject({ jobs: 40, rate_per_second: null, fits: null });

    const first = await catalogue(tmp.dir, 'first', 16);
    const run = await cli(['run', first, '--out', path.join(tmp.dir, 'out-first'), '--no-progress'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(sandbox.stats.requests.some((r) => r.status === 429)).toBe(true);
    const file = await readFile(ratesFile(env), 'utf8');
    expect(file).not.toContain(key);
    const remembered = await recallRate(sandbox.url, env);
    expect(remembered?.rate_per_second).toBeGreaterThan(0);
    expect(remembered?.rate_per_second).toBeLessThanOrEqual(8);

    const out = path.join(tmp.dir, 'out-next');
    const table = await cli(['plan', next, '--out', out, '--max-duration', '6h'], env);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toContain(
      `estimate: 40 jobs to submit at ${remembered?.rate_per_second} requests/s`,
    );
    expect(table.stdout).toContain(`the rate learnt ${remembered?.learnt_at}`);
    expect(table.stdout).toContain('fits --max-duration 6 h 00 min');

    const short = await cli(['plan', next, '--out', out, '--max-duration', '5s', '--json'], env);
    expect(short.code, short.stderr).toBe(0);
    const estimate = JSON.parse(short.stdout).estimate;
    expect(estimate).toMatchObject({
      jobs: 40,
      rate_per_second: remembered?.rate_per_second,
      rate_source: 'learnt',
      learnt_at: remembered?.learnt_at,
      max_duration_seconds: 5,
      fits: false,
    });
    expect(estimate.seconds).toBe(Math.ceil(80 / (remembered?.rate_per_second ?? 1)));
    const shortTable = await cli(['plan', next, '--out', out, '--max-duration', '5s'], env);
    expect(shortTable.stdout).toContain('does NOT fit --max-duration 5 s');
  }, 90_000);
});
