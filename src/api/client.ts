import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import got, { type Got, RequestError, type Response, TimeoutError } from 'got';
import { sniffImage, type UploadFormat } from '../image/format.js';
import { isLocalFsError } from '../util/fs.js';
import { parseRetryAfter } from '../util/retry-after.js';
import { normaliseBaseUrl } from './base-url.js';
import { ApiError, type ApiRequestInfo, httpError, protocolError, transportError } from './errors.js';
import { multipartBody, type Part } from './multipart.js';
import { type Job, parseErrorBody, parseJobEnvelope, parseStyles, type Style, WireError } from './wire.js';

/** Options of {@link KitchenClient}. */
export interface ClientOptions {
  /** Service root, e.g. `https://api.example.com`; `/v1/...` is appended. */
  baseUrl: string;
  /** Bearer key. Sent to `baseUrl` only, never to result URLs. */
  apiKey: string;
  /** Connect timeout per request. @default 10_000 */
  connectTimeoutMs?: number;
  /** Total time for a poll or styles request. @default 30_000 */
  requestTimeoutMs?: number;
  /** Total time for a job submission (upload included). @default 120_000 */
  uploadTimeoutMs?: number;
  /** Total time for a result download (a slow drip ends here). @default 300_000 */
  downloadTimeoutMs?: number;
  /** Byte cap of a result download. @default 50_000_000 */
  maxDownloadBytes?: number;
  /** @default 'kitchen-batch' */
  userAgent?: string;
}

/** A job submission. The image is a Buffer so the multipart body is built afresh on every attempt. */
export interface CreateJobInput {
  module: string;
  image: Uint8Array;
  filename: string;
  contentType: string;
  style?: string;
  prompt?: string;
  configuration?: Record<string, unknown>;
}

/** Per-call options. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** What {@link KitchenClient.downloadResult} wrote. */
export interface DownloadedFile {
  bytes: number;
  sha256: string;
  /** Format sniffed from the magic bytes. */
  format: UploadFormat;
  contentType: string | null;
  /**
   * The response declared its length (Content-Length) and exactly that many bytes arrived. A body
   * cut short then fails in transit; only a body delimited by the connection closing can end early
   * without an error (docs/faults.md D.20), and only such a body needs decoding to be trusted whole.
   */
  lengthChecked: boolean;
  /**
   * The bytes themselves, as they were hashed, when the caller asked to keep them
   * ({@link DownloadOptions.keepBytes}) and there were no more than that: a remote output store then
   * sends them without reading the file back. Null otherwise.
   */
  body: Buffer | null;
}

/** Options of {@link KitchenClient.downloadResult}. */
export interface DownloadOptions extends CallOptions {
  /** Keep the bytes in memory too (`body`) when the result is at most this many bytes. @default 0 */
  keepBytes?: number;
}

/**
 * Typed client over got for exactly the service's surface. One request per call: no retries, no
 * rate limiting (the pipeline owns both, in one place). Every failure is an {@link ApiError}.
 */
export class KitchenClient {
  readonly baseUrl: string;
  readonly #service: Got;
  readonly #storage: Got;
  readonly #keepAlive: { http: http.Agent; https: https.Agent };
  readonly #oneShot: { http: http.Agent; https: https.Agent };
  readonly #maxDownloadBytes: number;
  readonly #downloadTimeoutMs: number;
  readonly #uploadTimeoutMs: number;

  constructor(options: ClientOptions) {
    this.baseUrl = normaliseBaseUrl(options.baseUrl);
    const connect = options.connectTimeoutMs ?? 10_000;
    this.#maxDownloadBytes = options.maxDownloadBytes ?? 50_000_000;
    this.#downloadTimeoutMs = options.downloadTimeoutMs ?? 300_000;
    this.#uploadTimeoutMs = options.uploadTimeoutMs ?? 120_000;
    // Polls reuse connections. POSTs do not: a stale keep-alive socket reset under a POST is
    // indistinguishable from a reset after the service took the job (docs/faults.md B.10), and every
    // such case costs the user a `submit_unknown`. One extra handshake per paid job is cheaper.
    this.#keepAlive = {
      http: new http.Agent({ keepAlive: true, maxSockets: 64, timeout: 30_000 }),
      https: new https.Agent({ keepAlive: true, maxSockets: 64, timeout: 30_000 }),
    };
    this.#oneShot = {
      http: new http.Agent({ keepAlive: false }),
      https: new https.Agent({ keepAlive: false }),
    };
    const common = {
      retry: { limit: 0 },
      throwHttpErrors: false,
      followRedirect: true,
      headers: { 'user-agent': options.userAgent ?? 'kitchen-batch' },
    } as const;
    this.#service = got.extend({
      ...common,
      prefixUrl: this.baseUrl,
      agent: this.#keepAlive,
      timeout: { connect: connect, request: options.requestTimeoutMs ?? 30_000 },
      headers: {
        ...common.headers,
        accept: 'application/json',
        authorization: `Bearer ${options.apiKey}`,
      },
      // A redirect away from the service must not carry the key.
      hooks: {
        beforeRedirect: [
          (opts) => {
            const url = opts.url instanceof URL ? opts.url : undefined;
            if (url && !url.href.startsWith(`${this.baseUrl}/`)) opts.headers.authorization = undefined;
          },
        ],
      },
    });
    // Result downloads: a separate instance that has no Authorization header at all, so no code
    // path can attach the key to `result.image_url`, even when it sits on the service's host.
    this.#storage = got.extend({
      ...common,
      agent: this.#keepAlive,
      timeout: { connect: connect, request: this.#downloadTimeoutMs },
    });
  }

  /** `POST /v1/modules/{module}` → the queued job. */
  async createJob(input: CreateJobInput, options: CallOptions = {}): Promise<Job> {
    const path = `/v1/modules/${encodeURIComponent(input.module)}`;
    const request: ApiRequestInfo = { method: 'POST', path };
    // Built from the Buffer on each call: a consumed stream re-sent would upload an empty file.
    const parts: Part[] = [
      { name: 'image', data: input.image, filename: input.filename, contentType: input.contentType },
    ];
    if (input.style !== undefined) parts.push({ name: 'style', value: input.style });
    if (input.prompt !== undefined) parts.push({ name: 'prompt', value: input.prompt });
    if (input.configuration !== undefined) {
      parts.push({ name: 'configuration', value: JSON.stringify(input.configuration) });
    }
    const form = multipartBody(parts);
    const response = await this.#send(request, () =>
      this.#service.post(path.slice(1), {
        body: form.body,
        headers: { 'content-type': form.contentType },
        agent: this.#oneShot,
        timeout: { request: this.#uploadTimeoutMs },
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    );
    if (response.statusCode !== 202 && response.statusCode !== 200 && response.statusCode !== 201) {
      throw this.#statusError(request, response);
    }
    return this.#parse(request, response, (body) => parseJobEnvelope(body));
  }

  /** `GET /v1/jobs/{id}` → the job in any state. */
  async getJob(id: string, options: CallOptions = {}): Promise<Job> {
    const path = `/v1/jobs/${encodeURIComponent(id)}`;
    const request: ApiRequestInfo = { method: 'GET', path };
    const response = await this.#send(request, () =>
      this.#service.get(path.slice(1), options.signal ? { signal: options.signal } : {}),
    );
    if (response.statusCode !== 200) throw this.#statusError(request, response);
    return this.#parse(request, response, (body) => parseJobEnvelope(body, id));
  }

  /** `GET /v1/styles` → the styles, or `null` when the answer's shape is not understood. */
  async listStyles(options: CallOptions = {}): Promise<Style[] | null> {
    const request: ApiRequestInfo = { method: 'GET', path: '/v1/styles' };
    const response = await this.#send(request, () =>
      this.#service.get('v1/styles', options.signal ? { signal: options.signal } : {}),
    );
    if (response.statusCode !== 200) throw this.#statusError(request, response);
    try {
      return parseStyles(JSON.parse(response.body));
    } catch {
      return null;
    }
  }

  /**
   * Streams `result.image_url` to `destFile` (the caller's temp file), with no Authorization header,
   * a total deadline and a byte cap; checks the status and the magic bytes, hashes while writing,
   * fsyncs. On any failure the file is removed and an ApiError is thrown.
   */
  async downloadResult(
    url: string,
    destFile: string,
    options: DownloadOptions = {},
  ): Promise<DownloadedFile> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw protocolError({ method: 'GET', path: '(result url)' }, `result.image_url is not a URL`);
    }
    const request: ApiRequestInfo = { method: 'GET', path: parsed.pathname };
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw protocolError(request, `refusing result URL with scheme ${parsed.protocol}`);
    }
    const hash = createHash('sha256');
    let bytes = 0;
    let head = Buffer.alloc(0);
    let contentType: string | null = null;
    let declared: number | null = null;
    let status = 0;
    let errorBody = '';
    const max = this.#maxDownloadBytes;
    const keep = options.keepBytes ?? 0;
    let kept: Buffer[] | null = keep > 0 ? [] : null;
    const stream = this.#storage.stream(parsed, options.signal ? { signal: options.signal } : {});
    stream.once('response', (response: Response) => {
      status = response.statusCode;
      const ct = response.headers['content-type'];
      contentType = typeof ct === 'string' ? ct : null;
      const length = Number(response.headers['content-length']);
      declared = Number.isSafeInteger(length) && length >= 0 ? length : null;
    });
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        if (status !== 200) {
          if (errorBody.length < 2000) errorBody += chunk.toString('utf8');
          done();
          return;
        }
        bytes += chunk.length;
        if (bytes > max) {
          done(new ResultTooLargeError(max));
          return;
        }
        if (head.length < 16) head = Buffer.concat([head, chunk.subarray(0, 16 - head.length)]);
        hash.update(chunk);
        if (kept !== null && bytes <= keep) kept.push(chunk);
        else kept = null;
        done(null, chunk);
      },
    });
    // flush: the file is fsynced before it is closed (and before the pipeline resolves).
    const sink = createWriteStream(destFile, { flush: true });
    try {
      await pipeline(stream, meter, sink);
    } catch (error) {
      // A body that fails at once can fail before the file is even open: the stream then opens
      // (creating the file) and closes after the pipeline has rejected, so wait for that first.
      if (!sink.closed) await new Promise<void>((closed) => sink.once('close', () => closed()));
      await rm(destFile, { force: true });
      if (options.signal?.aborted) throw options.signal.reason;
      if (error instanceof ResultTooLargeError) {
        throw protocolError(request, `result is larger than the ${max}-byte cap`);
      }
      // Our own disk failing (full, read-only) is not the service's fault: no retry can fix it.
      if (isLocalFsError(error)) throw error;
      throw this.#toApiError(request, error);
    } finally {
      // got removes its listener on `signal` only when the request is destroyed, which a stream
      // that ended normally never is: without this, every download left a listener on the run's
      // signal holding the whole request (measured: 80 KB per item over a 10,000-item run).
      stream.destroy();
    }
    if (status !== 200) {
      await rm(destFile, { force: true });
      let body: unknown = null;
      try {
        body = JSON.parse(errorBody);
      } catch {}
      throw httpError(request, status, parseErrorBody(body), undefined);
    }
    const format = sniffImage(head);
    if (bytes === 0 || format === null) {
      await rm(destFile, { force: true });
      throw protocolError(
        request,
        bytes === 0
          ? 'result download is empty'
          : `result is not a JPEG, PNG or WebP image (content-type ${contentType ?? 'none'})`,
        status,
      );
    }
    return {
      bytes,
      sha256: hash.digest('hex'),
      format,
      contentType,
      lengthChecked: declared === bytes,
      body: kept === null ? null : Buffer.concat(kept, bytes),
    };
  }

  /** Closes the connection pools. */
  close(): void {
    this.#keepAlive.http.destroy();
    this.#keepAlive.https.destroy();
    this.#oneShot.http.destroy();
    this.#oneShot.https.destroy();
  }

  async #send(request: ApiRequestInfo, call: () => Promise<Response<string>>): Promise<Response<string>> {
    try {
      return await call();
    } catch (error) {
      throw this.#toApiError(request, error);
    }
  }

  #toApiError(request: ApiRequestInfo, error: unknown): unknown {
    if (error instanceof ApiError) return error;
    if (error instanceof RequestError) {
      // Our own abort (SIGINT, shutdown) is not a service failure: let the caller see it as is.
      if (error.name === 'AbortError' || error.options?.signal?.aborted) {
        return error.options.signal?.reason ?? error;
      }
      const timeoutEvent = error instanceof TimeoutError ? error.event : undefined;
      const cause = (error.cause ?? error) as NodeJS.ErrnoException;
      const errno = typeof cause.code === 'string' ? cause.code : error.code;
      return transportError(request, errno, timeoutEvent, redactedCause(error));
    }
    return transportError(request, undefined, undefined, error);
  }

  #statusError(request: ApiRequestInfo, response: Response<string>): ApiError {
    let body: unknown = null;
    try {
      body = JSON.parse(response.body);
    } catch {}
    const headers = response.headers as Record<string, string | string[] | undefined>;
    return httpError(request, response.statusCode, parseErrorBody(body), parseRetryAfter(headers));
  }

  #parse<T>(request: ApiRequestInfo, response: Response<string>, parse: (body: unknown) => T): T {
    let body: unknown;
    try {
      body = JSON.parse(response.body);
    } catch {
      throw protocolError(
        request,
        `response is not JSON (HTTP ${response.statusCode}, ${response.body.length} bytes)`,
        response.statusCode,
      );
    }
    try {
      return parse(body);
    } catch (error) {
      if (error instanceof WireError) throw protocolError(request, error.message, response.statusCode);
      throw error;
    }
  }
}

/**
 * got's RequestError holds the request options and the ClientRequest, both with the Authorization
 * header, so `console.error(apiError)` or a logger walking `cause` would print the key. Keep only
 * its name, code and message, and its low-level cause (a socket or timer error, no headers).
 */
function redactedCause(error: RequestError): Error {
  const inner = error.cause;
  const safe: NodeJS.ErrnoException = new Error(
    error.message,
    inner instanceof Error && !(inner instanceof RequestError) ? { cause: inner } : undefined,
  );
  safe.name = error.name;
  safe.code = error.code;
  return safe;
}

class ResultTooLargeError extends Error {
  constructor(max: number) {
    super(`over ${max} bytes`);
  }
}
