import { KitchenError } from '../errors.js';

/** What kind of failure an {@link ApiError} is. */
export type ApiErrorKind =
  /** The service answered with an HTTP error status. */
  | 'http'
  /** The connection failed or was reset. */
  | 'network'
  /** A connect or total timeout fired. */
  | 'timeout'
  /** The service answered, but the body broke the spec (malformed JSON, missing job.id, …). */
  | 'protocol';

/** Which request failed: method and path only, never headers or the key. */
export interface ApiRequestInfo {
  method: string;
  path: string;
}

/** Fields of an {@link ApiError}. */
export interface ApiErrorInit {
  kind: ApiErrorKind;
  code: string;
  message: string;
  request: ApiRequestInfo;
  status?: number;
  serviceCode?: string | null;
  serviceMessage?: string | null;
  retryAfterMs?: number;
  /** Low-level error code (ECONNRESET, ETIMEDOUT, …) when there was one. */
  errno?: string;
  /** Whether any byte of the request may have reached the service (decides `mayHaveCreatedJob`). */
  requestMayHaveReached: boolean;
  cause?: unknown;
}

const PERMANENT_STATUSES = new Set([400, 401, 403, 404, 405, 409, 410, 413, 415, 422]);
/** Statuses after which a POST certainly created nothing (the service said so, or was not up). */
const NOT_CREATED_STATUSES = new Set([429, 503]);

/**
 * The one error of the service client. Callers decide by properties, never by the message:
 * - `transient`: retrying the same request may succeed (429, 5xx, network, timeouts, protocol noise);
 * - `auth`: 401/403, the whole run must stop;
 * - `mayHaveCreatedJob`: for a job submission, whether the service may already have created the job
 *   (so resending it could bill twice).
 */
export class ApiError extends KitchenError {
  readonly kind: ApiErrorKind;
  readonly status: number | undefined;
  readonly serviceCode: string | null;
  readonly serviceMessage: string | null;
  readonly request: ApiRequestInfo;
  readonly retryAfterMs: number | undefined;
  readonly errno: string | undefined;
  readonly transient: boolean;
  readonly auth: boolean;
  readonly mayHaveCreatedJob: boolean;

  constructor(init: ApiErrorInit) {
    super(init.code, `${init.request.method} ${init.request.path}: ${init.message}`, { cause: init.cause });
    this.kind = init.kind;
    this.status = init.status;
    this.serviceCode = init.serviceCode ?? null;
    this.serviceMessage = init.serviceMessage ?? null;
    this.request = init.request;
    this.retryAfterMs = init.retryAfterMs;
    this.errno = init.errno;
    this.auth = init.status === 401 || init.status === 403;
    this.transient =
      init.kind !== 'http' ||
      init.status === undefined ||
      (!PERMANENT_STATUSES.has(init.status) && (init.status === 429 || init.status >= 500));
    this.mayHaveCreatedJob =
      init.kind === 'http'
        ? init.status !== undefined && init.status >= 500 && !NOT_CREATED_STATUSES.has(init.status)
        : init.requestMayHaveReached;
  }

  /** 429 */
  get rateLimited(): boolean {
    return this.status === 429;
  }
}

const CODE_BY_STATUS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  410: 'gone',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable',
  429: 'rate_limited',
};

/** The factory: an HTTP error status plus its parsed body and headers → ApiError. */
export function httpError(
  request: ApiRequestInfo,
  status: number,
  body: { code: string | null; message: string | null },
  retryAfterMs: number | undefined,
): ApiError {
  const code = CODE_BY_STATUS[status] ?? (status >= 500 ? 'server_error' : `http_${status}`);
  const detail = body.message ?? body.code ?? 'no error message in the response';
  return new ApiError({
    kind: 'http',
    code,
    message: `HTTP ${status}${body.code ? ` ${body.code}` : ''}: ${detail}`,
    request,
    status,
    serviceCode: body.code,
    serviceMessage: body.message,
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    requestMayHaveReached: true,
  });
}

/** Errno codes after which nothing was sent: the connection never opened. */
const NOT_SENT_ERRNOS = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** got timeout events that fire before the request could be written. */
const NOT_SENT_TIMEOUT_EVENTS = new Set(['lookup', 'connect', 'secureConnect']);

/** The factory for failures without an HTTP status (network, timeout). */
export function transportError(
  request: ApiRequestInfo,
  errno: string | undefined,
  timeoutEvent: string | undefined,
  cause: unknown,
): ApiError {
  const isTimeout = timeoutEvent !== undefined || errno === 'ETIMEDOUT';
  const notSent =
    (errno !== undefined && NOT_SENT_ERRNOS.has(errno)) ||
    (timeoutEvent !== undefined && NOT_SENT_TIMEOUT_EVENTS.has(timeoutEvent));
  const what = isTimeout
    ? `timed out${timeoutEvent ? ` (${timeoutEvent})` : ''}`
    : `connection failed${errno ? ` (${errno})` : ''}`;
  return new ApiError({
    kind: isTimeout ? 'timeout' : 'network',
    code: isTimeout ? 'timeout' : 'network_error',
    message: what,
    request,
    ...(errno !== undefined ? { errno } : {}),
    requestMayHaveReached: !notSent,
    cause,
  });
}

/** The factory for a response that broke the spec. */
export function protocolError(request: ApiRequestInfo, message: string, status?: number): ApiError {
  return new ApiError({
    kind: 'protocol',
    code: 'bad_response',
    message,
    request,
    ...(status !== undefined ? { status } : {}),
    // A malformed 202 may still mean a created job.
    requestMayHaveReached: true,
  });
}
