import type { Preflighter, PreflightResult } from '../preflight/index.js';
import type { ItemIdentity } from '../state/items.js';
import type { SourceIdentity } from '../state/records.js';
import type { ItemState } from '../state/state.js';
import { toOutputStore } from '../storage/local-output.js';
import { localSources } from '../storage/local-source.js';
import type { OutputStore, SourceStore } from '../storage/types.js';
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
  preflighter: Preflighter;
  /** The journal's state of the item, if any. */
  state: ItemState | undefined;
  /** The run's outputs, or their folder (to check result files). */
  outDir: OutputStore | string;
  retryFailed: boolean;
  /** Hash every finished result instead of trusting an unchanged size and mtime. */
  verify: boolean;
  signal?: AbortSignal;
  /** Where source images are looked at. @default the local files */
  sources?: SourceStore;
}

/**
 * Decides what to do with an item. Shared by `run` and `plan` (which stops here), so the plan shows
 * exactly what a run would do. It reads files: the source image (stat, and its bytes unless the
 * journal's hash can be trusted), the result file of a finished item, and it runs the preflight,
 * which writes the prepared upload into the preflighter's cache folder (`<out>/.prepared/` in a
 * run). It writes nothing else: no journal record, no result.
 *
 * The source image's hash comes from the journal when its size and mtime are unchanged (as git does),
 * so a rerun of a finished 10,000-item run does not read 10,000 images again.
 */
export async function decide(item: Item, deps: DecideDeps): Promise<Decision> {
  const { state } = deps;
  if (item.rejection) {
    return {
      action: 'reject',
      fp: fingerprint(item, null),
      src: null,
      preflight: null,
      error: item.rejection,
    };
  }
  // The source's hash is trusted from the journal while path, size and mtime are unchanged; only
  // then is the file not read. (A new item's size and mtime come from the preflight's own read.)
  const known = state?.src;
  const st = known ? await (deps.sources ?? localSources).stat(item.imagePath).catch(() => null) : null;
  let preflight: PreflightResult | null = null;
  let file: { size: number; mtimeMs: number } | null = null;
  let sha: string | null;
  if (
    st &&
    known &&
    known.path === item.imagePath &&
    known.size === st.size &&
    known.mtime_ms === st.mtimeMs
  ) {
    sha = known.sha256;
    file = st;
  } else {
    preflight = await deps.preflighter.prepare(item.imagePath, deps.signal);
    sha = preflight.sourceSha256;
    file = preflight.sourceFile;
  }
  const fp = fingerprint(item, sha);
  const src: SourceIdentity =
    file && sha ? { path: item.imagePath, size: file.size, mtime_ms: file.mtimeMs, sha256: sha } : null;
  const base = { fp, src };
  const current = state && state.fp === fp ? state : undefined;
  switch (current?.phase) {
    case 'downloaded':
      if (await resultIntact(current, deps.outDir, deps.verify))
        return { ...base, preflight, action: 'skip', reason: 'done' };
      // The file is gone or damaged: fetch it again from the stored URL (then re-poll), never resubmit first.
      return current.imageUrl
        ? { ...base, preflight, action: 'download' }
        : pollOrSubmit(current, item, base, preflight, deps);
    case 'succeeded':
      return { ...base, preflight, action: 'download' };
    case 'accepted':
      return { ...base, preflight, action: 'poll', jobId: current.jobId! };
    case 'failed':
      if (!deps.retryFailed) return { ...base, preflight, action: 'skip', reason: 'failed' };
      return submitAfterPreflight(item, base, preflight, deps, true);
    default:
      return submitAfterPreflight(item, base, preflight, deps, (current?.submissions ?? 0) > 0);
  }
}

async function pollOrSubmit(
  current: ItemState,
  item: Item,
  base: { fp: string; src: SourceIdentity },
  preflight: PreflightResult | null,
  deps: DecideDeps,
): Promise<Decision> {
  if (current.jobId) return { ...base, preflight, action: 'poll', jobId: current.jobId };
  return submitAfterPreflight(item, base, preflight, deps, true);
}

async function submitAfterPreflight(
  item: Item,
  base: { fp: string; src: SourceIdentity },
  known: PreflightResult | null,
  deps: DecideDeps,
  again: boolean,
): Promise<Decision> {
  const preflight = known ?? (await deps.preflighter.prepare(item.imagePath, deps.signal));
  if (!preflight.ok) return { ...base, preflight, action: 'reject', error: preflight.error };
  return { ...base, preflight, action: 'submit', upload: preflight, again };
}

/** A finished result is intact when its size and mtime are as recorded (or, with `verify`, its sha256). */
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
  if (!verify && st.mtimeMs === state.mtimeMs) return true;
  const key = state.output;
  return (await output.get(key).then(sha256Stream, () => null)) === state.sha256;
}
