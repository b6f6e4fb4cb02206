/**
 * The output store an `--out` names: a local folder, or a bucket prefix (`s3://bucket/prefix/`)
 * with its local cache folder. For commands that only write outputs (`report --redis`, the worker);
 * a run's folder with its journal and lock is opened by `state/remote-folder.ts`.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { kitchenCacheDir } from '../util/cache-dir.js';
import { LocalOutputStore } from './local-output.js';
import type { S3Env } from './s3/client.js';
import { isS3Ref } from './s3/ref.js';
import type { OutputStore } from './types.js';

/**
 * `${XDG_CACHE_HOME:-~/.cache}/kitchen-batch/out/<16 hex of the URL's sha256>`: one cache per output
 * URL, so two runs of two prefixes on one machine never share one. `sub` keeps a worker's apart.
 */
export function defaultCacheDir(url: string, env: S3Env = process.env, sub?: string): string {
  const key = createHash('sha256').update(url).digest('hex').slice(0, 16);
  return path.join(kitchenCacheDir(env), 'out', key, ...(sub ? [sub] : []));
}

/** An opened output store, and how to let go of its connections. */
export interface OpenedOutput {
  output: OutputStore;
  /** The local folder of a bucket's cache (null for a local folder). */
  cacheDir: string | null;
  close(): void;
}

/**
 * The store of `out` (a folder, or `s3://...` with `cacheDir`, by default {@link defaultCacheDir}).
 * The AWS SDK and our S3 output store are loaded only for a bucket.
 */
export async function openOutputStore(
  out: string,
  options: { cacheDir?: string | null; env: S3Env },
): Promise<OpenedOutput> {
  if (!isS3Ref(out)) return { output: new LocalOutputStore(out), cacheDir: null, close: () => {} };
  const [{ parseOutputUrl }, { closeS3Access, createS3Client }, { S3OutputStore }] = await Promise.all([
    import('./s3/output-url.js'),
    import('./s3/client.js'),
    import('./s3/output-store.js'),
  ]);
  const { bucket, prefix } = parseOutputUrl(out);
  const cacheDir = options.cacheDir ?? defaultCacheDir(out, options.env);
  const access = createS3Client(options.env, { directPuts: true });
  return {
    output: new S3OutputStore({ access, bucket, prefix, cacheDir }),
    cacheDir,
    close: () => closeS3Access(access),
  };
}
