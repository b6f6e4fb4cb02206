/**
 * The run's own state, as files of a local run folder: the journal, the lock, the logs and the
 * preflight's cache. Unlike the outputs (results, reports, thumbnails, the plan file: behind
 * `OutputStore`), these are not objects written whole: the journal is appended and fsynced per
 * group commit, the lock is created exclusively and its time renewed, the logs are appended by
 * pino, the cache is scratch. An object store needs other shapes for them (numbered segment
 * objects, a lease renewed by If-Match), so they get their own seam when outputs leave the disk
 * (issue 33); until then this module is the one place that names their files.
 */
import path from 'node:path';

/** The journal's name in a run folder. */
export const JOURNAL_FILE = 'journal.jsonl';

/** `<dir>/journal.jsonl`: the append-only record of the run, what a rerun resumes from. */
export function journalFile(dir: string): string {
  return path.join(dir, JOURNAL_FILE);
}

/** `<dir>/.lock`: held by the one run (or `report`, `review`) that works in the folder. */
export function lockFile(dir: string): string {
  return path.join(dir, '.lock');
}

/** `<dir>/run.log`: the run's log, one JSON line per event. */
export function runLogFile(dir: string): string {
  return path.join(dir, 'run.log');
}

/** `<dir>/workers/<name>.log`: one worker's log in a shared output folder. */
export function workerLogFile(dir: string, name: string): string {
  return path.join(dir, 'workers', `${name}.log`);
}

/** `<dir>/.prepared`: prepared uploads by content hash, so a rerun does no image work again. */
export function preparedDir(dir: string): string {
  return path.join(dir, '.prepared');
}
