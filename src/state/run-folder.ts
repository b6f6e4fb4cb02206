/**
 * The output folder of a run, opened for writing: created, locked against a second run, cleared of
 * a killed run's partial downloads, its journal read (torn last line cut, corruption refused) and
 * compacted when it has grown, then opened for appending. Closing releases it all.
 */
import { mkdir } from 'node:fs/promises';
import type { Logger } from 'pino';
import { StateError } from '../errors.js';
import { LocalOutputStore } from '../storage/local-output.js';
import type { OutputStore } from '../storage/types.js';
import type { Interner } from '../util/intern.js';
import { createRunLogger } from '../util/logger.js';
import { shouldCompact, writeCompactJournal } from './compact.js';
import type { LastRun } from './fold.js';
import { type Journal, JournalWriter, loadJournal } from './journal.js';
import { acquireLock } from './lock.js';
import { journalFile, preparedDir, runLogFile } from './run-files.js';
import type { ItemTable } from './table.js';

/** Options of {@link openRunFolder}. */
export interface RunFolderOptions {
  /** pino level of `run.log`. */
  logLevel: string;
  /** Strings scrubbed from every log line (the API key). */
  secrets: string[];
  /** Called with each warning a user should see (lock taken over, torn journal line). */
  onWarning?: (message: string) => void;
  /** A logger every run.log line is also given to (the caller's, or `--verbose`'s). */
  mirror?: Logger | undefined;
}

/** An open, locked run folder. */
export interface RunFolder {
  dir: string;
  /** `<dir>/results`, where result images land (for messages about the disk). */
  resultsDir: string;
  /** The journal's local file (for a bucket: the working copy in its cache, equal to the stored segments). */
  journalFile: string;
  /** The local folder of prepared uploads (`<dir>/.prepared`; for a bucket, in its cache). */
  preparedDir: string;
  /** The folder's outputs (results, reports, thumbnails, the plan file), behind the storage seam. */
  output: OutputStore;
  /** `run.log`. */
  logger: Logger;
  journal: Journal;
  /** The journal folded into item states (what a resumed run starts from). */
  states: ItemTable;
  /** Shares equal strings between the folded items and the run's (see `Interner`). */
  interner: Interner;
  /** Whether an earlier run left a journal here. */
  resumed: boolean;
  /** The last `run` record of the journal (the previous run's facts), if any. */
  lastRun: LastRun['run'];
  /** The last `plan` record of the journal, if any. */
  lastPlan: LastRun['plan'];
  /** Closes the journal, flushes the log and releases the lock. */
  close(): Promise<void>;
}

/** Opens `dir` for a run; a {@link StateError} (exit 2) when it cannot be created, is locked or its journal is damaged. */
export async function openRunFolder(dir: string, options: RunFolderOptions): Promise<RunFolder> {
  const output = new LocalOutputStore(dir);
  // The journal, lock and run.log are the run's own state, kept in the local folder itself.
  const resultsDir = output.describe('results');
  await createFolder(dir, resultsDir);
  const lock = await acquireLock(dir);
  let logger: Logger;
  try {
    logger = createRunLogger({
      file: runLogFile(dir),
      level: options.logLevel,
      secrets: options.secrets,
      mirror: options.mirror,
    });
  } catch (error) {
    // A log that cannot be opened must not leave the folder locked.
    await lock.release();
    throw error;
  }
  const warn = (message: string, fields: Record<string, unknown>) => {
    logger.warn(fields, message);
    options.onWarning?.(message);
  };
  try {
    if (lock.tookOver) {
      const { pid, host, started_at, reason } = lock.tookOver;
      warn(
        `took over the lock of a run that is gone (pid ${pid} on ${host}, started ${started_at}): ${reason}`,
        {
          event: 'lock_takeover',
          holder: lock.tookOver,
        },
      );
    }
    await removeLeftoverParts(output, logger);
    const file = journalFile(dir);
    const { fold, tornLine } = await loadJournal(file);
    if (tornLine !== null) {
      warn(`journal.jsonl line ${tornLine} was torn by a crash mid-write and is ignored`, {
        event: 'journal_torn_line',
        line: tornLine,
      });
    }
    const { states } = fold;
    if (shouldCompact(fold.records, states.size)) {
      // The compacted journal folds to these very states (test/state/journal.test.ts proves it).
      const after = await writeCompactJournal(file, states.values(), fold.last);
      logger.info(
        { event: 'journal_compacted', records_before: fold.records, records_after: after },
        'journal compacted',
      );
    }
    const journal = await JournalWriter.open(file);
    return {
      dir,
      resultsDir,
      preparedDir: preparedDir(dir),
      journalFile: file,
      output,
      logger,
      journal,
      states,
      interner: fold.interner,
      resumed: fold.records > 0,
      lastRun: fold.last.run,
      lastPlan: fold.last.plan,
      close: async () => {
        try {
          await journal.close();
        } finally {
          logger.flush?.();
          await lock.release();
        }
      },
    };
  } catch (error) {
    logger.flush?.();
    await lock.release();
    throw error;
  }
}

async function createFolder(dir: string, resultsDir: string): Promise<void> {
  try {
    await mkdir(resultsDir, { recursive: true });
  } catch (error) {
    let code = (error as NodeJS.ErrnoException).code;
    // Node 20's recursive mkdir says ENOENT on a read-only file system; a plain mkdir tells the truth.
    if (code === 'ENOENT') {
      code = await mkdir(dir).then(
        () => code,
        (e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? code : e.code),
      );
    }
    throw new StateError('out_dir', `cannot create the output folder ${dir} (${code ?? String(error)})`, {
      cause: error,
    });
  }
}

/**
 * A run killed mid-download leaves a staged result (`results/.<id>.<pid>.part`). We hold the
 * folder's lock, so no other run is writing one: every leftover is garbage. Workers share the
 * folder: they pass `olderThanMs` and remove only files nobody wrote to for that long.
 */
export async function removeLeftoverParts(
  output: OutputStore,
  logger: Logger,
  olderThanMs = 0,
): Promise<void> {
  for (const name of await output.sweep('results/', olderThanMs)) {
    logger.info({ event: 'part_removed', file: name }, 'removed a partial download of an earlier run');
  }
}
