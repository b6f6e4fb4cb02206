import type { Preflighter, PreflightResult, SourceFile } from '../preflight/index.js';
import { type SourceRefusal, sourceRefusal } from '../preflight/result.js';
import type { ItemIdentity } from '../state/items.js';
import type { SourceIdentity } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import { toOutputStore } from '../storage/local-output.js';
import { isRemoteRef } from '../storage/sources.js';
import type { KnownSource, OpenedSource, OutputStore } from '../storage/types.js';
import type { Item, ItemError } from '../types.js';
import { sha256Stream } from '../util/fs.js';
import { fingerprint } from './fingerprint.js';

/** A preflight that passed: what gets uploaded. */
export type PreparedUpload = Extract<PreflightResult, { ok: true }>;

/** What a run will do with one item, decided from the manifest row, the image and the journal. */
export type Decision = { fp: string; src: SourceIdentity; preflight: PreflightResult | null } & (
  | { action: 'reject'; error: ItemError }
  | { action: 'skip'; reason: 'done' | 'failed' }
  | { action: 'download' }
  | { action: 'poll'; jobId: string }
  | { action: 'submit'; upload: PreparedUpload; again: boolean }
);

/** The item as a decision plans it: its journal `item` record (or, under a worker, its Redis state). */
export function plannedIdentity(item: Item, decision: Decision): ItemIdentity {
  return {
    id: item.id,
    fp: decision.fp,
    image: item.image,
    module: item.module,
    style: item.style ?? null,
    src: decision.src,
    ...(decision.preflight?.ok ? { preflight: decision.preflight.steps } : {}),
  };
}

/** What {@link decide} needs besides the item. */
export interface DecideDeps {
  /** Prepares the upload; its `sources` is where the source is looked at. */
  preflighter: Preflighter;
  /** The journal's state of the item, if any. */
  state: ItemState | undefined;
  /** The run's outputs, or their folder (to check result files). */
  outDir: OutputStore | string;
  retryFailed: boolean;
  /** Hash every finished result instead of trusting an unchanged size and mtime. */
  verify: boolean;
  signal?: AbortSignal;
}

/**
 * Decides what to do with an item. Shared by `run` and `plan` (which stops here), so the plan shows
 * exactly what a run would do. It reads sources: the source image (a conditional read, and its bytes
 * unless the journal's hash can be trusted), the result file of a finished item, and it runs the
 * preflight, which writes the prepared upload into the preflighter's cache folder (`<out>/.prepared/`
 * in a run). It writes nothing else: no journal record, no result.
 *
 * The source's hash comes from the journal while the source is unchanged: a local file whose size
 * and mtime are as recorded (as git does), a remote one that answers a conditional request with "not
 * modified"; so a rerun of a finished 10,000-item run reads no image again. A decision whose
 * `preflight` is set holds the source: give it back with {@link releaseDecision}.
 */
export async function decide(item: Item, deps: DecideDeps): Promise<Decision> {
  if (item.rejection) {
    return {
      action: 'reject',
      fp: fingerprint(item, null),
      src: null,
      preflight: null,
      error: item.rejection,
    };
  }
  const looked = await lookAtSource(item, deps);
  if ('refused' in looked) return looked.refused;
  try {
    return await decideWith(item, deps, looked);
  } catch (error) {
    // Nobody gets this decision to release its source.
    if (looked.preflight) await deps.preflighter.release(item.imagePath);
    throw error;
  }
}

/** Gives back the source a decision holds (its `preflight` ran): after the upload's 202, or once the item settled. */
export async function releaseDecision(
  preflighter: Preflighter,
  item: Item,
  decision: Decision,
): Promise<void> {
  if (decision.preflight) await preflighter.release(item.imagePath);
}

/** What decide knows of the source: its hash and identity, and the preflight if it ran. */
interface Looked {
  sha: string | null;
  file: SourceFile | null;
  preflight: PreflightResult | null;
  /** The source could not be checked now (`source_unavailable`): an upload cannot be prepared either. */
  unavailable?: SourceRefusal;
}

/**
 * The source's hash: the journal's while the source is unchanged (no bytes read), else the
 * preflight's, which reads the body the conditional read already opened. A remote source that
 * cannot be checked now keeps the journal's identity (a finished item stays finished, an accepted
 * job is polled); a remote source that is gone or refused is rejected here, as preflight would.
 */
async function lookAtSource(item: Item, deps: DecideDeps): Promise<Looked | { refused: Decision }> {
  const ref = item.imagePath;
  // What the journal knows is about this reference only (a row may name another image now).
  const known = deps.state?.src?.path === ref ? deps.state.src : null;
  const { preflighter } = deps;
  let opened: OpenedSource | undefined;
  if (known) {
    let answer: Awaited<ReturnType<Preflighter['openIfChanged']>>;
    try {
      answer = await preflighter.openIfChanged(ref, knownSource(known), deps.signal);
    } catch (error) {
      if (deps.signal?.aborted) throw deps.signal.reason;
      const refusal = sourceRefusal(error);
      if (refusal?.code === 'source_unavailable')
        return { sha: known.sha256, file: fileOf(known), preflight: null, unavailable: refusal };
      if (refusal) return { refused: refusedBySource(item, refusal) };
      // A local file that cannot be looked at (gone, a folder): the preflight says why, as before.
      if (isRemoteRef(ref)) throw error;
      answer = null;
    }
    if (answer && 'notModified' in answer) return { sha: known.sha256, file: fileOf(known), preflight: null };
    opened = answer ?? undefined;
  }
  const preflight = await preflighter.prepare(ref, deps.signal, opened);
  // Changed, but cut short while being read: the item keeps its journal identity until a rerun reads it.
  if (known && !preflight.ok && preflight.error.code === 'source_unavailable')
    return { sha: known.sha256, file: fileOf(known), preflight };
  return { sha: preflight.sourceSha256, file: preflight.sourceFile, preflight };
}

async function decideWith(item: Item, deps: DecideDeps, looked: Looked): Promise<Decision> {
  const { state } = deps;
  const { sha, file, preflight } = looked;
  const fp = fingerprint(item, sha);
  const src: SourceIdentity = file && sha ? identityOf(item.imagePath, file, sha) : null;
  const base = { fp, src };
  const current = state && state.fp === fp ? state : undefined;
  switch (current?.phase) {
    case 'downloaded':
      if (await resultIntact(current, deps.outDir, deps.verify))
        return { ...base, preflight, action: 'skip', reason: 'done' };
      // The file is gone or damaged: fetch it again from the stored URL (then re-poll), never resubmit first.
      return current.imageUrl
        ? { ...base, preflight, action: 'download' }
        : pollOrSubmit(current, item, base, looked, deps);
    case 'succeeded':
      return { ...base, preflight, action: 'download' };
    case 'accepted':
      return { ...base, preflight, action: 'poll', jobId: current.jobId! };
    case 'failed':
      if (!deps.retryFailed) return { ...base, preflight, action: 'skip', reason: 'failed' };
      return submitAfterPreflight(item, base, looked, deps, true);
    default:
      return submitAfterPreflight(item, base, looked, deps, (current?.submissions ?? 0) > 0);
  }
}

/** A source the store refused (gone, forbidden, blocked, too large): rejected, as a missing file is. */
function refusedBySource(item: Item, refusal: SourceRefusal): Decision {
  return {
    action: 'reject',
    fp: fingerprint(item, null),
    src: null,
    preflight: null,
    error: refusal,
  };
}

/** The journal's identity as what a conditional read needs. */
function knownSource(src: NonNullable<SourceIdentity>): KnownSource {
  return {
    size: src.size,
    mtimeMs: src.mtime_ms,
    ...(src.etag === undefined ? {} : { etag: src.etag }),
    ...(src.last_modified === undefined ? {} : { lastModified: src.last_modified }),
    ...(src.version_id === undefined ? {} : { versionId: src.version_id }),
  };
}

function fileOf(src: NonNullable<SourceIdentity>): SourceFile {
  const { size, mtime_ms: mtimeMs, etag, last_modified: lastModified, version_id: versionId } = src;
  return {
    size,
    mtimeMs,
    ...(etag === undefined ? {} : { etag }),
    ...(lastModified === undefined ? {} : { lastModified }),
    ...(versionId === undefined ? {} : { versionId }),
  };
}

/** The journal's record of a source as read: validators only when the source sent them. */
function identityOf(ref: string, file: SourceFile, sha: string): NonNullable<SourceIdentity> {
  return {
    path: ref,
    size: file.size,
    mtime_ms: file.mtimeMs,
    sha256: sha,
    ...(file.etag === undefined ? {} : { etag: file.etag }),
    ...(file.lastModified === undefined ? {} : { last_modified: file.lastModified }),
    ...(file.versionId === undefined ? {} : { version_id: file.versionId }),
  };
}

async function pollOrSubmit(
  current: ItemState,
  item: Item,
  base: { fp: string; src: SourceIdentity },
  looked: Looked,
  deps: DecideDeps,
): Promise<Decision> {
  if (current.jobId) return { ...base, preflight: looked.preflight, action: 'poll', jobId: current.jobId };
  return submitAfterPreflight(item, base, looked, deps, true);
}

async function submitAfterPreflight(
  item: Item,
  base: { fp: string; src: SourceIdentity },
  looked: Looked,
  deps: DecideDeps,
  again: boolean,
): Promise<Decision> {
  // The source did not answer its check just now: not asked again for the upload (a rerun will).
  if (!looked.preflight && looked.unavailable)
    return { ...base, preflight: null, action: 'reject', error: looked.unavailable };
  const preflight = looked.preflight ?? (await deps.preflighter.prepare(item.imagePath, deps.signal));
  if (!preflight.ok) return { ...base, preflight, action: 'reject', error: preflight.error };
  return { ...base, preflight, action: 'submit', upload: preflight, again };
}

/**
 * A finished result is intact when its size and mtime are as recorded (or, with `verify`, its
 * sha256). An object that carries its sha256 (an S3 result's metadata, written by this tool after
 * verifying the bytes) is intact when that and its size match: not read again, but with `verify`.
 */
export async function resultIntact(
  state: ItemState,
  outDir: OutputStore | string,
  verify: boolean,
): Promise<boolean> {
  if (!state.output || !state.sha256) return false;
  const output = toOutputStore(outDir);
  // The journal's `output` is the result's key (`results/<id>.<ext>`); a key the store refuses is no result.
  const st = await output.head(state.output).catch(() => null);
  if (!st || st.size !== state.bytes) return false;
  // `verify` reads the bytes whatever the metadata says.
  if (st.sha256 !== undefined && !verify) return st.sha256 === state.sha256;
  if (!verify && st.mtimeMs === state.mtimeMs) return true;
  const key = state.output;
  return (await output.get(key).then(sha256Stream, () => null)) === state.sha256;
}
