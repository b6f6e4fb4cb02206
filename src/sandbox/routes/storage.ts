/**
 * The result storage: `/storage/<token>/<job id>.<ext>` on the service origin, and every path on
 * the second origin (the redirect target of `redirect-cross-origin`). No key is needed or checked;
 * every request is recorded with all its headers so tests can prove the key never reached it.
 * The result faults strike here, and only on the service origin.
 */
import type { SandboxContext } from '../context.js';
import {
  drip,
  type Exchange,
  errorBody,
  OVERSIZED_BYTES,
  send,
  slowDelay,
  writeHead,
  writeOversized,
} from '../respond.js';

/** The page a `wrong-type` fault serves instead of the image. */
const MAINTENANCE_PAGE =
  '<!doctype html><html><body><h1>Storage maintenance</h1><p>Please try later.</p></body></html>';

/** Answers one storage request on either origin. */
export async function handleStorage(
  ctx: SandboxContext,
  ex: Exchange,
  origin: 'primary' | 'secondary',
): Promise<void> {
  const { req, res } = ex;
  const path = ex.record.path;
  ctx.stats.storageRequests.push({ path, origin, headers: { ...req.headers } });
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD') {
    await send(ctx, ex, 405, errorBody('method_not_allowed', `${method} is not allowed here`), {
      headers: { allow: 'GET, HEAD' },
    });
    return;
  }
  const [, storage, token, file] = path.split('/');
  const lookup =
    storage === 'storage' && token ? ctx.jobs.lookupResult(token, file) : { kind: 'not-found' as const };
  if (lookup.kind === 'not-found') {
    await send(ctx, ex, 404, errorBody('not_found', 'no such result'));
    return;
  }
  if (lookup.kind === 'expired') {
    await send(ctx, ex, 410, errorBody('expired', 'this result URL has expired; poll the job again'));
    return;
  }
  const { result } = lookup;
  const faults = ctx.faults();
  // No draw when no fault is set: a seed then replays the same job fates however downloads interleave.
  const fault =
    origin === 'primary' && faults.resultFault !== null && ctx.roll(faults.resultFaultRate)
      ? faults.resultFault
      : null;
  if (fault) ex.record.fault = fault;
  switch (fault) {
    case 'not-found':
      await send(ctx, ex, 404, errorBody('not_found', 'no such result'));
      return;
    case 'wrong-type':
      await send(ctx, ex, 200, null, {
        raw: { text: MAINTENANCE_PAGE, contentType: 'text/html; charset=utf-8' },
      });
      return;
    case 'redirect-cross-origin':
      await send(ctx, ex, 302, null, {
        headers: { location: `${ctx.secondaryUrl()}${path}` },
        raw: { text: '', contentType: 'text/plain' },
      });
      return;
    default:
      break;
  }
  if (!(await slowDelay(ctx))) return;
  if (fault === 'truncated-unsized') {
    // HTTP/1.1 without a length or chunking: the body ends when the connection closes.
    res.useChunkedEncodingByDefault = false;
    writeHead(ctx, res, 200, { 'content-type': result.contentType, connection: 'close' });
    res.end(result.data.subarray(0, Math.floor(result.data.length / 2)));
    return;
  }
  writeHead(ctx, res, 200, {
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
    await drip(ctx, res, result.data);
    return;
  }
  if (fault === 'oversized') {
    await writeOversized(ctx, res, result.data);
    return;
  }
  res.end(result.data);
}
