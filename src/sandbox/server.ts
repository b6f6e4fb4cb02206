/**
 * The sandbox HTTP server: the whole service spec (create, poll, styles, storage) plus the fault
 * knobs of FAULTS.md. One instance owns two listeners: the service origin and a second origin
 * used only as the target of the `redirect-cross-origin` result fault.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { isoWithOffset } from '../util/time.js';
import { firstChunk, MAX_IMAGE_BYTES, parseMultipart, readBody } from './body.js';
import {
  createRng,
  DEFAULT_FAULTS,
  inScope,
  retryAfterValue,
  type SandboxFaults,
  TokenBucket,
} from './faults.js';
import { type RenderedImage, renderResult, sniffImage } from './images.js';
import { isSandboxStyle, SANDBOX_STYLES, type StylesShape, stylesBody } from './styles.js';
import type { SandboxOptions, SandboxRequestRecord, SandboxStats } from './types.js';

type ModuleName = 'change-style' | 'kitchen-configurator';
const MODULE_NAMES: readonly string[] = ['change-style', 'kitchen-configurator'];
type RequestKind = 'create' | 'poll' | 'other';

/** Slow-drip pace: small enough that a 100 KB image takes close to a minute. */
const DRIP_BYTES = 512;
const DRIP_INTERVAL_MS = 250;
/** Size of the `oversized` result body: far past any sane image cap. */
const OVERSIZED_BYTES = 200 * 1024 * 1024;

interface JobRecord {
  id: string;
  module: ModuleName;
  style: string | null;
  /** Wall clock at creation (ms since epoch), for timestamps. */
  createdWall: number;
  /** Monotonic times that drive the state machine. */
  createdAt: number;
  queuedUntil: number;
  doneAt: number;
  fate: 'succeed' | 'fail' | 'stuck';
  result?: RenderedImage;
  renderError?: string;
  renderedAt?: number;
  /** The current storage token and when it was issued (monotonic). */
  token?: { value: string; issuedAt: number };
  tokens: string[];
}

/** Per-request state the response path needs. */
interface RequestContext {
  record: SandboxRequestRecord;
  /** Reset the connection instead of answering (the `after-body` reset). */
  resetInsteadOfAnswer: boolean;
}

/** Answer options of {@link SandboxServer.send}. */
interface SendOptions {
  headers?: Record<string, string>;
  /** Add a Retry-After for this wait, in the configured mode. */
  retryAfterMs?: number;
  /** Send this text verbatim instead of JSON-encoding `body`. */
  raw?: { text: string; contentType: string };
}

/** Resolved configuration (every option filled in). */
interface Config {
  host: string;
  port: number;
  apiKey: string | null;
  processingMs: number;
  jitterMs: number;
  queuedMs: number;
  stylesShape: StylesShape;
  maxJobs: number;
  logger: ((line: string) => void) | undefined;
}

function newId(prefix: string, bytes: number): string {
  return `${prefix}${randomBytes(bytes).toString('hex')}`;
}

function errorBody(code: string, message: string): unknown {
  return { error: { code, message } };
}

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
  };
  url = '';
  port = 0;
  private secondaryUrl = '';
  private faults: SandboxFaults;
  private bucket: TokenBucket | null = null;
  private readonly rng: () => number;
  private readonly config: Config;
  private readonly jobs = new Map<string, JobRecord>();
  private readonly tokens = new Map<string, { jobId: string; issuedAt: number }>();
  private readonly sockets = new Set<Socket>();
  private readonly lifetime = new AbortController();
  private readonly primary: http.Server;
  private readonly secondary: http.Server;

  constructor(options: SandboxOptions) {
    const processingMs = options.processingMs ?? 1500;
    this.config = {
      host: options.host ?? '127.0.0.1',
      port: options.port ?? 0,
      apiKey: options.apiKey === undefined ? 'sandbox-key' : options.apiKey,
      processingMs,
      jitterMs: options.jitterMs ?? 500,
      queuedMs: options.queuedMs ?? Math.min(300, processingMs / 4),
      stylesShape: options.stylesShape ?? 'wrapped-objects',
      maxJobs: options.maxJobs ?? 1000,
      logger: options.logger,
    };
    this.rng = createRng(options.seed ?? randomBytes(4).readUInt32LE(0));
    this.faults = { ...DEFAULT_FAULTS, errorStatuses: [...DEFAULT_FAULTS.errorStatuses] };
    this.setFaults(options.faults ?? {});
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
        server.listen(port, this.config.host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    this.port = await listen(this.primary, this.config.port);
    const secondaryPort = await listen(this.secondary, 0);
    const host = this.config.host.includes(':') ? `[${this.config.host}]` : this.config.host;
    this.url = `http://${host}:${this.port}`;
    this.secondaryUrl = `http://${host}:${secondaryPort}`;
  }

  /** The key required, or null. */
  get apiKey(): string | null {
    return this.config.apiKey;
  }

  /** Merges new knob values over the current ones. */
  setFaults(faults: Partial<SandboxFaults>): void {
    const before = this.faults.rateLimit;
    this.faults = { ...this.faults, ...faults };
    if (faults.rateLimit !== undefined || before !== this.faults.rateLimit || this.bucket === null) {
      const limit = this.faults.rateLimit;
      this.bucket = limit ? new TokenBucket(limit.rps, limit.burst, performance.now()) : null;
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

  private dispatch(req: IncomingMessage, res: ServerResponse, origin: 'primary' | 'secondary'): void {
    // Errors of an aborted client must not become unhandled 'error' events.
    req.on('error', () => {});
    res.on('error', () => {});
    const path = new URL(req.url ?? '/', 'http://sandbox.invalid').pathname;
    const record: SandboxRequestRecord = {
      method: req.method ?? 'GET',
      path,
      status: 0,
      at: performance.now(),
      hasAuthorization: req.headers.authorization !== undefined,
    };
    this.stats.requests.push(record);
    res.on('close', () => {
      if (res.headersSent) record.status = res.statusCode;
      this.config.logger?.(
        `${origin === 'secondary' ? '[2nd origin] ' : ''}${record.method} ${record.path} ` +
          `${record.status || '-'} ${Math.round(performance.now() - record.at)}ms` +
          (record.fault ? ` fault=${record.fault}` : ''),
      );
    });
    const ctx: RequestContext = { record, resetInsteadOfAnswer: false };
    const handler =
      origin === 'secondary' || path.startsWith('/storage/')
        ? this.handleStorage(req, res, ctx, origin)
        : this.handleService(req, res, ctx, path);
    handler.catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        const message = error instanceof Error ? error.message : String(error);
        void this.send(res, ctx, 500, errorBody('internal_error', `sandbox bug: ${message}`));
      } else {
        res.destroy();
      }
    });
  }

  private roll(probability: number): boolean {
    return probability > 0 && this.rng() < probability;
  }

  private async handleService(
    req: IncomingMessage,
    res: ServerResponse,
    ctx: RequestContext,
    path: string,
  ): Promise<void> {
    const segments = path.split('/').filter(Boolean);
    if (segments[0] !== 'v1') {
      await this.send(res, ctx, 404, errorBody('not_found', `no such path: ${path}`));
      return;
    }
    const method = req.method ?? 'GET';
    const kind: RequestKind =
      method === 'POST' && segments[1] === 'modules' && segments.length === 3
        ? 'create'
        : method === 'GET' && segments[1] === 'jobs' && segments.length === 3
          ? 'poll'
          : 'other';
    if (kind === 'create') this.stats.creates += 1;
    if (kind === 'poll') {
      const id = safeDecode(segments[2] ?? '');
      const list = this.stats.polls.get(id) ?? [];
      list.push(ctx.record.at);
      this.stats.polls.set(id, list);
    }
    const f = this.faults;

    if (inScope(f.hangOn, kind) && this.roll(f.hangRate)) {
      // Read the whole body so the client is left waiting for headers, like a hung backend.
      ctx.record.fault = 'hang';
      req.resume();
      return;
    }
    if (inScope(f.resetOn, kind) && this.roll(f.resetRate)) {
      if (f.resetWhen === 'mid-upload') {
        ctx.record.fault = 'reset';
        if (method === 'POST' || method === 'PUT') await firstChunk(req);
        req.socket.resetAndDestroy();
        return;
      }
      ctx.resetInsteadOfAnswer = true;
    }

    let body: Buffer | null = null;
    if (method === 'POST' || method === 'PUT') {
      const read = await readBody(req);
      if (read.kind === 'aborted') return;
      if (read.kind === 'too-large') {
        const message = `image: larger than ${MAX_IMAGE_BYTES} bytes`;
        await this.send(res, ctx, 413, errorBody('payload_too_large', message), {
          headers: read.drained ? {} : { connection: 'close' },
        });
        if (!read.drained) res.once('finish', () => req.socket.destroy());
        return;
      }
      body = read.data;
    }

    if (!this.authorized(req.headers.authorization)) {
      await this.send(res, ctx, 401, errorBody('unauthorized', 'missing or invalid Bearer API key'), {
        headers: { 'www-authenticate': 'Bearer realm="sandbox"' },
      });
      return;
    }

    const wait = this.bucket?.take(performance.now()) ?? 0;
    if (wait > 0 || this.roll(f.rate429)) {
      ctx.record.fault = 'rate-limit';
      this.stats.rateLimited += 1;
      await this.send(res, ctx, 429, errorBody('rate_limited', 'too many requests, slow down'), {
        retryAfterMs: wait > 0 ? wait : 1000,
      });
      return;
    }
    if (kind === 'create' && f.failCreateWith) {
      const { status, code, message } = f.failCreateWith;
      ctx.record.fault = 'fail-create';
      await this.send(res, ctx, status, errorBody(code, message ?? `create refused (${code})`));
      return;
    }
    if (inScope(f.errorOn, kind) && this.roll(f.errorRate)) {
      const statuses = f.errorStatuses.length > 0 ? f.errorStatuses : [500];
      const status = statuses[Math.floor(this.rng() * statuses.length)] ?? 500;
      ctx.record.fault = 'error';
      await this.send(res, ctx, status, errorBody('server_error', `injected HTTP ${status}`));
      return;
    }

    if (kind === 'create') {
      await this.handleCreate(req, res, ctx, safeDecode(segments[2] ?? ''), body ?? Buffer.alloc(0));
    } else if (kind === 'poll') {
      await this.handlePoll(res, ctx, safeDecode(segments[2] ?? ''));
    } else if (segments[1] === 'styles' && segments.length === 2 && method === 'GET') {
      const styles = stylesBody(this.config.stylesShape);
      if (styles === null) await this.send(res, ctx, 404, errorBody('not_found', `no such path: ${path}`));
      else await this.send(res, ctx, 200, styles);
    } else if (
      (segments[1] === 'styles' && segments.length === 2) ||
      (segments[1] === 'jobs' && segments.length === 3) ||
      (segments[1] === 'modules' && segments.length === 3)
    ) {
      await this.send(res, ctx, 405, errorBody('method_not_allowed', `${method} is not allowed on ${path}`), {
        headers: { allow: segments[1] === 'modules' ? 'POST' : 'GET' },
      });
    } else {
      await this.send(res, ctx, 404, errorBody('not_found', `no such path: ${path}`));
    }
  }

  private authorized(header: string | undefined): boolean {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    const token = match?.[1];
    if (!token) return false;
    const key = this.config.apiKey;
    if (key === null) return true;
    const a = createHash('sha256').update(token).digest();
    const b = createHash('sha256').update(key).digest();
    return timingSafeEqual(a, b);
  }

  private async handleCreate(
    req: IncomingMessage,
    res: ServerResponse,
    ctx: RequestContext,
    moduleName: string,
    body: Buffer,
  ): Promise<void> {
    if (!MODULE_NAMES.includes(moduleName)) {
      await this.send(res, ctx, 404, errorBody('not_found', `unknown module "${moduleName}"`));
      return;
    }
    const module = moduleName as ModuleName;
    const contentType = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data\s*;/i.test(contentType)) {
      await this.send(
        res,
        ctx,
        415,
        errorBody('unsupported_media_type', 'the request body must be multipart/form-data'),
      );
      return;
    }
    const form = await parseMultipart(body, contentType);
    const invalid = (message: string) => this.send(res, ctx, 422, errorBody('validation_error', message));
    if (!form) return invalid('body: not valid multipart/form-data');
    const image = form.get('image');
    if (image === null || typeof image === 'string') {
      return invalid('image: required, as a file part named "image"');
    }
    const bytes = Buffer.from(await image.arrayBuffer());
    if (bytes.length > MAX_IMAGE_BYTES) {
      await this.send(
        res,
        ctx,
        413,
        errorBody(
          'payload_too_large',
          `image: ${bytes.length} bytes, over the ${MAX_IMAGE_BYTES} byte limit`,
        ),
      );
      return;
    }
    if (sniffImage(bytes) === null) {
      await this.send(
        res,
        ctx,
        415,
        errorBody('unsupported_media_type', 'image: not a JPEG, PNG or WebP image (judged by its content)'),
      );
      return;
    }
    let style: string | null = null;
    if (module === 'change-style') {
      const raw = form.get('style');
      if (typeof raw !== 'string' || raw.trim() === '') return invalid('style: required for change-style');
      if (!isSandboxStyle(raw)) {
        const keys = SANDBOX_STYLES.map((s) => s.key).join(', ');
        return invalid(`style: unknown style "${raw.slice(0, 60)}"; valid styles: ${keys}`);
      }
      style = raw;
      const prompt = form.get('prompt');
      if (prompt !== null && typeof prompt !== 'string') return invalid('prompt: must be a text field');
    } else {
      const raw = form.get('configuration');
      if (raw !== null) {
        if (typeof raw !== 'string') return invalid('configuration: must be a text field holding JSON');
        let parsed: unknown;
        try {
          parsed = JSON.parse(raw);
        } catch {
          return invalid('configuration: not valid JSON');
        }
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
          return invalid('configuration: must be a JSON object');
        }
      }
    }

    const job = this.createJob(module, style, bytes);
    const itemKey = `${createHash('sha256').update(bytes).digest('hex')}|${module}|${style ?? ''}`;
    this.stats.createsByItem.set(itemKey, (this.stats.createsByItem.get(itemKey) ?? 0) + 1);
    this.stats.jobs += 1;
    const view = this.jobView(job);
    await this.send(res, ctx, 202, { job: view, links: { self: `${this.url}/v1/jobs/${job.id}` } });
  }

  private createJob(module: ModuleName, style: string | null, image: Buffer): JobRecord {
    const now = performance.now();
    const { processingMs, jitterMs, queuedMs } = this.config;
    const processing = Math.max(0, processingMs + (this.rng() * 2 - 1) * jitterMs);
    const fate = this.roll(this.faults.failRate)
      ? 'fail'
      : this.roll(this.faults.stuckRate)
        ? 'stuck'
        : 'succeed';
    const job: JobRecord = {
      id: newId('job_', 12),
      module,
      style,
      createdWall: Date.now(),
      createdAt: now,
      queuedUntil: now + queuedMs,
      doneAt: now + queuedMs + processing,
      fate,
      tokens: [],
    };
    if (fate === 'succeed') {
      // Rendering starts now; a job whose render is still running reads as processing.
      renderResult(image, module, style).then(
        (result) => {
          job.result = result;
          job.renderedAt = performance.now();
        },
        (error: unknown) => {
          job.renderError = error instanceof Error ? error.message : String(error);
          job.renderedAt = performance.now();
        },
      );
    }
    this.jobs.set(job.id, job);
    this.evictOldJobs();
    return job;
  }

  private evictOldJobs(): void {
    while (this.jobs.size > this.config.maxJobs) {
      const oldest = this.jobs.keys().next();
      if (oldest.done) return;
      const job = this.jobs.get(oldest.value);
      for (const token of job?.tokens ?? []) this.tokens.delete(token);
      this.jobs.delete(oldest.value);
    }
  }

  private timestamp(wall: number): string {
    return isoWithOffset(new Date(wall + this.faults.dateSkewMs));
  }

  /** The job as the spec shows it, at this moment. */
  private jobView(job: JobRecord): Record<string, unknown> {
    const now = performance.now();
    const at = (monotonic: number) => this.timestamp(job.createdWall + (monotonic - job.createdAt));
    const base = { id: job.id, module: job.module, created_at: this.timestamp(job.createdWall) };
    if (now < job.queuedUntil) return { ...base, status: 'queued', updated_at: base.created_at };
    const rendering = job.fate === 'succeed' && job.renderedAt === undefined;
    if (job.fate === 'stuck' || now < job.doneAt || rendering) {
      return { ...base, status: 'processing', updated_at: at(job.queuedUntil) };
    }
    const finished = Math.max(job.doneAt, job.renderedAt ?? 0);
    if (job.fate === 'fail' || job.renderError !== undefined || !job.result) {
      const error =
        job.fate === 'fail'
          ? { code: this.faults.failCode, message: this.faults.failMessage }
          : {
              code: 'invalid_image',
              message: `the image could not be decoded: ${job.renderError ?? 'unknown'}`,
            };
      return { ...base, status: 'failed', updated_at: at(finished), error };
    }
    return {
      ...base,
      status: 'succeeded',
      updated_at: at(finished),
      result: { image_url: this.currentUrl(job, job.result) },
      processing_time_ms: Math.round(finished - job.queuedUntil),
    };
  }

  /** The job's result URL; an expired one is replaced, so a fresh poll gives a working URL. */
  private currentUrl(job: JobRecord, result: RenderedImage): string {
    const now = performance.now();
    const ttl = this.faults.resultTtlMs;
    if (!job.token || (ttl !== null && now - job.token.issuedAt >= ttl)) {
      const value = randomBytes(16).toString('hex');
      job.token = { value, issuedAt: now };
      job.tokens.push(value);
      this.tokens.set(value, { jobId: job.id, issuedAt: now });
    }
    return `${this.url}/storage/${job.token.value}/${job.id}.${result.ext}`;
  }

  private async handlePoll(res: ServerResponse, ctx: RequestContext, id: string): Promise<void> {
    const job = this.jobs.get(id);
    const f = this.faults;
    if (!job || this.roll(f.pollNotFoundRate)) {
      if (job) ctx.record.fault = 'poll-not-found';
      await this.send(res, ctx, 404, errorBody('not_found', `no job with id "${id.slice(0, 80)}"`));
      return;
    }
    const view = this.jobView(job);
    if (this.roll(f.malformedRate)) {
      ctx.record.fault = 'malformed';
      const variant = Math.floor(this.rng() * 3);
      if (variant === 0) {
        const text = `{"job":{"id":"${job.id}","status":"proc`;
        await this.send(res, ctx, 200, null, { raw: { text, contentType: 'application/json' } });
      } else {
        const { id: _id, status: _status, ...rest } = view;
        const broken = variant === 1 ? { ...rest, status: view.status } : { ...rest, id: view.id };
        await this.send(res, ctx, 200, { job: broken });
      }
      return;
    }
    if (this.roll(f.badStatusRate)) {
      ctx.record.fault = 'bad-status';
      const { result: _result, ...rest } = view;
      await this.send(res, ctx, 200, { job: { ...rest, status: 'exploded' } });
      return;
    }
    await this.send(res, ctx, 200, { job: view });
  }

  private async handleStorage(
    req: IncomingMessage,
    res: ServerResponse,
    ctx: RequestContext,
    origin: 'primary' | 'secondary',
  ): Promise<void> {
    const path = ctx.record.path;
    this.stats.storageRequests.push({ path, origin, headers: { ...req.headers } });
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      await this.send(res, ctx, 405, errorBody('method_not_allowed', `${method} is not allowed here`), {
        headers: { allow: 'GET, HEAD' },
      });
      return;
    }
    const [, storage, token, file] = path.split('/');
    const entry = storage === 'storage' && token ? this.tokens.get(token) : undefined;
    const job = entry ? this.jobs.get(entry.jobId) : undefined;
    const result = job?.result;
    if (!entry || !job || !result || file !== `${job.id}.${result.ext}`) {
      await this.send(res, ctx, 404, errorBody('not_found', 'no such result'));
      return;
    }
    const ttl = this.faults.resultTtlMs;
    if (ttl !== null && performance.now() - entry.issuedAt >= ttl) {
      await this.send(res, ctx, 410, errorBody('expired', 'this result URL has expired; poll the job again'));
      return;
    }
    const fault =
      origin === 'primary' && this.roll(this.faults.resultFaultRate) ? this.faults.resultFault : null;
    if (fault) ctx.record.fault = fault;
    switch (fault) {
      case 'not-found':
        await this.send(res, ctx, 404, errorBody('not_found', 'no such result'));
        return;
      case 'wrong-type':
        await this.send(res, ctx, 200, null, {
          raw: {
            text: '<!doctype html><html><body><h1>Storage maintenance</h1><p>Please try later.</p></body></html>',
            contentType: 'text/html; charset=utf-8',
          },
        });
        return;
      case 'redirect-cross-origin':
        await this.send(res, ctx, 302, null, {
          headers: { location: `${this.secondaryUrl}${path}` },
          raw: { text: '', contentType: 'text/plain' },
        });
        return;
      default:
        break;
    }
    if (!(await this.delay())) return;
    this.writeHead(res, 200, {
      'content-type': result.contentType,
      'content-length': String(fault === 'oversized' ? OVERSIZED_BYTES : result.data.length),
      'cache-control': 'private, max-age=3600',
    });
    if (method === 'HEAD') {
      res.end();
      return;
    }
    if (fault === 'truncated') {
      // Promise the whole image, deliver half, then drop the connection.
      res.write(result.data.subarray(0, Math.floor(result.data.length / 2)), () => res.socket?.destroy());
      return;
    }
    if (fault === 'slow-drip') {
      await this.drip(res, result.data);
      return;
    }
    if (fault === 'oversized') {
      await this.writeOversized(res, result.data);
      return;
    }
    res.end(result.data);
  }

  private async drip(res: ServerResponse, data: Buffer): Promise<void> {
    for (let offset = 0; offset < data.length; offset += DRIP_BYTES) {
      if (res.destroyed || this.lifetime.signal.aborted) return;
      res.write(data.subarray(offset, offset + DRIP_BYTES));
      if (!(await this.sleep(DRIP_INTERVAL_MS))) return;
    }
    res.end();
  }

  private async writeOversized(res: ServerResponse, image: Buffer): Promise<void> {
    res.write(image);
    const padding = Buffer.alloc(64 * 1024);
    let sent = image.length;
    while (sent < OVERSIZED_BYTES) {
      if (res.destroyed || this.lifetime.signal.aborted) return;
      const chunk = padding.subarray(0, Math.min(padding.length, OVERSIZED_BYTES - sent));
      sent += chunk.length;
      if (!res.write(chunk)) {
        // Honour backpressure so a client that stops reading does not balloon our memory.
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
      }
    }
    res.end();
  }

  /** Sleeps unless the sandbox closes first; false when it closed. */
  private sleep(ms: number): Promise<boolean> {
    const signal = this.lifetime.signal;
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(true);
      }, ms);
      const onAbort = () => {
        clearTimeout(timer);
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The `slowMs` knob; false when the sandbox closed meanwhile. */
  private async delay(): Promise<boolean> {
    const ms = this.faults.slowMs;
    return ms > 0 ? this.sleep(ms) : !this.lifetime.signal.aborted;
  }

  /** Writes the status line and headers with the (possibly skewed) Date. */
  private writeHead(
    res: ServerResponse,
    status: number,
    headers: Record<string, string>,
    serverNow?: number,
  ): void {
    res.setHeader('date', new Date(serverNow ?? Date.now() + this.faults.dateSkewMs).toUTCString());
    res.writeHead(status, headers);
  }

  /** Answers (after `slowMs`), or resets the connection when an after-body reset was rolled. */
  private async send(
    res: ServerResponse,
    ctx: RequestContext,
    status: number,
    body: unknown,
    options: SendOptions = {},
  ): Promise<void> {
    if (!(await this.delay())) return;
    if (res.destroyed || res.headersSent) return;
    if (ctx.resetInsteadOfAnswer) {
      ctx.record.fault = 'reset';
      res.socket?.resetAndDestroy();
      return;
    }
    const serverNow = Date.now() + this.faults.dateSkewMs;
    const text = options.raw ? options.raw.text : JSON.stringify(body);
    const headers: Record<string, string> = {
      'content-type': options.raw ? options.raw.contentType : 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(text)),
      ...options.headers,
    };
    if (options.retryAfterMs !== undefined) {
      const value = retryAfterValue(this.faults.retryAfter, options.retryAfterMs, serverNow);
      if (value !== undefined) headers['retry-after'] = value;
    }
    this.writeHead(res, status, headers, serverNow);
    res.end(text);
  }
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
