import { setMaxListeners } from 'node:events';
import { InterruptedError } from '../errors.js';

/**
 * The two stops of a run. The soft stop (first SIGINT, a fatal error) lets no new work start and
 * ends waits; requests in flight get `graceMs` to finish before the hard stop aborts them. The
 * caller's signals are followed: its `stop` begins a soft stop, its `abort` a hard one.
 */
export class RunStop {
  readonly #soft = new AbortController();
  readonly #hard = new AbortController();
  readonly #graceMs: number;

  constructor(graceMs: number) {
    this.#graceMs = graceMs;
    // Every queued request and sleep listens on these two signals: thousands at once is by design.
    setMaxListeners(0, this.#soft.signal, this.#hard.signal);
  }

  /** Follows the caller's signals: `stop` calls `onStop` with its reason, `abort` aborts requests at once. */
  follow(signals: { stop?: AbortSignal; abort?: AbortSignal }, onStop: (reason: string) => void): void {
    const { stop, abort } = signals;
    if (stop) {
      const onAbort = () => onStop(String(stop.reason instanceof Error ? stop.reason.message : 'signal'));
      if (stop.aborted) onAbort();
      else stop.addEventListener('abort', onAbort, { once: true });
    }
    abort?.addEventListener('abort', () => this.#hard.abort(abort.reason), { once: true });
  }

  /** Aborts when the run stops: no new work. */
  get soft(): AbortSignal {
    return this.#soft.signal;
  }

  /** Aborts when requests in flight must end now. */
  get hard(): AbortSignal {
    return this.#hard.signal;
  }

  /** Begins the soft stop (once) and arms the hard stop after the grace period. */
  begin(): boolean {
    if (this.#soft.signal.aborted) return false;
    this.#soft.abort(new InterruptedError('stop'));
    const grace = setTimeout(
      () => this.#hard.abort(new InterruptedError('grace period over')),
      this.#graceMs,
    );
    grace.unref();
    return true;
  }
}
