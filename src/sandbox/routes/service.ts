/**
 * The `/v1` routes: create (with the service's validation), poll, styles, and 404/405 for the
 * rest, behind the per-request faults (hang, reset, rate limit, injected errors) and the key check.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { sniffImage } from '../../image/format.js';
import { MODULES, type ModuleId } from '../../types.js';
import { monotonicMs } from '../../util/time.js';
import { firstChunk, MAX_IMAGE_BYTES, parseMultipart, readBody } from '../body.js';
import type { SandboxContext } from '../context.js';
import { inScope } from '../faults.js';
import { type Exchange, errorBody, send } from '../respond.js';
import { isSandboxStyle, SANDBOX_STYLES, stylesBody } from '../style-catalogue.js';

/** Which per-request fault scope a request falls in. */
type RequestKind = 'create' | 'poll' | 'other';

/** Answers one `/v1/*` request (any other path outside `/storage` gets 404 here too). */
export async function handleService(ctx: SandboxContext, ex: Exchange): Promise<void> {
  const { req, res, record } = ex;
  const path = record.path;
  const segments = path.split('/').filter(Boolean);
  if (segments[0] !== 'v1') {
    await send(ctx, ex, 404, errorBody('not_found', `no such path: ${path}`));
    return;
  }
  const method = req.method ?? 'GET';
  const kind: RequestKind =
    method === 'POST' && segments[1] === 'modules' && segments.length === 3
      ? 'create'
      : method === 'GET' && segments[1] === 'jobs' && segments.length === 3
        ? 'poll'
        : 'other';
  const { stats } = ctx;
  if (kind === 'create') stats.creates += 1;
  if (kind === 'poll') {
    const id = safeDecode(segments[2] ?? '');
    const list = stats.polls.get(id) ?? [];
    list.push(record.at);
    stats.polls.set(id, list);
  }
  const f = ctx.faults();

  if (inScope(f.hangOn, kind) && ctx.roll(f.hangRate)) {
    // Read the whole body so the client is left waiting for headers, like a hung backend.
    record.fault = 'hang';
    req.resume();
    return;
  }
  if (inScope(f.resetOn, kind) && ctx.roll(f.resetRate)) {
    if (f.resetWhen === 'mid-upload') {
      record.fault = 'reset';
      if (method === 'POST' || method === 'PUT') await firstChunk(req);
      req.socket.resetAndDestroy();
      return;
    }
    ex.resetInsteadOfAnswer = true;
  }

  let body: Buffer | null = null;
  if (method === 'POST' || method === 'PUT') {
    const read = await readBody(req);
    if (read.kind === 'aborted') return;
    if (read.kind === 'too-large') {
      const message = `image: larger than ${MAX_IMAGE_BYTES} bytes`;
      await send(ctx, ex, 413, errorBody('payload_too_large', message), {
        headers: read.drained ? {} : { connection: 'close' },
      });
      if (!read.drained) res.once('finish', () => req.socket.destroy());
      return;
    }
    body = read.data;
  }

  if (!authorized(ctx.apiKey, req.headers.authorization)) {
    await send(ctx, ex, 401, errorBody('unauthorized', 'missing or invalid Bearer API key'), {
      headers: { 'www-authenticate': 'Bearer realm="sandbox"' },
    });
    return;
  }

  const wait = ctx.rateLimitWait(monotonicMs());
  if (wait > 0 || ctx.roll(f.rate429)) {
    record.fault = 'rate-limit';
    stats.rateLimited += 1;
    await send(ctx, ex, 429, errorBody('rate_limited', 'too many requests, slow down'), {
      retryAfterMs: wait > 0 ? wait : 1000,
    });
    return;
  }
  if (kind === 'create' && f.failCreateWith) {
    const { status, code, message } = f.failCreateWith;
    record.fault = 'fail-create';
    await send(ctx, ex, status, errorBody(code, message ?? `create refused (${code})`));
    return;
  }
  if (inScope(f.errorOn, kind) && ctx.roll(f.errorRate)) {
    const statuses = f.errorStatuses.length > 0 ? f.errorStatuses : [500];
    const status = statuses[Math.floor(ctx.rng() * statuses.length)] ?? 500;
    record.fault = 'error';
    await send(ctx, ex, status, errorBody('server_error', `injected HTTP ${status}`));
    return;
  }

  if (kind === 'create') {
    await handleCreate(ctx, ex, safeDecode(segments[2] ?? ''), body ?? Buffer.alloc(0));
  } else if (kind === 'poll') {
    await handlePoll(ctx, ex, safeDecode(segments[2] ?? ''));
  } else if (segments[1] === 'styles' && segments.length === 2 && method === 'GET') {
    const styles = stylesBody(ctx.stylesShape);
    if (styles === null) await send(ctx, ex, 404, errorBody('not_found', `no such path: ${path}`));
    else await send(ctx, ex, 200, styles);
  } else if (
    (segments[1] === 'styles' && segments.length === 2) ||
    (segments[1] === 'jobs' && segments.length === 3) ||
    (segments[1] === 'modules' && segments.length === 3)
  ) {
    await send(ctx, ex, 405, errorBody('method_not_allowed', `${method} is not allowed on ${path}`), {
      headers: { allow: segments[1] === 'modules' ? 'POST' : 'GET' },
    });
  } else {
    await send(ctx, ex, 404, errorBody('not_found', `no such path: ${path}`));
  }
}

/** Whether the header carries the key (any non-empty Bearer token when `key` is null). */
function authorized(key: string | null, header: string | undefined): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  const token = match?.[1];
  if (!token) return false;
  if (key === null) return true;
  // Compare digests: equal lengths for timingSafeEqual, and no timing hint about the key.
  const a = createHash('sha256').update(token).digest();
  const b = createHash('sha256').update(key).digest();
  return timingSafeEqual(a, b);
}

function isModuleId(name: string): name is ModuleId {
  return (MODULES as readonly string[]).includes(name);
}

/** `POST /v1/modules/{module}`: validates like the service, then creates the job (202). */
async function handleCreate(
  ctx: SandboxContext,
  ex: Exchange,
  moduleName: string,
  body: Buffer,
): Promise<void> {
  if (!isModuleId(moduleName)) {
    await send(ctx, ex, 404, errorBody('not_found', `unknown module "${moduleName}"`));
    return;
  }
  const module = moduleName;
  const contentType = ex.req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(contentType)) {
    await send(
      ctx,
      ex,
      415,
      errorBody('unsupported_media_type', 'the request body must be multipart/form-data'),
    );
    return;
  }
  const form = await parseMultipart(body, contentType);
  const invalid = (message: string) => send(ctx, ex, 422, errorBody('validation_error', message));
  if (!form) return invalid('body: not valid multipart/form-data');
  const image = form.get('image');
  if (image === null || typeof image === 'string') {
    return invalid('image: required, as a file part named "image"');
  }
  const bytes = Buffer.from(await image.arrayBuffer());
  if (bytes.length > MAX_IMAGE_BYTES) {
    await send(
      ctx,
      ex,
      413,
      errorBody('payload_too_large', `image: ${bytes.length} bytes, over the ${MAX_IMAGE_BYTES} byte limit`),
    );
    return;
  }
  if (sniffImage(bytes) === null) {
    await send(
      ctx,
      ex,
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

  const job = ctx.jobs.create(module, style, bytes);
  ex.record.jobId = job.id;
  const { stats } = ctx;
  const itemKey = `${createHash('sha256').update(bytes).digest('hex')}|${module}|${style ?? ''}`;
  stats.createsByItem.set(itemKey, (stats.createsByItem.get(itemKey) ?? 0) + 1);
  stats.jobs += 1;
  if (job.bad) stats.badResults.set(job.id, job.bad);
  const view = ctx.jobs.view(job, ctx.url(), job.createdAt);
  await send(ctx, ex, 202, { job: view, links: { self: `${ctx.url()}/v1/jobs/${job.id}` } });
}

/** `GET /v1/jobs/{id}`, with the poll faults: purged (404), malformed body, unknown status. */
async function handlePoll(ctx: SandboxContext, ex: Exchange, id: string): Promise<void> {
  const job = ctx.jobs.get(id);
  const f = ctx.faults();
  if (!job || ctx.roll(f.pollNotFoundRate)) {
    if (job) ex.record.fault = 'poll-not-found';
    await send(ctx, ex, 404, errorBody('not_found', `no job with id "${id.slice(0, 80)}"`));
    return;
  }
  const view = ctx.jobs.view(job, ctx.url());
  if (ctx.roll(f.malformedRate)) {
    ex.record.fault = 'malformed';
    const variant = Math.floor(ctx.rng() * 3);
    if (variant === 0) {
      const text = `{"job":{"id":"${job.id}","status":"proc`;
      await send(ctx, ex, 200, null, { raw: { text, contentType: 'application/json' } });
    } else {
      const { id: _id, status: _status, ...rest } = view;
      const broken = variant === 1 ? { ...rest, status: view.status } : { ...rest, id: view.id };
      await send(ctx, ex, 200, { job: broken });
    }
    return;
  }
  if (ctx.roll(f.badStatusRate)) {
    ex.record.fault = 'bad-status';
    const { result: _result, ...rest } = view;
    await send(ctx, ex, 200, { job: { ...rest, status: 'exploded' } });
    return;
  }
  await send(ctx, ex, 200, { job: view });
}

/** A path segment decoded, or as it came when it is not valid percent-encoding. */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
