/**
 * The naive client the engine is measured against: what a first attempt with plain `fetch` and
 * `FormData` looks like. N workers, each takes the next item, submits it, polls it every 2 s until
 * it ends and downloads the result. Every 429 (submit or poll) is retried after a fixed 1 s, with no
 * shared back-off and no Retry-After; no preflight, no journal, no style check.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** One job for the naive client. */
export interface NaiveItem {
  id: string;
  /** Absolute path of the source image. */
  file: string;
  style: string;
}

/** Options of {@link runNaive}. */
export interface NaiveOptions {
  baseUrl: string;
  apiKey: string;
  items: readonly NaiveItem[];
  /** Workers, each with one job in flight. */
  concurrency: number;
  /** Folder the results are written to. */
  outDir: string;
  /** Fixed poll interval. @default 2000 */
  pollMs?: number;
  /** Fixed wait after a 429. @default 1000 */
  retry429Ms?: number;
}

/** What one job went through, for the benchmark's diagnostics. */
export interface NaiveJob {
  id: string;
  jobId: string;
  /** `performance.now()` when the 202 arrived. */
  acceptedAt: number;
  /** `performance.now()` when the terminal poll answered. */
  endedAt: number;
  processingTimeMs: number | null;
  status: 'succeeded' | 'failed';
}

/** What {@link runNaive} returns. */
export interface NaiveResult {
  seconds: number;
  jobs: NaiveJob[];
  /** Requests the client sent to `/v1/*`, 429s included. */
  requests: number;
  rateLimited: number;
}

interface WireJob {
  id: string;
  status: string;
  result?: { image_url?: string };
  processing_time_ms?: number;
}

/** Runs the items through the service the naive way; throws on anything but 2xx and 429. */
export async function runNaive(options: NaiveOptions): Promise<NaiveResult> {
  const pollMs = options.pollMs ?? 2000;
  const retry429Ms = options.retry429Ms ?? 1000;
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' };
  const jobs: NaiveJob[] = [];
  let requests = 0;
  let rateLimited = 0;

  /** Sends until the answer is not a 429. */
  const send = async (url: string, init: () => RequestInit): Promise<Response> => {
    for (;;) {
      requests++;
      const response = await fetch(url, init());
      if (response.status !== 429) return response;
      rateLimited++;
      await response.arrayBuffer();
      await sleep(retry429Ms);
    }
  };

  const one = async (item: NaiveItem): Promise<void> => {
    const image = await readFile(item.file);
    const created = await send(`${options.baseUrl}/v1/modules/change-style`, () => {
      const form = new FormData();
      form.set('image', new Blob([image], { type: 'image/jpeg' }), path.basename(item.file));
      form.set('style', item.style);
      return { method: 'POST', headers, body: form };
    });
    if (created.status !== 202) throw new Error(`naive: submit ${item.id} got HTTP ${created.status}`);
    const { job } = (await created.json()) as { job: WireJob };
    const acceptedAt = performance.now();
    for (;;) {
      await sleep(pollMs);
      const polled = await send(`${options.baseUrl}/v1/jobs/${job.id}`, () => ({ headers }));
      if (polled.status !== 200) throw new Error(`naive: poll ${job.id} got HTTP ${polled.status}`);
      const current = ((await polled.json()) as { job: WireJob }).job;
      if (current.status !== 'succeeded' && current.status !== 'failed') continue;
      jobs.push({
        id: item.id,
        jobId: job.id,
        acceptedAt,
        endedAt: performance.now(),
        processingTimeMs: current.processing_time_ms ?? null,
        status: current.status,
      });
      const url = current.result?.image_url;
      if (current.status === 'succeeded' && url) {
        const result = await fetch(url);
        if (!result.ok) throw new Error(`naive: download ${item.id} got HTTP ${result.status}`);
        await writeFile(path.join(options.outDir, `${item.id}.jpg`), Buffer.from(await result.arrayBuffer()));
      }
      return;
    }
  };

  const started = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < options.items.length) {
      const item = options.items[next++];
      if (item) await one(item);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return { seconds: (performance.now() - started) / 1000, jobs, requests, rateLimited };
}
