/**
 * `--metrics-port` / `--metrics-host` of `run` and `worker`: the flags and environment checked once,
 * the endpoint started (src/metrics/endpoint.ts), its address told on stderr, and a busy port made a
 * usage error naming host:port (exit 2) before any work starts. The endpoint, prom-client and the
 * worker's monitor are loaded only when a port is asked for.
 */
import { UsageError } from '../errors.js';
import type { EndpointOptions, MetricsEndpoint } from '../metrics/endpoint.js';
import { intFlag, secondsAtLeast, wholeNumber } from '../util/validate.js';
import type { WorkerMonitor } from '../worker/monitor.js';
import type { CommandDeps } from './common.js';
import { createRunMetrics } from './run-metrics.js';

/** The flags this reads (`ENDPOINT_FLAGS`). */
export interface EndpointFlagValues {
  'metrics-port'?: string;
  'metrics-host'?: string;
}

/** Where to serve, from flags then environment; null when no port is asked for. */
export function endpointAddress(
  values: EndpointFlagValues,
  env: NodeJS.ProcessEnv,
): { host: string; port: number } | null {
  const raw = values['metrics-port'] ?? (env.KITCHEN_METRICS_PORT?.trim() || undefined);
  const port = wholeNumber('--metrics-port', intFlag('metrics-port', raw), { min: 0, max: 65_535 });
  if (port === undefined) return null;
  const host = values['metrics-host'] ?? (env.KITCHEN_METRICS_HOST?.trim() || '127.0.0.1');
  return { host, port };
}

/**
 * `/livez`'s limits from the environment (undocumented knobs for tests and odd setups): the event
 * loop's lag and, for a worker, how long Redis may be out of reach.
 */
export function livezLimits(env: NodeJS.ProcessEnv): { loopLimitMs?: number; redisDownLimitMs?: number } {
  const loop = secondsAtLeast('KITCHEN_LIVEZ_LOOP_SECONDS', env.KITCHEN_LIVEZ_LOOP_SECONDS, 1);
  const redis = secondsAtLeast('KITCHEN_LIVEZ_REDIS_SECONDS', env.KITCHEN_LIVEZ_REDIS_SECONDS, 1);
  return {
    ...(loop !== undefined ? { loopLimitMs: loop } : {}),
    ...(redis !== undefined ? { redisDownLimitMs: redis } : {}),
  };
}

/** Starts the endpoint at `address` (from {@link endpointAddress}) and says where it listens. */
export async function serveMetrics(
  address: { host: string; port: number },
  deps: CommandDeps,
  serve: Omit<EndpointOptions, 'host' | 'port'>,
): Promise<MetricsEndpoint> {
  const { startMetricsEndpoint } = await import('../metrics/endpoint.js');
  let endpoint: MetricsEndpoint;
  try {
    endpoint = await startMetricsEndpoint({ ...address, ...serve });
  } catch (error) {
    throw new UsageError((error as Error).message, { cause: error });
  }
  deps.stderr.write(
    `metrics: serving http://${endpoint.host}:${endpoint.port}/metrics (and /livez, /readyz)\n`,
  );
  return endpoint;
}

/**
 * A worker's endpoint and what feeds it: `run`'s metrics from the worker's events, the queue's
 * gauges and Redis's health. Nothing when no port is asked for.
 */
export async function workerEndpoint(
  values: EndpointFlagValues,
  deps: CommandDeps,
): Promise<{ monitor: WorkerMonitor; endpoint: MetricsEndpoint } | null> {
  const address = endpointAddress(values, deps.env);
  if (!address) return null;
  const { loopLimitMs, redisDownLimitMs } = livezLimits(deps.env);
  const metrics = await createRunMetrics();
  const { WorkerMonitor } = await import('../worker/monitor.js');
  const monitor = new WorkerMonitor(metrics, redisDownLimitMs !== undefined ? { redisDownLimitMs } : {});
  const endpoint = await serveMetrics(address, deps, {
    registry: metrics.registry,
    health: () => monitor.health(),
    ready: () => !deps.signal?.aborted,
    ...(loopLimitMs !== undefined ? { loopLimitMs } : {}),
  });
  return { monitor, endpoint };
}
