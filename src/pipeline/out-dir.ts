/**
 * Which manifest's run an output folder holds (docs/contract.md#output-folder). A folder keeps the
 * run of one manifest file: the journal, `plan.jsonl` and the reports are of its items, and a run of
 * another manifest there would leave the report listing only the newer manifest's items beside
 * `results/` holding both, and overwrite results of items the two share by id. So the default folder
 * of a manifest moves aside (`output/cat.jsonl` when `output/cat` holds `cat.json`'s run), and a
 * folder named with `--out` that holds another manifest's run is refused: `manifest_changed`, exit 2.
 */
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { StateError } from '../errors.js';
import type { LastRun } from '../state/fold.js';
import { scanJournal } from '../state/journal.js';
import { journalFile } from '../state/run-files.js';
import { isS3Ref } from '../storage/s3/ref.js';

/** A folder's last `run` and `plan` records, as a journal's fold or an open run folder has them. */
export type LastRecords = { [K in keyof LastRun]?: LastRun[K] | undefined };

/** Where a run (or `plan`, or `enqueue`) of a manifest goes, and what it accepts there. */
export interface OutTarget {
  cwd: string;
  /** The manifest path as given. */
  manifest: string;
  /** The folder named by `--out`, or the default `output/<stem>`. */
  outDir: string;
  /** The default's fallback (`output/<file name>`); null when `--out` named the folder. */
  outFallback: string | null;
  /** `--manifest-renamed`: a folder of another manifest file continues with this one. */
  manifestRenamed: boolean;
  /** Whether the command takes `--manifest-renamed` (`run`, `plan`; not `enqueue`), for the messages. @default true */
  renamable?: boolean;
}

/** The folder chosen, opened or read by the caller, and the warning to show when it moved aside. */
export interface Settled<T> {
  dir: string;
  opened: T;
  note: string | null;
  /** The manifest file ({@link manifestFile}): what the run's `run` record keeps. */
  file: string;
}

/** The manifest file a run names: its real path (symlinks resolved), else its absolute path. */
export async function manifestFile(cwd: string, manifest: string): Promise<string> {
  const file = path.resolve(cwd, manifest);
  return realpath(file).catch(() => file);
}

/** The folder's real path (what a `run` record keeps), else its absolute path. */
export async function folderPath(dir: string): Promise<string> {
  // A bucket prefix is its URL.
  if (isS3Ref(dir)) return dir;
  return realpath(dir).catch(() => path.resolve(dir));
}

/**
 * The manifest file of the folder's last run, absolute, or null for a folder without a run (or an
 * older journal that does not say). Journals of earlier versions kept the path as given (relative to
 * a folder they did not record) and the manifest's folder in the `plan` record.
 */
export function recordedManifest(last: LastRecords): string | null {
  const { run } = last;
  if (!run) return null;
  if (run.manifest_path) return run.manifest_path;
  if (path.isAbsolute(run.manifest)) return run.manifest;
  return last.plan ? path.join(last.plan.manifest_dir, path.basename(run.manifest)) : null;
}

/**
 * The other manifest file whose run the folder `dir` holds, or null when its last run was of `file`
 * (or it has none). The same file named by another relative path, from another folder or through a
 * symlink is the same, and so is the file edited since (new rows); so is a folder moved together
 * with its manifest (the manifest where it was relative to the folder).
 */
export async function otherManifest(last: LastRecords, file: string, dir: string): Promise<string | null> {
  const recorded = recordedManifest(last);
  if (recorded === null || recorded === file) return null;
  if ((await realpath(recorded).catch(() => recorded)) === file) return null;
  const before = last.run?.out_dir;
  if (before && path.relative(before, recorded) === path.relative(await folderPath(dir), file)) return null;
  return recorded;
}

/** The refusal of a folder that holds another manifest's run (exit 2). */
export function manifestChanged(dir: string, recorded: string, file: string, renamable = true): StateError {
  return new StateError(
    'manifest_changed',
    `${dir} holds the run of another manifest, ${recorded}; this run is of ${file}. One folder would mix ` +
      `the two runs (the report would list one manifest's items, results/ would hold both). ` +
      `Use --out DIR for a separate folder` +
      (renamable
        ? `, or add --manifest-renamed if ${path.basename(file)} is ${path.basename(recorded)} renamed, ` +
          `moved or converted (the same catalogue) to continue its run in ${dir}`
        : ''),
  );
}

/**
 * Settles the output folder of `target`: its `outDir` when that folder holds no run or a run of this
 * manifest file; else, for the default folder, the fallback (`output/<file name>`), with a note that
 * says so; else the refusal ({@link manifestChanged}). `open` opens or reads a folder (a run takes
 * its lock and folds its journal there) and `last` tells its last run; a folder that is not kept is
 * given to `close`. The default folder locked by a run of another manifest moves aside too (its
 * journal is read without the lock to tell).
 */
export async function settleOutDir<T>(
  target: OutTarget,
  open: (dir: string) => Promise<T>,
  last: (opened: T) => LastRecords,
  close: (opened: T) => Promise<void> = async () => {},
): Promise<Settled<T>> {
  const file = await manifestFile(target.cwd, target.manifest);
  const check = async (dir: string): Promise<{ opened: T } | { other: string }> => {
    let opened: T;
    try {
      opened = await open(dir);
    } catch (error) {
      const fallback = target.outFallback && !target.manifestRenamed;
      if (!(fallback && error instanceof StateError && error.code === 'locked')) throw error;
      const other = await otherManifest(await readLastRun(dir), file, dir);
      if (other === null) throw error;
      return { other };
    }
    const other = target.manifestRenamed ? null : await otherManifest(last(opened), file, dir);
    if (other === null) return { opened };
    await close(opened);
    return { other };
  };
  const first = await check(target.outDir);
  if ('opened' in first) return { dir: target.outDir, opened: first.opened, note: null, file };
  const fallback = target.outFallback;
  const renamable = target.renamable ?? true;
  if (!fallback || fallback === target.outDir) {
    throw manifestChanged(target.outDir, first.other, file, renamable);
  }
  const second = await check(fallback);
  if (!('opened' in second)) throw manifestChanged(fallback, second.other, file, renamable);
  const note =
    `${target.outDir} holds the run of another manifest (${first.other}): this run of ` +
    `${path.basename(file)} goes to ${fallback} (--out DIR names another folder` +
    (renamable ? `; --manifest-renamed continues ${target.outDir} with this manifest)` : ')');
  return { dir: fallback, opened: second.opened, note, file };
}

/** The last `run` and `plan` records of a folder's journal, read without changing it. */
export async function readLastRun(dir: string): Promise<LastRun> {
  const found: LastRun = {};
  await scanJournal(
    journalFile(dir),
    (record) => {
      if (record.t === 'run') found.run = record;
      else if (record.t === 'plan') found.plan = record;
    },
    { repair: false },
  );
  return found;
}
