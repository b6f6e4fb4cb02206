/**
 * The service as both drivers reach it: the API client, the rate every request passes (this
 * process's own governor under `run`, the one all workers share through Redis under `worker`), the
 * gate over both, and the poll schedule that reads the rate's pressure. One place, so that `run`
 * and `worker` talk to the service the same way.
 */
import type { Logger } from 'pino';
import { KitchenClient } from '../api/client.js';
import { type GateOptions, ServiceGate } from '../api/gate.js';
import { type GovernorEvent, type GovernorOptions, RateGovernor, type RateLimiter } from '../api/governor.js';
import type { RetryOptions } from '../api/policy.js';
import { InterruptedError } from '../errors.js';
import { MIN_POLL_INTERVAL_MS, PollScheduler, type PollSchedulerOptions } from './poll-schedule.js';

/** Options of {@link connect}. */
export interface ConnectOptions {
  service: {
    baseUrl: string;
    /** Sent to `baseUrl` only; never logged. */
    apiKey: string;
    /** Client timeouts in ms (see `ClientOptions`). */
    timeouts?: { connect?: number; request?: number; upload?: number; download?: number };
    retry?: RetryOptions;
    governor?: GovernorOptions;
    /** No answer for this long while calls keep failing: the service counts as unreachable. */
    unreachableMs: number;
  };
  /** A ceiling on the rate besides `service.governor.maxRate` (`run --max-rate`); the lower wins. */
  maxRate?: number | null;
  logger: Logger;
  /**
   * Makes a rate shared with other processes (the worker mode's, through Redis) from the governor's
   * options; without it, this process paces itself with its own {@link RateGovernor}.
   */
  sharedRate?: (options: GovernorOptions) => RateLimiter;
  /** Told of every change of the rate, after it is logged. */
  onRate?: (event: GovernorEvent) => void;
  /** Told of every request's answer (`GateOptions.onRequest`). */
  onRequest?: GateOptions['onRequest'];
  /** The poll schedule's other hook (`draining`); its `pressure` is the rate's. */
  polls?: Omit<PollSchedulerOptions, 'pressure'>;
}

/** The service, connected: what every stage's context takes from it. */
export interface Connection {
  client: KitchenClient;
  /** The rate every request passes. */
  rate: RateLimiter;
  /** The one door to the service: the rate and the retry policy. */
  gate: ServiceGate;
  /** When each job may be polled; it slows polls down as the rate binds. */
  polls: PollScheduler;
  /** Ends the rate's waits (requests not yet sent fail with `InterruptedError`) and the client's sockets. */
  close(): void;
}

/** Connects to the service as `run` and `worker` both do; {@link Connection.close} when done. */
export function connect(options: ConnectOptions): Connection {
  const { service, logger } = options;
  const t = service.timeouts ?? {};
  const client = new KitchenClient({
    baseUrl: service.baseUrl,
    apiKey: service.apiKey,
    ...(t.connect !== undefined ? { connectTimeoutMs: t.connect } : {}),
    ...(t.request !== undefined ? { requestTimeoutMs: t.request } : {}),
    ...(t.upload !== undefined ? { uploadTimeoutMs: t.upload } : {}),
    ...(t.download !== undefined ? { downloadTimeoutMs: t.download } : {}),
  });
  const maxRate = options.maxRate ?? null;
  const name = options.sharedRate ? 'shared request rate' : 'request rate';
  const governor: GovernorOptions = {
    ...service.governor,
    ...(maxRate !== null ? { maxRate: Math.min(maxRate, service.governor?.maxRate ?? maxRate) } : {}),
    onChange: (event) => {
      logger.info(
        { event: `rate_${event.type}`, ...event, type: undefined },
        `${name} now ${event.rate.toFixed(2)}/s`,
      );
      options.onRate?.(event);
    },
  };
  const rate = options.sharedRate ? options.sharedRate(governor) : new RateGovernor(governor);
  const gate = new ServiceGate(rate, logger, {
    ...(service.retry ? { retry: service.retry } : {}),
    unreachableMs: service.unreachableMs,
    ...(options.onRequest ? { onRequest: options.onRequest } : {}),
  });
  const polls = new PollScheduler(MIN_POLL_INTERVAL_MS, undefined, {
    ...options.polls,
    pressure: () => rate.pressure,
  });
  return {
    client,
    rate,
    gate,
    polls,
    close: () => {
      rate.close(new InterruptedError('shutdown'));
      client.close();
    },
  };
}
