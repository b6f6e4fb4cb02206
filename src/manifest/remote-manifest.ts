/**
 * A manifest at an http(s) URL or in S3 (issue 32): fetched once through the sources (so under the
 * same address guard, size cap and S3 configuration as the images) into a temp file, streamed, then
 * read as a local file of the format its name says. The copy lives until the manifest is closed or
 * the process exits, since the manifest is read twice (checked whole, then item by item).
 */
import { createWriteStream, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ManifestError } from '../errors.js';
import { parseS3Ref } from '../storage/s3/ref.js';
import { createSources, isRemoteRef, type SourceAccess, sourceKind } from '../storage/sources.js';
import { redactUrl, redactUrlsInText } from '../util/redact-url.js';

export { isRemoteRef };

/**
 * The name of a remote manifest whose extension says its format: an http(s) URL's path without its
 * query or fragment (`https://x/m.csv?sig=..` → `/m.csv`), an S3 object's key as written.
 */
export function remoteName(ref: string): string {
  if (sourceKind(ref) === 's3') {
    try {
      return parseS3Ref(ref).key;
    } catch {
      return ref;
    }
  }
  const rest = ref.slice(ref.indexOf('//') + 2);
  const cut = rest.search(/[?#]/);
  const beforeQuery = cut < 0 ? rest : rest.slice(0, cut);
  const slash = beforeQuery.indexOf('/');
  return slash < 0 ? '' : beforeQuery.slice(slash);
}

/** The manifest error for a remote manifest that could not be fetched: redacted URL and reason. */
function fetchError(ref: string, error: unknown): ManifestError {
  const shown = redactUrl(ref);
  let reason = redactUrlsInText(error instanceof Error ? error.message : String(error));
  // The position names the manifest already: its name is not said twice.
  for (const prefix of [`${shown}: `, `source ${shown}: `]) {
    if (reason.startsWith(prefix)) reason = reason.slice(prefix.length);
  }
  return new ManifestError({ file: shown }, `cannot fetch the manifest: ${reason}`, { cause: error });
}

/** Temp folders of fetched manifests not yet removed: removed at exit at the latest. */
const pending = new Set<string>();
let exitHook = false;

function track(dir: string): void {
  pending.add(dir);
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const left of pending) rmSync(left, { recursive: true, force: true });
  });
}

/** A remote manifest's local copy. */
export interface FetchedManifest {
  /** Absolute path of the copy, named `manifest<ext>` after the remote name. */
  path: string;
  /** Removes the copy; safe to call twice. */
  remove(): Promise<void>;
}

/**
 * Copies the manifest at `ref` into a temp file under `os.tmpdir()`, streamed.
 * @throws ManifestError naming the redacted URL and the reason (404, forbidden, blocked by the
 *   address guard, too large, unreachable); nothing is left behind.
 */
export async function fetchManifest(ref: string, access: SourceAccess): Promise<FetchedManifest> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kb-manifest-'));
  track(dir);
  const remove = async () => {
    pending.delete(dir);
    await rm(dir, { recursive: true, force: true });
  };
  const file = path.join(dir, `manifest${path.posix.extname(remoteName(ref)).toLowerCase()}`);
  const sources = createSources(access);
  try {
    const opened = await sources.open(ref);
    await pipeline(opened.stream(), createWriteStream(file, { flags: 'wx' }));
    return { path: file, remove };
  } catch (error) {
    await remove();
    throw fetchError(ref, error);
  } finally {
    sources.close();
  }
}

/**
 * Checks that the manifest at `ref` can be fetched (a HEAD for S3, the head of a GET for http(s)),
 * without keeping it.
 * @throws ManifestError as {@link fetchManifest}.
 */
export async function statManifest(ref: string, access: SourceAccess): Promise<void> {
  const sources = createSources(access);
  try {
    await sources.stat(ref);
  } catch (error) {
    throw fetchError(ref, error);
  } finally {
    sources.close();
  }
}
