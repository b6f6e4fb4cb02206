/**
 * The review's own thread (started by {@link Reviewer} in `index.ts`): it decodes the source and
 * the result with sharp and compares them (`analyse.ts`), so that none of this work, not even
 * sharp's per-call setup, runs on the event loop that drives the run's requests and journal.
 *
 * Sources are remembered by content hash ({@link SOURCE_MEMO} of them, about 16 KB each): the
 * styles of one photo come in a row, so each photo is decoded once, not once per style.
 */
import { parentPort } from 'node:worker_threads';
import sharp from 'sharp';
import { reviewResult, type Signature, signature } from './analyse.js';

// Loading sharp in this thread turns libvips' operation cache back on (50 MB) for the whole
// process; every image here is decoded once, so the cache only costs memory.
sharp.cache(false);

/** A review to do. */
export interface ReviewRequest {
  /** Sequence number, echoed in the reply. */
  n: number;
  /** The source image's path and a key for its content (its sha256). */
  source: string;
  sourceKey: string;
  /** The downloaded result's path. */
  result: string;
  module: string;
  threshold: number;
}

/** The verdict (`hash`: the result's perceptual hash, for the duplicate check) or why there is none. */
export type ReviewReply =
  | { n: number; ok: true; score: number; flags: string[]; hash: string }
  | { n: number; ok: false; error: string };

/** Source signatures kept (a few MB): enough for the photos whose styles are in flight at once. */
export const SOURCE_MEMO = 256;

const sources = new Map<string, Promise<Signature>>();

/** The source's signature, decoded once per content while it is among the recent ones. */
function sourceSignature(key: string, file: string): Promise<Signature> {
  const known = sources.get(key);
  if (known) {
    // Most recently used last: Map keeps insertion order, so the first key is the oldest.
    sources.delete(key);
    sources.set(key, known);
    return known;
  }
  const made = signature(file);
  made.catch(() => sources.delete(key));
  sources.set(key, made);
  if (sources.size > SOURCE_MEMO) sources.delete(sources.keys().next().value as string);
  return made;
}

async function review(request: ReviewRequest): Promise<ReviewReply> {
  try {
    const [src, result] = await Promise.all([
      sourceSignature(request.sourceKey, request.source),
      signature(request.result),
    ]);
    const verdict = reviewResult(src, result, { module: request.module, threshold: request.threshold });
    return { n: request.n, ok: true, score: verdict.score, flags: verdict.flags, hash: result.hash };
  } catch (error) {
    return { n: request.n, ok: false, error: (error as Error).message };
  }
}

parentPort?.on('message', (request: ReviewRequest) => {
  void review(request).then((reply) => parentPort?.postMessage(reply));
});
