/**
 * The worker takes the flags it shares with `run` on the same terms (issue 31: options resolved with
 * one set of validators and the shared bounds named once, src/limits.ts): the same values are refused
 * with the same message, and the worker's `--max-side` has the upper bound `run`'s has.
 */
import { describe, expect, it } from 'vitest';
import { cli } from '../worker/world.js';

/** A service that is never reached: every case here is refused before anything is opened. */
const ENV = { KITCHEN_API_KEY: 'unused-key', KITCHEN_API_BASE_URL: 'http://127.0.0.1:9' };

describe('worker flags are checked as run checks them', () => {
  it.each([
    ['--concurrency', 'abc'],
    ['--concurrency', '0'],
    ['--concurrency', '1001'],
    ['--max-side', '63'],
    ['--max-side', '99999'],
    ['--job-timeout', '0'],
    ['--max-rate', '0'],
  ])('%s %s: exit 2 with the same message as run', async (flag, value) => {
    const run = await cli(['run', 'manifests/sample.csv', '--sandbox', flag, value], {});
    const worker = await cli(['worker', '--redis', 'redis://127.0.0.1:1', flag, value], ENV);
    expect(run.code).toBe(2);
    expect(worker.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^kitchen-batch: ${flag}: expected `));
    expect(worker.stderr).toBe(run.stderr);
  });

  it('the worker-only durations say what they take', async () => {
    const stall = await cli(['worker', '--redis', 'redis://127.0.0.1:1', '--stall-timeout', '0.5'], ENV);
    expect(stall.code).toBe(2);
    expect(stall.stderr).toBe(
      'kitchen-batch: --stall-timeout: expected a number of seconds of at least 1, got "0.5"\n',
    );
    const grace = await cli(['worker', '--redis', 'redis://127.0.0.1:1', '--grace', 'soon'], ENV);
    expect(grace.stderr).toBe(
      'kitchen-batch: --grace: expected a number of seconds of at least 0, got "soon"\n',
    );
  });
});
