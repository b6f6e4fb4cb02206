/**
 * Where a manifest's `image` is read from (issue 32): one {@link SourceStore} that sends each
 * reference to its store by its form: `s3://bucket/key` to S3, `http://` and `https://` to the
 * guarded fetcher, anything else to the local files. Built once per process from the
 * {@link SourceAccess} the command resolved (`--max-source-bytes`, `--allow-private-sources`, the
 * environment for S3), so every stage reads sources under the same policy.
 */
import { Readable } from 'node:stream';
import { DEFAULT_MAX_SOURCE_BYTES } from '../limits.js';
import { counted, type StoreOpListener } from './counted.js';
import { fetchSource, type SourceResponse } from './http/fetch.js';
import { SourceAgents } from './http/guard.js';
import { localSources } from './local-source.js';
import type { S3Env } from './s3/client.js';
import { isS3Ref } from './s3/ref.js';
import type {
  KnownSource,
  OpenedSource,
  SourceInfo,
  SourceNotModified,
  SourceReadOptions,
  SourceStore,
} from './types.js';

/** How sources may be reached: resolved once per command from its flags and environment. */
export interface SourceAccess {
  /** A remote source over this many bytes is refused unread (`--max-source-bytes`). */
  maxBytes: number;
  /** Let loopback and private addresses through the address guard (`--allow-private-sources`). */
  allowPrivate: boolean;
  /** Where the S3 client reads its configuration (normally `process.env`). */
  env: S3Env;
  /** Told of every source read and every output operation, for the metrics (`counted.ts`). */
  onStoreOp?: StoreOpListener;
}

/** The access a command has when it says nothing: the 200 MB cap, private addresses refused. */
export function defaultSourceAccess(env: S3Env = process.env): SourceAccess {
  return { maxBytes: DEFAULT_MAX_SOURCE_BYTES, allowPrivate: false, env };
}

/** The three forms of reference a manifest's `image` may take. */
export type SourceKind = 'local' | 'http' | 's3';

/** Which store a reference belongs to: by its scheme, case-insensitively for http(s). */
export function sourceKind(ref: string): SourceKind {
  if (isS3Ref(ref)) return 's3';
  if (/^https?:\/\//i.test(ref)) return 'http';
  return 'local';
}

/** Whether a reference is remote (read over the network, never a local path). */
export function isRemoteRef(ref: string): boolean {
  return sourceKind(ref) !== 'local';
}

/** The sources of one process: a {@link SourceStore} for every form, and what it holds open. */
export interface Sources extends SourceStore {
  readonly access: SourceAccess;
  openIfChanged(
    ref: string,
    known: KnownSource,
    options?: SourceReadOptions,
  ): Promise<OpenedSource | SourceNotModified>;
  /** Closes pooled connections (http keep-alive, the S3 client). */
  close(): void;
}

/**
 * {@link SourceStore} over http(s) URLs, through the address guard. `stat` reads the head of a GET
 * and drops the body (many sources answer no HEAD); `open` hands out the body as it streams.
 */
export class HttpSourceStore implements SourceStore {
  readonly #agents: SourceAgents;
  readonly #maxBytes: number;

  constructor(options: { allowPrivate: boolean; maxBytes: number }) {
    this.#agents = new SourceAgents({ allowPrivate: options.allowPrivate });
    this.#maxBytes = options.maxBytes;
  }

  async stat(ref: string): Promise<SourceInfo> {
    const response = await this.#get(ref, {});
    response.body.destroy();
    return infoOf(ref, response);
  }

  async open(ref: string, options: SourceReadOptions = {}): Promise<OpenedSource> {
    return this.#opened(ref, await this.#get(ref, options), options);
  }

  /**
   * A conditional GET with the validators the source sent last time; a source that sent neither is
   * read again whole (the caller compares the bytes' sha256).
   */
  async openIfChanged(
    ref: string,
    known: KnownSource,
    options: SourceReadOptions = {},
  ): Promise<OpenedSource | SourceNotModified> {
    if (known.etag === undefined && known.lastModified === undefined) return this.open(ref, options);
    const response = await fetchSource(ref, {
      ...this.#fetchOptions(options),
      ...(known.etag === undefined ? {} : { ifNoneMatch: known.etag }),
      ...(known.lastModified === undefined ? {} : { ifModifiedSince: known.lastModified }),
    });
    if (response.notModified) return { notModified: true, ref };
    return this.#opened(ref, response, options);
  }

  close(): void {
    this.#agents.destroy();
  }

  #opened(ref: string, first: SourceResponse, options: SourceReadOptions): OpenedSource {
    let response: SourceResponse | null = first;
    const take = async (): Promise<Readable> => {
      // The first read takes the body already under way; another read fetches it again.
      const body = (response ?? (await this.#get(ref, options))).body;
      response = null;
      return body;
    };
    const bytes = async () => Buffer.concat(await (await take()).toArray());
    return {
      ...infoOf(ref, first),
      localPath: null,
      stream: () => Readable.from(streamOf(take)),
      bytes,
      head: async (n) => (await bytes()).subarray(0, n),
      close: () => {
        response?.body.destroy();
        response = null;
      },
    };
  }

  #fetchOptions(options: SourceReadOptions) {
    return {
      agents: this.#agents,
      maxBytes: this.#maxBytes,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    };
  }

  async #get(ref: string, options: SourceReadOptions): Promise<SourceResponse> {
    const response = await fetchSource(ref, this.#fetchOptions(options));
    if (response.notModified) throw new Error(`unreachable: an unconditional GET of ${ref} answered 304`);
    return response;
  }
}

async function* streamOf(take: () => Promise<Readable>): AsyncGenerator<Buffer> {
  for await (const chunk of await take()) yield chunk as Buffer;
}

function infoOf(ref: string, response: SourceResponse): SourceInfo {
  const mtimeMs = response.lastModified === undefined ? Number.NaN : Date.parse(response.lastModified);
  return {
    ref,
    size: response.size ?? -1,
    mtimeMs: Number.isFinite(mtimeMs) ? mtimeMs : 0,
    version: response.etag ?? response.lastModified ?? '',
    ...(response.etag === undefined ? {} : { etag: response.etag }),
    ...(response.lastModified === undefined ? {} : { lastModified: response.lastModified }),
  };
}

/**
 * Opens `ref` only if it changed since it was `known`, through the store's own conditional read,
 * or, for a store without one (local files), by today's rule: equal size and mtime mean unchanged.
 */
export async function openIfChanged(
  store: SourceStore,
  ref: string,
  known: KnownSource,
  options: SourceReadOptions = {},
): Promise<OpenedSource | SourceNotModified> {
  if (store.openIfChanged) return store.openIfChanged(ref, known, options);
  const st = await store.stat(ref);
  if (st.size === known.size && st.mtimeMs === known.mtimeMs) return { notModified: true, ref };
  return store.open(ref, options);
}

/**
 * The sources of a process under `access`. The S3 client is made when the first `s3://` is read, and
 * only then are the AWS SDK and our S3 store loaded: a run of local files and URLs never loads them.
 */
export function createSources(access: SourceAccess): Sources {
  const http = new HttpSourceStore(access);
  let s3: { store: SourceStore; close(): void } | undefined;
  const s3Store = async (): Promise<SourceStore> => {
    if (s3) return s3.store;
    const [{ createS3Client }, { S3SourceStore }] = await Promise.all([
      import('./s3/client.js'),
      import('./s3/source-store.js'),
    ]);
    // Checked after the load: of reads started together, the first makes the one client.
    if (!s3) {
      const { client } = createS3Client(access.env);
      s3 = { store: new S3SourceStore(client, { maxBytes: access.maxBytes }), close: () => client.destroy() };
    }
    return s3.store;
  };
  const storeOf = async (ref: string): Promise<SourceStore> => {
    const kind = sourceKind(ref);
    return kind === 's3' ? s3Store() : kind === 'http' ? http : localSources;
  };
  const listener = access.onStoreOp;
  // Counted by the reference's form; the label never carries the reference itself.
  const count = <T>(ref: string, op: string, call: () => Promise<T>): Promise<T> => {
    if (!listener) return call();
    const kind = sourceKind(ref);
    return counted(listener, { store: 'source', kind: kind === 'local' ? 'file' : kind, op }, call);
  };
  return {
    access,
    stat: (ref) => count(ref, 'stat', async () => (await storeOf(ref)).stat(ref)),
    open: (ref, options) => count(ref, 'open', async () => (await storeOf(ref)).open(ref, options)),
    openIfChanged: (ref, known, options) =>
      count(ref, 'open_if_changed', async () => openIfChanged(await storeOf(ref), ref, known, options)),
    close() {
      http.close();
      s3?.close();
    },
  };
}
