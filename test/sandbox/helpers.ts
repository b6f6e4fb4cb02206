/** Shared helpers of the sandbox tests: real images and real HTTP against a running sandbox. */
import sharp from 'sharp';
import type { Sandbox } from '../../src/sandbox/index.js';

/** A synthetic "kitchen": coloured blocks so styles have colour and structure to change. */
export async function kitchenImage(
  options: { width?: number; height?: number; format?: 'jpeg' | 'png'; alpha?: boolean } = {},
): Promise<Buffer> {
  const width = options.width ?? 640;
  const height = options.height ?? 480;
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
    `<rect width="100%" height="100%" fill="${options.alpha ? 'rgba(240,230,210,0.6)' : '#f0e6d2'}"/>` +
    `<rect x="0" y="${height * 0.7}" width="${width}" height="${height * 0.3}" fill="#8b5a2b"/>` +
    `<rect x="${width * 0.05}" y="${height * 0.45}" width="${width * 0.9}" height="${height * 0.25}" fill="#2e6b8a"/>` +
    `<rect x="${width * 0.05}" y="${height * 0.42}" width="${width * 0.9}" height="${height * 0.04}" fill="#d9d9d9"/>` +
    `<rect x="${width * 0.35}" y="${height * 0.08}" width="${width * 0.3}" height="${height * 0.25}" fill="#a8d8ff"/>` +
    `<rect x="${width * 0.05}" y="${height * 0.05}" width="${width * 0.25}" height="${height * 0.3}" fill="#c0392b"/>` +
    '</svg>';
  const image = sharp(Buffer.from(svg));
  if (options.format === 'png') return image.png().toBuffer();
  return image.flatten({ background: '#ffffff' }).jpeg({ quality: 85 }).toBuffer();
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
      new Blob([input.image], { type: input.imageType ?? 'image/jpeg' }),
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
