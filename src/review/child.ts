/**
 * The review's own process (started by {@link Reviewer} in `index.ts`): it decodes the source and
 * the result (a small JPEG itself, `decode.ts`; others with sharp) into signatures
 * (`signature.ts`) and compares them (`compare.ts`). It runs at the lowest priority, every thread
 * of it (its libuv pool and libvips' workers too), so that its work takes only the CPU the run
 * leaves idle and none of the run's own: not its event loop, not the thread pool that serves the
 * run's files and journal.
 *
 * Sources are remembered by content hash ({@link SOURCE_MEMO} of them, about 16 KB each, kept as
 * `memo.ts` says): the styles of one photo come in a row, so each photo is decoded once, not once
 * per style, and one that the preflight handed over is not decoded at all while it is kept.
 */
import { dropSharpCache } from '../image/sharp-cache.js';
import { lowerPriority } from '../util/fork.js';
import { SourceMemo } from './memo.js';
import type { Signature } from './signature.js';

// First, before sharp loads and starts threads: every thread started later inherits the priority.
lowerPriority();
// Every image here is decoded once: libvips' operation cache (50 MB) would only cost memory. Off
// as sharp loads (image/sharp.ts), with the modules below.
dropSharpCache();
const { reviewResult } = await import('./compare.js');
const { signature, signatureOfPixels } = await import('./signature.js');

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
 * Source signatures kept (16 KB each, 8 MB): the photos between their preflight and the reviews of
 * their results while the review keeps up; the next ones to be reviewed when it falls behind.
 */
export const SOURCE_MEMO = 512;

const sources = new SourceMemo<Promise<Signature>>(SOURCE_MEMO);

/** The source's signature: remembered (handed over, or decoded for an earlier style), else decoded now. */
function sourceSignature(key: string, file: string): { signed: Promise<Signature>; decoded: boolean } {
  const known = sources.get(key);
  if (known) return { signed: known, decoded: false };
  const made = forgottenOnFailure(key, signature(file));
  sources.remember(key, made);
  return { signed: made, decoded: true };
}

/** The signature as it will be: a source whose signature fails is forgotten, and decoded again later. */
function forgottenOnFailure(key: string, signed: Promise<Signature>): Promise<Signature> {
  signed.catch(() => sources.delete(key));
  return signed;
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

/**
 * Reviews decoded at once. The run keeps more of them queued here (`IN_FLIGHT` in
 * `index.ts`), so that this process always has the next one at hand, however late the run's busy
 * event loop reads the replies.
 */
const DECODES = 2;

const queued: ReviewRequest[] = [];
let decoding = 0;

function startReviews(): void {
  while (decoding < DECODES && queued.length > 0) {
    decoding++;
    void review(queued.shift()!).then((reply) => {
      decoding--;
      send(reply);
      startReviews();
    });
  }
}

/** Why this process stopped on its own (an uncaught error), sent before it exits. */
export interface ReviewFatal {
  kind: 'fatal';
  error: string;
}

process.on('message', (message: ReviewRequest | SourceSample) => {
  if ('kind' in message) {
    // Measured only when kept; a rendition it cannot measure is decoded by its review instead.
    sources.offer(message.key, () =>
      forgottenOnFailure(
        message.key,
        Promise.resolve().then(() => signatureOfPixels(message)),
      ),
    );
    return;
  }
  queued.push(message);
  startReviews();
});
// The run ended or died (even by SIGKILL: its end of the channel closes): nothing left to do.
process.on('disconnect', () => process.exit(0));
process.on('uncaughtException', (error) => {
  send({ kind: 'fatal', error: error.message } satisfies ReviewFatal, () => process.exit(70));
});

function send(message: ReviewReply | ReviewFatal, then?: () => void): void {
  if (!process.connected) return void then?.();
  process.send?.(message, undefined, undefined, () => then?.());
}
