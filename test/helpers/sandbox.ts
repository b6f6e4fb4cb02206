/** The sandbox in tests: one per test, plain-fetch requests against it, and counts from its statistics. */
import { randomBytes } from 'node:crypto';
import { expect, onTestFinished } from 'vitest';
import { type Sandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/index.js';

/** A key that looks like a real one (`sk_canary_` and `bytes` random bytes in hex), so a leak is easy to grep for. */
export function canaryKey(bytes = 8): string {
  return `sk_canary_${randomBytes(bytes).toString('hex')}`;
}

/** Jobs that end in about a quarter of a second: fast tests, but still queued → processing → done. */
export const QUICK_JOBS = {
  processingMs: 200,
  jitterMs: 100,
  queuedMs: 20,
} as const satisfies SandboxOptions;

/** Starts a sandbox on a free loopback port and closes it when the current test finishes. */
export async function sandboxForTest(options: SandboxOptions = {}): Promise<Sandbox> {
  const sandbox = await startSandbox({ port: 0, ...options });
  onTestFinished(() => sandbox.close());
  return sandbox;
}

/** Fields of a create request. */
export interface CreateInput {
  module?: string;
  image?: Uint8Array | null;
  filename?: string;
  imageType?: string;
  style?: string;
  prompt?: string;
  configuration?: string;
  key?: string | null;
  signal?: AbortSignal;
}

/** POSTs a create with a multipart body built by fetch itself. */
export async function create(sandbox: Sandbox, input: CreateInput): Promise<Response> {
  const form = new FormData();
  if (input.image) {
    form.set(
      'image',
      // A copy: @types/node 26 types a BlobPart as a view of an ArrayBuffer, not of any ArrayBufferLike.
      new Blob([new Uint8Array(input.image)], { type: input.imageType ?? 'image/jpeg' }),
      input.filename ?? 'kitchen.jpg',
    );
  }
  if (input.style !== undefined) form.set('style', input.style);
  if (input.prompt !== undefined) form.set('prompt', input.prompt);
  if (input.configuration !== undefined) form.set('configuration', input.configuration);
  const key = input.key === undefined ? sandbox.apiKey : input.key;
  return fetch(`${sandbox.url}/v1/modules/${input.module ?? 'change-style'}`, {
    method: 'POST',
    headers: { accept: 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: form,
    ...(input.signal ? { signal: input.signal } : {}),
  });
}

/** GETs a service path with the sandbox's key. */
export function get(sandbox: Sandbox, path: string, init: { signal?: AbortSignal } = {}): Promise<Response> {
  return fetch(`${sandbox.url}${path}`, {
    headers: { accept: 'application/json', authorization: `Bearer ${sandbox.apiKey}` },
    ...(init.signal ? { signal: init.signal } : {}),
  });
}

/** The job object as the tests read it. */
export interface JobJson {
  id: string;
  module: string;
  status: string;
  created_at?: string;
  updated_at?: string;
  result?: { image_url: string };
  processing_time_ms?: number;
  error?: { code: string; message: string };
}

/** Creates a job and returns it, failing the test on anything but 202. */
export async function createJob(sandbox: Sandbox, input: CreateInput): Promise<JobJson> {
  const res = await create(sandbox, input);
  const body = (await res.json()) as { job: JobJson };
  if (res.status !== 202) throw new Error(`create answered ${res.status}: ${JSON.stringify(body)}`);
  return body.job;
}

/** Polls (quickly: the sandbox does not enforce the 2 s rule) until the job ends or time runs out. */
export async function pollUntilDone(sandbox: Sandbox, id: string, timeoutMs = 5000): Promise<JobJson> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await get(sandbox, `/v1/jobs/${id}`);
    const { job } = (await res.json()) as { job: JobJson };
    if (job.status === 'succeeded' || job.status === 'failed') return job;
    if (performance.now() > deadline) return job;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Creates (POSTs to `/v1/modules/*`) the sandbox received, from request index `since` on. */
export function createRequests(sandbox: Sandbox, since = 0): number {
  return sandbox.stats.requests
    .slice(since)
    .filter((r) => r.method === 'POST' && r.path.startsWith('/v1/modules/')).length;
}

/** Requests to the job endpoints (`/v1/modules/*` creates and `/v1/jobs/*` polls) from index `since` on. */
export function jobRequests(sandbox: Sandbox, since = 0): number {
  return sandbox.stats.requests
    .slice(since)
    .filter((r) => r.path.startsWith('/v1/modules') || r.path.startsWith('/v1/jobs')).length;
}

/**
 * Requests to the service (not storage) that arrived strictly inside a 429's back-off window. The
 * first `inFlightMs` are left out: a request the client sent before the 429 came back may arrive
 * then (300 ms: on two loaded cores a child's event loop can take that long to read the answer).
 */
export function sentDuringBackoff(sandbox: Sandbox, windowMs: number, inFlightMs = 300): number {
  const service = sandbox.stats.requests.filter((r) => r.path.startsWith('/v1/'));
  let violations = 0;
  for (const limited of service.filter((r) => r.status === 429)) {
    violations += service.filter(
      (r) => r.at > limited.at + inFlightMs && r.at < limited.at + windowMs - 50,
    ).length;
  }
  return violations;
}

/** Every two polls of one job arrived at least the 2 s floor apart (less 10 ms: each side reads its own clock). */
export function assertPollFloor(sandbox: Sandbox): void {
  for (const [, times] of sandbox.stats.polls) {
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1990);
  }
}
