/**
 * The preflight of remote sources (http(s) URLs, `s3://bucket/key`): each reference is streamed once
 * into a folder of its own under the preflighter's cache folder, hashed on the way, analysed from
 * that file, and kept only while an item holds it. Every `prepare` of a reference takes a hold and
 * every {@link RemotePreparations.release} gives one back; at zero the spooled bytes and the
 * preparations made from them are deleted and the reference is forgotten, so disk is bounded by the
 * items in flight, not by the catalogue, and a later row naming the same URL prepares it again.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SNIFF_BYTES } from '../image/sniff.js';
import { openIfChanged } from '../storage/sources.js';
import type { KnownSource, OpenedSource, SourceNotModified, SourceStore } from '../storage/types.js';
import type { AnalyseSource } from './analysis.js';
import type { CacheEntry } from './cache.js';
import { abandonable, type Limiter, remember } from './pool.js';
import { type PreflightResult, type SourceFile, sourceRefusal, toResult, unreadable } from './result.js';

/** What the remote path needs of its preflighter. */
export interface RemoteDeps {
  sources: SourceStore;
  /** The preflighter's cache folder (created on first use). */
  cacheDir: () => Promise<string>;
  /** Bounds the reads over the network (`sourceConcurrency`), apart from the sharp pool. */
  fetches: Limiter;
  /** Analyses a spooled source in the sharp pool and writes a preparation into `dir`. */
  prepare: (source: AnalyseSource, sourceSha256: string, dir: string, ref: string) => Promise<CacheEntry>;
  /** Called when a source was read and hashed. */
  onRead?: (ref: string, sourceSha256: string) => void;
}

/** One reference held by the items that need it. */
interface Held {
  promise: Promise<PreflightResult>;
  /** Callers who asked and have not released (or given up). */
  holds: number;
  /** Its folder (spooled source, preparations), once made. */
  dir: string | null;
  /** Ends a fetch nobody waits for any more. */
  controller: AbortController;
}

interface Spooled {
  file: string;
  sha: string;
  head: Buffer;
  bytes: number;
  info: SourceFile;
}

/**
 * How long one conditional check answers for the other items of its source. The styles of an image
 * are decided close together, so a few minutes share one request among them; a worker, which lives
 * across many enqueues, still asks again for a later batch.
 */
const CHECK_REUSE_MS = 5 * 60_000;

function aborted(reason: string): DOMException {
  return new DOMException(reason, 'AbortError');
}

/** The remote half of a preflighter; see the module's comment. */
export class RemotePreparations {
  readonly #deps: RemoteDeps;
  readonly #held = new Map<string, Held>();
  #closing = new AbortController();
  #root: Promise<string> | undefined;
  /** Recent conditional checks per reference: whether the source was unchanged for these validators. */
  readonly #checks = new Map<
    string,
    { validators: string; promise: Promise<boolean>; settled: boolean; at: number }
  >();
  /** Bodies of changed sources a check opened, waiting for the first prepare of their reference. */
  readonly #bodies = new Map<string, OpenedSource>();

  constructor(deps: RemoteDeps) {
    this.#deps = deps;
  }

  /**
   * Prepares `ref`, taking a hold the caller gives back with {@link release} once the result resolved
   * (a caller whose wait rejects holds nothing). `opened` is a body the caller already has (a
   * conditional read that found the source changed): read instead of fetching again.
   */
  prepare(ref: string, signal?: AbortSignal, opened?: OpenedSource): Promise<PreflightResult> {
    const pending = this.#bodies.get(ref);
    if (pending) {
      this.#bodies.delete(ref);
      if (opened) pending.close?.();
      else opened = pending;
    }
    if (signal?.aborted) {
      opened?.close?.();
      return Promise.reject(signal.reason);
    }
    let held = this.#held.get(ref);
    if (held) {
      // Fetched (or being fetched) for another item already: the other body is not needed.
      opened?.close?.();
      held.holds += 1;
    } else {
      const created: Held = {
        holds: 1,
        dir: null,
        controller: new AbortController(),
        promise: Promise.resolve() as never,
      };
      created.promise = this.#prepare(ref, created, opened);
      created.promise.catch(async () => {
        // Aborts and disk faults do not stick: a later call starts afresh.
        if (this.#held.get(ref) === created) this.#held.delete(ref);
        await this.#remove(created);
      });
      this.#held.set(ref, created);
      held = created;
    }
    return this.#wait(ref, held, signal);
  }

  /**
   * Asks the source whether it changed since it was `known`, once per reference and validators
   * however many items of it are decided (within {@link CHECK_REUSE_MS}): the others share the
   * answer. Null: the source changed; its body, already open, is what the next
   * {@link prepare} of the reference reads (so every caller prepares, and one request was sent).
   */
  async check(ref: string, known: KnownSource, signal?: AbortSignal): Promise<SourceNotModified | null> {
    const validators = [known.etag, known.lastModified, known.versionId].join('\0');
    const memo = this.#checks.get(ref);
    if (memo && memo.validators === validators && Date.now() - memo.at < CHECK_REUSE_MS) {
      const unchanged = await memo.promise.catch(() => undefined);
      if (unchanged === true) return { notModified: true, ref };
      if (unchanged === false) return null;
      // That check failed: this caller asks again.
    }
    let settle: (unchanged: boolean) => void = () => undefined;
    let fail: (error: unknown) => void = () => undefined;
    const entry = {
      validators,
      settled: false,
      at: Date.now(),
      promise: new Promise<boolean>((resolve, reject) => {
        settle = resolve;
        fail = reject;
      }),
    };
    entry.promise.catch(() => undefined);
    remember(this.#checks, ref, entry);
    try {
      const answer = await openIfChanged(this.#deps.sources, ref, known, signal ? { signal } : {});
      entry.settled = true;
      if ('notModified' in answer) {
        settle(true);
        return answer;
      }
      // Left for the first prepare, before any caller is told (they all prepare next).
      this.#bodies.get(ref)?.close?.();
      this.#bodies.set(ref, answer);
      settle(false);
      return null;
    } catch (error) {
      if (this.#checks.get(ref) === entry) this.#checks.delete(ref);
      fail(error);
      throw error;
    }
  }

  /** Gives back one hold of `ref`; the last one deletes its files. No-op for a reference not held. */
  async release(ref: string): Promise<void> {
    const held = this.#held.get(ref);
    if (held) await this.#drop(ref, held);
  }

  /** Ends every fetch and deletes every spooled file. */
  async close(): Promise<void> {
    this.#closing.abort(aborted('the preflight closed'));
    const all = [...this.#held.values()];
    this.#held.clear();
    this.#checks.clear();
    for (const body of this.#bodies.values()) body.close?.();
    this.#bodies.clear();
    await Promise.all(all.map((held) => held.promise.catch(() => undefined)));
    const root = await this.#root?.catch(() => undefined);
    if (root) await rm(root, { recursive: true, force: true });
    this.#root = undefined;
    // Closed as the local half is: a later prepare starts afresh.
    this.#closing = new AbortController();
  }

  async #drop(ref: string, held: Held): Promise<void> {
    held.holds -= 1;
    if (held.holds > 0) return;
    if (this.#held.get(ref) === held) this.#held.delete(ref);
    held.controller.abort(aborted('no item needs this source any more'));
    await held.promise.catch(() => undefined);
    await this.#remove(held);
  }

  async #remove(held: Held): Promise<void> {
    // A folder that cannot be removed now goes with the whole spool folder at close.
    if (held.dir !== null) await rm(held.dir, { recursive: true, force: true }).catch(() => undefined);
  }

  #wait(ref: string, held: Held, signal: AbortSignal | undefined): Promise<PreflightResult> {
    return abandonable(held.promise, signal, () => void this.#drop(ref, held));
  }

  /** This process's folder for spooled sources, inside the cache folder (never shared with another process). */
  #folder(): Promise<string> {
    this.#root ??= this.#deps.cacheDir().then(async (dir) => {
      const parent = path.join(dir, 'remote');
      await mkdir(parent, { recursive: true });
      return mkdtemp(path.join(parent, `${process.pid}-`));
    });
    return this.#root;
  }

  async #prepare(ref: string, held: Held, opened: OpenedSource | undefined): Promise<PreflightResult> {
    const signal = AbortSignal.any([held.controller.signal, this.#closing.signal]);
    const read = async (): Promise<Spooled | { refused: PreflightResult }> => {
      if (held.holds === 0 || signal.aborted) {
        opened?.close?.();
        throw aborted('preflight aborted before it started');
      }
      held.dir = await mkdtemp(path.join(await this.#folder(), 'src-'));
      try {
        const source = opened ?? (await this.#deps.sources.open(ref, { signal }));
        return await spool(source, path.join(held.dir, 'source'), signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        return { refused: refusedRead(error, ref) };
      }
    };
    // A body already open is read at once: queued behind other fetches, it would sit idle on its socket.
    const got = opened ? await read() : await this.#deps.fetches.run(read);
    if ('refused' in got) return got.refused;
    this.#deps.onRead?.(ref, got.sha);
    const dir = held.dir as string;
    const outcome = await this.#deps.prepare(
      { input: got.file, head: got.head, bytes: got.bytes },
      got.sha,
      dir,
      ref,
    );
    return toResult(outcome, { sha: got.sha, file: got.info }, ref, got.file);
  }
}

/** A read that failed for a reason of the source's (a SourceError, a missing file) as its answer; else throws. */
function refusedRead(error: unknown, ref: string): PreflightResult {
  const refusal = sourceRefusal(error);
  if (refusal) return { ok: false, sourceSha256: null, sourceFile: null, error: refusal };
  const missing = unreadable(error);
  if (missing) return toResult(missing, { sha: null, file: null }, ref, ref);
  throw error;
}

/** Streams a source into `file`, hashing it and keeping its first bytes for sniffing. */
async function spool(source: OpenedSource, file: string, signal: AbortSignal): Promise<Spooled> {
  const hash = createHash('sha256');
  const head: Buffer[] = [];
  let headBytes = 0;
  let bytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      if (headBytes < SNIFF_BYTES) {
        const part = chunk.subarray(0, SNIFF_BYTES - headBytes);
        head.push(part);
        headBytes += part.length;
      }
      done(null, chunk);
    },
  });
  try {
    await pipeline(source.stream(), tap, createWriteStream(file), { signal });
  } finally {
    source.close?.();
  }
  const info: SourceFile = {
    size: bytes,
    mtimeMs: source.mtimeMs,
    ...(source.etag ? { etag: source.etag } : {}),
    ...(source.lastModified ? { lastModified: source.lastModified } : {}),
    ...(source.versionId ? { versionId: source.versionId } : {}),
  };
  return { file, sha: hash.digest('hex'), head: Buffer.concat(head), bytes, info };
}
