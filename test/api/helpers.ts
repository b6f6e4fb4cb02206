/** Shared helpers of the client tests: a real sandbox per test, a client on it, real images, temp dirs. */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type ClientOptions, type CreateJobInput, KitchenClient } from '../../src/api/client.js';
import { ApiError } from '../../src/api/errors.js';
import type { Job } from '../../src/api/wire.js';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.js';

export { kitchenImage } from '../sandbox/helpers.js';

/** A key that looks like a real one, unique per test file run, so a leak is easy to grep for. */
export const API_KEY = `sk_canary_${randomBytes(8).toString('hex')}`;

/** Everything a test opened; {@link closeAll} closes it in afterEach. */
const open: Array<() => Promise<void> | void> = [];

/** Starts a sandbox on a free loopback port with fast jobs and the canary key. */
export async function sandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({
    port: 0,
    apiKey: API_KEY,
    processingMs: 40,
    jitterMs: 0,
    seed: 7,
    ...options,
  });
  open.push(() => sb.close());
  return sb;
}

/** A client on `baseUrl` with the canary key (or the given one). */
export function client(baseUrl: string, options: Partial<ClientOptions> = {}): KitchenClient {
  const c = new KitchenClient({ baseUrl, apiKey: API_KEY, ...options });
  open.push(() => c.close());
  return c;
}

/** A temp folder removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kitchen-api-test-'));
  open.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Closes sandboxes, clients and temp dirs opened by the test, newest first. */
export async function closeAll(): Promise<void> {
  for (const close of open.splice(0).reverse()) await close();
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
