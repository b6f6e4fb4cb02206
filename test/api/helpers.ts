/** Shared helpers of the client tests: a real sandbox per test and a client on it, both closed after the test. */
import { onTestFinished } from 'vitest';
import { type ClientOptions, type CreateJobInput, KitchenClient } from '../../src/api/client.js';
import { ApiError } from '../../src/api/errors.js';
import type { Job } from '../../src/api/wire.js';
import type { Sandbox, SandboxOptions } from '../../src/sandbox/index.js';
import { canaryKey, sandboxForTest } from '../helpers/sandbox.js';

/** A key that looks like a real one, unique per test file run, so a leak is easy to grep for. */
export const API_KEY = canaryKey();

/** Starts a sandbox (closed after the test) with fast jobs, seed 7 and the canary key. */
export function sandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  return sandboxForTest({ apiKey: API_KEY, processingMs: 40, jitterMs: 0, seed: 7, ...options });
}

/** A client on `baseUrl` with the canary key (or the given one), closed after the test. */
export function client(baseUrl: string, options: Partial<ClientOptions> = {}): KitchenClient {
  const c = new KitchenClient({ baseUrl, apiKey: API_KEY, ...options });
  onTestFinished(() => c.close());
  return c;
}

/** A change-style submission of `image`. */
export function styleInput(
  image: Uint8Array,
  style = 'modern',
  extra: Partial<CreateJobInput> = {},
): CreateJobInput {
  return {
    module: 'change-style',
    image,
    filename: 'kitchen.jpg',
    contentType: 'image/jpeg',
    style,
    ...extra,
  };
}

/** Polls (fast: the sandbox does not enforce 2 s) until the job ends. */
export async function waitDone(c: KitchenClient, id: string, timeoutMs = 5000): Promise<Job> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const job = await c.getJob(id);
    if (job.status === 'succeeded' || job.status === 'failed') return job;
    if (performance.now() > deadline) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Runs `call`, expects it to reject with an ApiError, and returns that error. */
export async function apiError(call: Promise<unknown>): Promise<ApiError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw new Error(`expected an ApiError, got ${String(error)}`, { cause: error });
  }
  throw new Error('expected an ApiError, but the call succeeded');
}
