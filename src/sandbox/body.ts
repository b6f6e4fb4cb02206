/** Request body reading for the sandbox: capped, so an oversized upload never fills memory. */
import type { IncomingMessage } from 'node:http';

/** The service's image limit: 10 MB read as 10^7 bytes, the smaller reading of "10 MB". */
export const MAX_IMAGE_BYTES = 10_000_000;
/** Room for the multipart framing and the other fields around a maximal image. */
const MAX_BODY_BYTES = MAX_IMAGE_BYTES + 1_000_000;
/** Past this we stop reading at all and drop the connection after answering 413. */
const HARD_CAP_BYTES = 64 * 1024 * 1024;

/** What reading a body gave. */
export type BodyResult =
  | { kind: 'ok'; data: Buffer }
  /** Over the limit; `drained` tells whether the rest was read (so a 413 can be answered cleanly). */
  | { kind: 'too-large'; drained: boolean }
  /** The client went away. */
  | { kind: 'aborted' };

/**
 * Reads a request body, keeping at most {@link MAX_BODY_BYTES}. A body somewhat over the limit is
 * drained (discarded) so the client sees the 413 rather than a broken pipe; a huge one is cut off.
 */
export function readBody(req: IncomingMessage): Promise<BodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > HARD_CAP_BYTES) {
    return Promise.resolve({ kind: 'too-large', drained: false });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const finish = (result: BodyResult) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total <= MAX_BODY_BYTES) chunks.push(chunk);
      else chunks.length = 0;
      if (total > HARD_CAP_BYTES) {
        req.pause();
        finish({ kind: 'too-large', drained: false });
      }
    });
    req.on('end', () =>
      finish(
        total > MAX_BODY_BYTES
          ? { kind: 'too-large', drained: true }
          : { kind: 'ok', data: Buffer.concat(chunks) },
      ),
    );
    req.on('error', () => finish({ kind: 'aborted' }));
    req.on('close', () => finish({ kind: 'aborted' }));
  });
}

/** Resolves when the first body chunk arrived (or the body ended), so a reset lands mid-upload. */
export function firstChunk(req: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    req.once('data', () => {
      req.pause();
      resolve();
    });
    req.once('end', () => resolve());
    req.once('error', () => resolve());
    req.once('close', () => resolve());
  });
}

/** Parses a multipart/form-data body with Node's own (undici) parser; `null` when it is not valid. */
export async function parseMultipart(body: Buffer, contentType: string): Promise<FormData | null> {
  try {
    return await new Request('http://sandbox.invalid/', {
      method: 'POST',
      headers: { 'content-type': contentType },
      body,
    }).formData();
  } catch {
    return null;
  }
}
