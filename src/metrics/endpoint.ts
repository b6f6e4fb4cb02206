/**
 * The metrics endpoint of a long-running process (`worker`, `run` with `--metrics-port`): Prometheus
 * scrapes `/metrics`, and Kubernetes' probes ask `/livez` (restart me) and `/readyz` (send me no
 * more). node:http only: three fixed paths need no framework, and nothing here may fail the work.
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

/** How long the event loop may lag behind its timers before `/livez` says the process is stuck. */
export const LOOP_LIMIT_MS = 30_000;
/** How often the loop's lag is sampled. */
const TICK_MS = 1000;

/** What the endpoint serves; `health` and `ready` are asked on every probe. */
export interface EndpointOptions {
  host: string;
  /** 0 takes a free port (the bound one is in {@link MetricsEndpoint.port}). */
  port: number;
  registry: Registry;
  /** Why the process is not alive (a one-line reason for the 503), or null when it is. */
  health?: () => string | null;
  /** False once the process is stopping (SIGTERM/SIGINT): `/readyz` answers 503 from then on. */
  ready?: () => boolean;
  /** The loop lag beyond which `/livez` answers 503. @default {@link LOOP_LIMIT_MS} */
  loopLimitMs?: number;
}

/** A serving endpoint: its bound port, and `close` to stop it at exit. */
export interface MetricsEndpoint {
  host: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Starts serving; throws `EADDRINUSE`-style errors as `Error` with a message naming host:port (the
 * caller makes it a usage error, exit 2).
 */
export async function startMetricsEndpoint(options: EndpointOptions): Promise<MetricsEndpoint> {
  const loop = new LoopWatch();
  const loopLimitMs = options.loopLimitMs ?? LOOP_LIMIT_MS;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').replace(/\?.*/, '');
    const answer = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, 'GET only\n');
    if (path === '/metrics') {
      options.registry.metrics().then(
        (text) => answer(200, text, options.registry.contentType),
        (error: unknown) => answer(500, `metrics: ${(error as Error).message}\n`),
      );
      return;
    }
    if (path === '/livez') {
      const lag = loop.lagMs();
      const reason =
        lag > loopLimitMs
          ? `the event loop is ${Math.round(lag / 1000)} s behind (limit ${Math.round(loopLimitMs / 1000)} s)`
          : (options.health?.() ?? null);
      return reason === null ? answer(200, 'ok\n') : answer(503, `${reason}\n`);
    }
    if (path === '/readyz') {
      return (options.ready?.() ?? true) ? answer(200, 'ok\n') : answer(503, 'stopping\n');
    }
    answer(404, 'not found: try /metrics, /livez or /readyz\n');
  });
  await listen(server, options.host, options.port);
  const { port } = server.address() as { port: number };
  return {
    host: options.host,
    port,
    close: async () => {
      loop.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'the port is in use' : error.message;
      reject(new Error(`--metrics-port: cannot listen on ${host}:${port}: ${why}`, { cause: error }));
    });
    server.listen(port, host, () => resolve());
  });
}

/**
 * The event loop's lag by timer drift: a tick that should come every second and comes late says the
 * loop was busy. sharp works off the loop, so a long lag is a stuck process, not a big image.
 */
class LoopWatch {
  #last = Date.now();
  #drift = 0;
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#timer = setInterval(() => {
      const now = Date.now();
      this.#drift = Math.max(0, now - this.#last - TICK_MS);
      this.#last = now;
    }, TICK_MS);
    // The watch never keeps a finished process alive.
    this.#timer.unref();
  }

  /** The last tick's lag, or how late the next one is already. */
  lagMs(): number {
    return Math.max(this.#drift, Date.now() - this.#last - TICK_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
