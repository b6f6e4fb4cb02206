/** Saturating traffic through a RateGovernor into the sandbox's token bucket, on a fake clock. */
import type { RateGovernor } from '../../src/api/governor.js';
import type { TokenBucket } from '../../src/sandbox/faults.js';

/**
 * One worker that always has a request waiting: it takes a slot of the governor, asks the bucket,
 * spends `wireMs()` on the (fake) wire and tells the governor the answer, a 429 with Retry-After as
 * the sandbox says it (whole seconds, at least 1). Ends when `running()` is false or the governor
 * closes; `onAnswer` hears each answer and when it came.
 */
export async function saturatingWorker(
  governor: RateGovernor,
  bucket: TokenBucket,
  now: () => number,
  options: {
    running: () => boolean;
    wireMs: () => number;
    onAnswer: (accepted: boolean, at: number) => void;
  },
): Promise<void> {
  while (options.running()) {
    try {
      await governor.acquire('poll');
    } catch {
      return;
    }
    const wait = bucket.take(now());
    await new Promise((resolve) => setTimeout(resolve, options.wireMs()));
    options.onAnswer(wait <= 0, now());
    if (wait > 0) governor.onRateLimited(Math.max(1, Math.ceil(wait / 1000)) * 1000, 1000);
    else governor.onSuccess();
    governor.settled();
  }
}
