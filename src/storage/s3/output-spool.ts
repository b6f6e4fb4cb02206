/**
 * The local side of the S3 output store (issue 33): temp files in `<cacheDir>/staging/` that a body,
 * a streamed writer or a download fills before one PutObject sends them whole (an S3 PUT is whole or
 * absent, so nothing partial ever shows in the bucket), and the {@link ObjectWriter} over them.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { LocalObjectWriter } from '../local-output.js';
import type { ObjectWriter, PutBody, StoredObject } from '../types.js';

/** The suffix every staged or spooled file has, so that a sweep recognises them. */
export const STAGED_SUFFIX = '.part';

/** `results/k1` as one file name (`results~k1`), so staged names say what they were for. */
export function flatName(key: string): string {
  return key.replaceAll('/', '~');
}

/** A fresh staged file's path for `near` (`<flat near>.<pid>.<random>.part`), its folder created. */
export async function stagedPath(stagingDir: string, near: string): Promise<string> {
  await mkdir(stagingDir, { recursive: true });
  const name = `${flatName(near)}.${process.pid}.${randomBytes(4).toString('hex')}${STAGED_SUFFIX}`;
  return path.join(stagingDir, name);
}

/** Writes a whole body (text, bytes, or a stream of either) to `file`; removes it on failure. */
export async function spool(file: string, body: PutBody): Promise<void> {
  const handle = await open(file, 'w');
  try {
    if (typeof body === 'string' || body instanceof Uint8Array) await handle.writeFile(body);
    else for await (const chunk of body) await handle.writeFile(chunk);
    await handle.close();
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(file, { force: true });
    throw error;
  }
}

/**
 * {@link ObjectWriter} of the S3 store: text spooled to a staged file (the local store's writer, in
 * 64 KiB writes), which `send` PUTs on commit; the file is removed afterwards, sent or not.
 */
export async function spoolWriter(
  stagingDir: string,
  key: string,
  send: (file: string) => Promise<StoredObject>,
): Promise<ObjectWriter> {
  const file = await stagedPath(stagingDir, key);
  return new LocalObjectWriter(await open(file, 'w'), file, false, async () => {
    try {
      return await send(file);
    } finally {
      await rm(file, { force: true });
    }
  });
}
