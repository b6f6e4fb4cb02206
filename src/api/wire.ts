/**
 * Wire shapes of the service and their tolerant parsers. The spec leaves much "not shown", so the
 * parsers check only what the pipeline relies on (job.id, job.status, result.image_url when
 * succeeded, error.code/message when failed), keep everything else in `raw`, and describe exactly
 * what was wrong when a required part is missing.
 */

/** Job states of the spec. */
export const JOB_STATUSES = ['queued', 'processing', 'succeeded', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** A job as the pipeline uses it (camelCase, checked), with the raw object kept. */
export interface Job {
  id: string;
  module: string | null;
  status: JobStatus;
  createdAt: string | null;
  updatedAt: string | null;
  /** Present when status is succeeded. */
  imageUrl: string | null;
  processingTimeMs: number | null;
  /** Present when status is failed. */
  error: { code: string; message: string } | null;
  raw: Record<string, unknown>;
}

/** A style the service offers. `name` when the service says one. */
export interface Style {
  key: string;
  name: string | null;
}

/** Thrown by the parsers: the message says what broke the spec. Turned into an ApiError by the client. */
export class WireError extends Error {
  override name = 'WireError';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/**
 * Parses a body that should hold `{ job: {...} }` (create and poll responses). `expectId` checks the
 * poll answered for the job we asked about.
 */
export function parseJobEnvelope(body: unknown, expectId?: string): Job {
  if (!isObject(body)) throw new WireError(`expected a JSON object with "job", got ${describe(body)}`);
  const job = body.job;
  if (!isObject(job)) throw new WireError(`response has no "job" object (got ${describe(job)})`);
  const id = job.id;
  if (typeof id !== 'string' || id === '') throw new WireError(`job.id is missing or not a string`);
  if (expectId !== undefined && id !== expectId) {
    throw new WireError(`asked for job ${expectId} but the response is for job ${id}`);
  }
  const status = job.status;
  if (typeof status !== 'string') throw new WireError(`job ${id}: job.status is missing or not a string`);
  if (!(JOB_STATUSES as readonly string[]).includes(status)) {
    throw new WireError(`job ${id}: unknown job.status "${status.slice(0, 40)}"`);
  }
  let imageUrl: string | null = null;
  let error: Job['error'] = null;
  const result = job.result;
  if (status === 'succeeded') {
    const url = isObject(result) ? result.image_url : undefined;
    if (typeof url !== 'string' || url === '') {
      throw new WireError(`job ${id} succeeded but job.result.image_url is missing`);
    }
    imageUrl = url;
  }
  if (status === 'failed') {
    const e = job.error;
    // The spec promises code and message; a failed job without them is still failed, so we keep
    // the failure and name what was missing rather than turn a terminal state into a retry loop.
    error = {
      code: isObject(e) && typeof e.code === 'string' && e.code ? e.code : 'unknown_failure',
      message:
        isObject(e) && typeof e.message === 'string' && e.message
          ? e.message
          : 'the service reported the job as failed without an error message',
    };
  }
  const ptm = job.processing_time_ms;
  return {
    id,
    module: optionalString(job.module),
    status: status as JobStatus,
    createdAt: optionalString(job.created_at),
    updatedAt: optionalString(job.updated_at),
    imageUrl,
    processingTimeMs: typeof ptm === 'number' && Number.isFinite(ptm) && ptm >= 0 ? Math.round(ptm) : null,
    error,
    raw: job,
  };
}

const STYLE_KEY_FIELDS = ['key', 'id', 'slug'] as const;
const STYLE_WRAPPERS = ['styles', 'data', 'items'] as const;

/**
 * Parses `GET /v1/styles`, whose shape the spec does not show: an array of strings, an array of
 * objects keyed `key`/`id`/`slug`, or either wrapped in `styles`/`data`/`items`.
 * Returns `null` when the shape is not understood (the caller warns and lets the service judge).
 */
export function parseStyles(body: unknown): Style[] | null {
  let list: unknown = body;
  if (isObject(body)) {
    list = undefined;
    for (const wrapper of STYLE_WRAPPERS) {
      if (Array.isArray(body[wrapper])) {
        list = body[wrapper];
        break;
      }
    }
  }
  if (!Array.isArray(list)) return null;
  const styles: Style[] = [];
  for (const entry of list) {
    if (typeof entry === 'string' && entry !== '') {
      styles.push({ key: entry, name: null });
      continue;
    }
    if (!isObject(entry)) return null;
    const keyField = STYLE_KEY_FIELDS.find((f) => typeof entry[f] === 'string' && entry[f] !== '');
    if (!keyField) return null;
    const name = entry.name ?? entry.display_name ?? entry.title ?? entry.label;
    styles.push({ key: entry[keyField] as string, name: typeof name === 'string' ? name : null });
  }
  // An empty list would reject every item as unknown_style: treat it as "not understood".
  return styles.length > 0 ? styles : null;
}

/** Parses an HTTP error body `{ error: { code, message } }` if it has that shape. */
export function parseErrorBody(body: unknown): { code: string | null; message: string | null } {
  const e = isObject(body) ? body.error : undefined;
  if (isObject(e)) {
    return { code: optionalString(e.code), message: optionalString(e.message) };
  }
  if (isObject(body) && typeof body.message === 'string') return { code: null, message: body.message };
  return { code: null, message: null };
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}
