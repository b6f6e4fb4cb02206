import { expect } from 'vitest';
import { SourceError } from '../../../src/storage/http/errors.js';
import type { FetchSourceOptions } from '../../../src/storage/http/fetch.js';

/**
 * Loopback is the test server's address, so the tests opt in. Backoff is short and fixed; every wait
 * is recorded (and really slept, so the server's arrival times show it).
 */
export function options(extra: FetchSourceOptions = {}): FetchSourceOptions & { waits: number[] } {
  const waits: number[] = [];
  return {
    allowPrivate: true,
    backoffMs: (retry) => retry * 10,
    sleep: async (ms) => {
      waits.push(ms);
      await new Promise((resolve) => setTimeout(resolve, ms));
    },
    ...extra,
    waits,
  };
}

/** The rejection of `promise`, which must be a `SourceError`. */
export async function failure(promise: Promise<unknown>): Promise<SourceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SourceError);
  return error as SourceError;
}
