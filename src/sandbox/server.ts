/**
 * The sandbox HTTP server: it owns the listeners, the knobs and the statistics, and hands each
 * request to the routes (`routes/service.ts` for `/v1`, `routes/storage.ts` for results). One
 * instance has two listeners: the service origin and a second origin used only as the target of
 * the `redirect-cross-origin` result fault (docs/faults.md).
 */
import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { monotonicMs } from '../util/time.js';
import type { SandboxContext } from './context.js';
import { createRng, DEFAULT_FAULTS, roll, type SandboxFaults, TokenBucket } from './faults.js';
import { JobStore } from './jobs.js';
import { type Exchange, errorBody, send } from './respond.js';
import { handleService } from './routes/service.js';
import { handleStorage } from './routes/storage.js';
import type { SandboxOptions, SandboxRequestRecord, SandboxStats } from './types.js';

/** The sandbox server; see `index.ts` for the public handle. */
export class SandboxServer {
  readonly stats: SandboxStats = {
    requests: [],
    storageRequests: [],
    creates: 0,
    createsByItem: new Map(),
    polls: new Map(),
    rateLimited: 0,
    jobs: 0,
    badResults: new Map(),
  };
  url = '';
  port = 0;
  private secondaryUrl = '';
  private faults: SandboxFaults;
  private bucket: TokenBucket | null = null;
  private readonly host: string;
  private readonly requestedPort: number;
  private readonly key: string | null;
  private readonly logger: ((line: string) => void) | undefined;
  private readonly context: SandboxContext;
  private readonly sockets = new Set<Socket>();
  private readonly lifetime = new AbortController();
  private readonly primary: http.Server;
  private readonly secondary: http.Server;

  constructor(options: SandboxOptions) {
    this.host = options.host ?? '127.0.0.1';
    this.requestedPort = options.port ?? 0;
    this.key = options.apiKey === undefined ? 'sandbox-key' : options.apiKey;
    this.logger = options.logger;
    const rng = createRng(options.seed ?? randomBytes(4).readUInt32LE(0));
    this.faults = { ...DEFAULT_FAULTS, errorStatuses: [...DEFAULT_FAULTS.errorStatuses] };
    this.setFaults(options.faults ?? {});
    const processingMs = options.processingMs ?? 1500;
    const jobs = new JobStore({
      processingMs,
      jitterMs: options.jitterMs ?? 500,
      queuedMs: options.queuedMs ?? Math.min(300, processingMs / 4),
      maxJobs: options.maxJobs ?? 1000,
      results: options.results ?? 'render',
      now: monotonicMs,
      wallNow: Date.now,
      // One PRNG for fault rolls and job fates alike, so a seed replays a whole run.
      rng,
      faults: () => this.faults,
    });
    this.context = {
      faults: () => this.faults,
      signal: this.lifetime.signal,
      rng,
      roll: (probability) => roll(rng, probability),
      stats: this.stats,
      jobs,
      apiKey: this.key,
      stylesShape: options.stylesShape ?? 'wrapped-objects',
      rateLimitWait: (now) => this.bucket?.take(now) ?? 0,
      url: () => this.url,
      secondaryUrl: () => this.secondaryUrl,
    };
    this.primary = http.createServer((req, res) => this.dispatch(req, res, 'primary'));
    this.secondary = http.createServer((req, res) => this.dispatch(req, res, 'secondary'));
    for (const server of [this.primary, this.secondary]) {
      server.on('connection', (socket: Socket) => {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
      });
    }
  }

  /** Starts both listeners. */
  async listen(): Promise<void> {
    const listen = (server: http.Server, port: number) =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, this.host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    this.port = await listen(this.primary, this.requestedPort);
    const secondaryPort = await listen(this.secondary, 0);
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    this.url = `http://${host}:${this.port}`;
    this.secondaryUrl = `http://${host}:${secondaryPort}`;
  }

  /** The key required, or null. */
  get apiKey(): string | null {
    return this.key;
  }

  /** Merges new knob values over the current ones; a changed `rateLimit` starts a full bucket. */
  setFaults(faults: Partial<SandboxFaults>): void {
    const before = this.faults.rateLimit;
    this.faults = { ...this.faults, ...faults };
    if (faults.rateLimit !== undefined || before !== this.faults.rateLimit || this.bucket === null) {
      const limit = this.faults.rateLimit;
      this.bucket = limit ? new TokenBucket(limit.rps, limit.burst, monotonicMs()) : null;
    }
  }

  /** Clears the statistics in place, so references held by tests stay live. */
  resetStats(): void {
    this.stats.requests.length = 0;
    this.stats.storageRequests.length = 0;
    this.stats.creates = 0;
    this.stats.createsByItem.clear();
    this.stats.polls.clear();
    this.stats.rateLimited = 0;
    this.stats.jobs = 0;
    this.stats.badResults.clear();
  }

  /** Closes both listeners and destroys every socket, hung or keep-alive, so callers never wait. */
  async close(): Promise<void> {
    this.lifetime.abort();
    const closed = [this.primary, this.secondary].map(
      (server) => new Promise<void>((resolve) => server.close(() => resolve())),
    );
    for (const server of [this.primary, this.secondary]) server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(closed);
  }

  /** Records the request, logs it once it ends, and routes it by origin and path. */
  private dispatch(req: IncomingMessage, res: ServerResponse, origin: 'primary' | 'secondary'): void {
    // Errors of an aborted client must not become unhandled 'error' events.
    req.on('error', () => {});
    res.on('error', () => {});
    const path = new URL(req.url ?? '/', 'http://sandbox.invalid').pathname;
    const record: SandboxRequestRecord = {
      method: req.method ?? 'GET',
      path,
      status: 0,
      at: monotonicMs(),
      hasAuthorization: req.headers.authorization !== undefined,
    };
    this.stats.requests.push(record);
    res.on('close', () => {
      if (res.headersSent) record.status = res.statusCode;
      this.logger?.(
        `${origin === 'secondary' ? '[2nd origin] ' : ''}${record.method} ${record.path} ` +
          `${record.status || '-'} ${Math.round(monotonicMs() - record.at)}ms` +
          (record.fault ? ` fault=${record.fault}` : ''),
      );
    });
    const ex: Exchange = { req, res, record, resetInsteadOfAnswer: false };
    const handler =
      origin === 'secondary' || path.startsWith('/storage/')
        ? handleStorage(this.context, ex, origin)
        : handleService(this.context, ex);
    handler.catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        const message = error instanceof Error ? error.message : String(error);
        void send(this.context, ex, 500, errorBody('internal_error', `sandbox bug: ${message}`));
      } else {
        res.destroy();
      }
    });
  }
}
