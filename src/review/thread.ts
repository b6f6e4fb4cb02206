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
import { reviewResult, type Signature, signature, signatureOfPixels } from './analyse.js';

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

/** A source's rendition decoded elsewhere (the preflight's check), remembered for its reviews. */
export interface SourceSample {
  kind: 'source';
  key: string;
  data: Uint8Array;
  width: number;
  height: number;
  channels: number;
}

/** The verdict (`hash`: the result's perceptual hash, for the duplicate check) or why there is none. */
export type ReviewReply =
  | {
      n: number;
      ok: true;
      score: number;
      flags: string[];
      hash: string;
      /** The source was decoded for this review (not remembered, not handed over). */
      decodedSource: boolean;
    }
  | { n: number; ok: false; error: string };

/**
 * Source signatures kept (16 KB each, 8 MB): enough for the photos between their preflight and
 * the reviews of their results.
 */
export const SOURCE_MEMO = 512;

const sources = new Map<string, Promise<Signature>>();

/** The source's signature, decoded once per content while it is among the recent ones. */
function sourceSignature(key: string, file: string): { signed: Promise<Signature>; decoded: boolean } {
  const known = sources.get(key);
  if (known) {
    remember(key, known);
    return { signed: known, decoded: false };
  }
  const made = signature(file);
  made.catch(() => sources.delete(key));
  remember(key, made);
  return { signed: made, decoded: true };
}

/** Keeps a source's signature as the most recent (Map keeps insertion order: the first is the oldest). */
function remember(key: string, signed: Promise<Signature>): void {
  sources.delete(key);
  sources.set(key, signed);
  if (sources.size > SOURCE_MEMO) sources.delete(sources.keys().next().value as string);
}

async function review(request: ReviewRequest): Promise<ReviewReply> {
  try {
    const source = sourceSignature(request.sourceKey, request.source);
    const [src, result] = await Promise.all([source.signed, signature(request.result)]);
    const verdict = reviewResult(src, result, { module: request.module, threshold: request.threshold });
    return {
      n: request.n,
      ok: true,
      score: verdict.score,
      flags: verdict.flags,
      hash: result.hash,
      decodedSource: source.decoded,
    };
  } catch (error) {
    return { n: request.n, ok: false, error: (error as Error).message };
  }
}

parentPort?.on('message', (message: ReviewRequest | SourceSample) => {
  if ('kind' in message) {
    remember(message.key, Promise.resolve(signatureOfPixels(message)));
    return;
  }
  void review(message).then((reply) => parentPort?.postMessage(reply));
});
