/**
 * What every rate limit of the client shares: the one process's {@link RateGovernor}
 * (`src/api/governor.ts`) and the worker mode's rate shared through Redis (`src/worker/rate.ts`).
 *
 * @module
 */

/** What a request is to the budget: a submission starts a job, a poll (or the styles list) serves one. */
export type Priority = 'poll' | 'submit';

/**
 * Takes the waiter that goes next when the budget is tight: a submission first, else the oldest.
 *
 * A submission waits for the budget only while it holds a free job slot, and each request it waits
 * behind delays the start of a job that takes seconds to process: a run bound by its request budget
 * ends at its last submission plus one job's processing time, so submissions go first. A poll can
 * wait without loss as long as the slots are not full; once they are, no submission waits and the
 * polls have the whole budget (each poll that finds its job ended frees the slot for the next
 * submission), so neither starves: the slots never wait on a poll the budget could have afforded
 * (docs/contract.md#rate-limits). Measured on the request-budget bench's scenario (60 jobs, 5 req/s),
 * a few runs each: 1.18–1.23× the ideal, against 1.21–1.36× with polls first.
 */
export function takeNext<W extends { priority: Priority }>(waiters: W[]): W | undefined {
  const i = waiters.findIndex((w) => w.priority === 'submit');
  return waiters.splice(Math.max(i, 0), 1)[0];
}

/** A change the governor made, for the run log. */
export type GovernorEvent =
  | {
      type: 'decrease';
      rate: number;
      pauseMs: number;
      retryAfter: boolean;
      /** The key's sustainable rate as learnt at this 429, requests per second (null: not yet known). */
      estimate: number | null;
    }
  | { type: 'increase'; rate: number };

/** The event of a 429 that lowered the rate (`retryAfterMs` undefined: the pause is our fallback). */
export function decreaseEvent(
  rate: number,
  pauseMs: number,
  retryAfterMs: number | undefined,
  estimate: number | null,
): GovernorEvent {
  return { type: 'decrease', rate, pauseMs, retryAfter: retryAfterMs !== undefined, estimate };
}

/**
 * What the {@link ServiceGate} needs of a rate limit: the one process's {@link RateGovernor}, or the
 * worker mode's rate shared by every worker through Redis (`src/worker/rate.ts`).
 */
export interface RateLimiter {
  /** The request rate allowed now, per second. */
  readonly rate: number;
  /** What the key sustains as learnt from 429s, per second; null before the first 429. */
  readonly estimate: number | null;
  /** How much the rate binds now, 0 to 1 (see {@link RateGovernor.pressure}). */
  readonly pressure: number;
  /** Milliseconds left in a 429 pause (0 when none). */
  readonly pauseRemainingMs: number;
  /** Waits out a 429 pause without taking a slot. */
  waitForPause(signal?: AbortSignal): Promise<void>;
  /** Waits for a slot to send one request; resolves with a ticket that {@link onRateLimited} takes back. */
  acquire(priority: Priority, signal?: AbortSignal): Promise<unknown>;
  /** The request of `ticket` was answered 429: pause every request, learn. */
  onRateLimited(retryAfterMs: number | undefined, fallbackMs: number, ticket?: unknown): void;
  /** A request got through without a 429. */
  onSuccess(): void;
  /** The request of a slot got its answer, or failed, whatever it was: it is no longer in flight. */
  settled?(): void;
  /** Stops timers and rejects the waiters (shutdown). */
  close(reason: unknown): void;
}
