/**
 * A run's output in a bucket (`--out s3://bucket/prefix/`, docs/contract.md#outputs-in-object-storage), opened
 * as {@link openRunFolder} opens a local folder: the prefix proven writable (a probe object), the
 * lease taken, the journal's segments read into a local cache file and folded, then continued as new
 * segments. Results, reports and thumbnails go through the S3 output store. The local folder
 * (`--cache DIR`, else under the user's cache directory, keyed by the output URL) is only a cache:
 * the journal's working copy, run.log, prepared uploads and the results' local copies. Delete it,
 * run the same command on another machine, and the run resumes from the bucket.
 *
 * Loaded (with the AWS SDK) by `state/remote-folder.ts` only when an `--out` names a bucket.
 */
import { createReadStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { StateError } from '../../errors.js';
import { defaultCacheDir } from '../../storage/outputs.js';
import { closeS3Access, createS3Client, type S3Env } from '../../storage/s3/client.js';
import { S3OutputStore } from '../../storage/s3/output-store.js';
import { parseOutputUrl } from '../../storage/s3/output-url.js';
import { formatS3Ref } from '../../storage/s3/ref.js';
import { StorageError } from '../../storage/types.js';
import { createRunLogger } from '../../util/logger.js';
import { isoWithOffset } from '../../util/time.js';
import { shouldCompact, writeCompactJournal } from '../compact.js';
import type { JournalFold } from '../fold.js';
import { loadJournal } from '../journal.js';
import type { RemoteFolderOptions } from '../remote-folder.js';
import type { RunFolder } from '../run-folder.js';
import { acquireLease, type Lease } from './lease.js';
import { loadRemoteJournal, type RemoteRun, storeSnapshot } from './load.js';
import { SegmentJournal } from './segment-journal.js';

/** Opens the bucket run folder `url`; a {@link StateError} (exit 2) when it cannot be written, is leased or damaged. */
export async function openRemoteRunFolder(url: string, options: RemoteFolderOptions): Promise<RunFolder> {
  const { bucket, prefix } = parseOutputUrl(url);
  const cacheDir = options.cacheDir ?? defaultCacheDir(url, options.env);
  await mkdir(cacheDir, { recursive: true }).catch((error: NodeJS.ErrnoException) => {
    throw new StateError(
      'out_dir',
      `cannot create the cache folder ${cacheDir} of ${url} (${error.code ?? error})`,
      {
        cause: error,
      },
    );
  });
  const access = createS3Client(options.env, { directPuts: true });
  const output = new S3OutputStore({ access, bucket, prefix, cacheDir });
  try {
    // Nothing is submitted before the run has shown it can store what it pays for.
    await output.probe();
  } catch (error) {
    closeS3Access(access);
    if (error instanceof StorageError)
      throw new StateError('output_refused', error.message, { cause: error });
    throw error;
  }
  const run = { access, bucket, prefix };
  let lost: ((error: StateError) => void) | undefined;
  const state = await openState(run, cacheDir, (error) => lost?.(error)).catch((error: unknown) => {
    closeS3Access(access);
    throw error;
  });
  const logFile = path.join(cacheDir, 'run.log');
  let logger: Logger;
  try {
    logger = createRunLogger({
      file: logFile,
      level: options.logLevel,
      secrets: options.secrets,
      mirror: options.mirror,
    });
  } catch (error) {
    await state.close();
    closeS3Access(access);
    throw error;
  }
  const warn = (message: string, fields: Record<string, unknown>) => {
    logger.warn(fields, message);
    options.onWarning?.(message);
  };
  lost = (error) => {
    state.journal.break(error);
    warn(error.message, { event: 'lease_lost' });
  };
  try {
    if (state.lease.tookOver) {
      const { pid, host, started_at, reason } = state.lease.tookOver;
      warn(
        `took over the lease of a run that is gone (pid ${pid} on ${host}, started ${started_at}): ${reason}`,
        {
          event: 'lock_takeover',
          holder: state.lease.tookOver,
        },
      );
    }
    if (state.orphan) {
      warn(
        `left out ${state.orphan}: stored without the segment before it (a run stopped with two segments in flight), so none of its records had counted; deleted`,
        { event: 'journal_orphan_removed', key: state.orphan },
      );
    }
    if (state.compacted) {
      logger.info({ event: 'journal_compacted', ...state.compacted }, 'journal compacted into a snapshot');
    }
    const { fold } = state;
    const started = isoWithOffset().replace(/[:+]/g, '-');
    return {
      dir: url,
      journalFile: path.join(cacheDir, 'journal.jsonl'),
      resultsDir: output.describe('results'),
      output,
      logger,
      journal: state.journal,
      states: fold.states,
      interner: fold.interner,
      resumed: fold.records > 0,
      lastRun: fold.last.run,
      lastPlan: fold.last.plan,
      preparedDir: path.join(cacheDir, '.prepared'),
      close: async () => {
        try {
          await state.close();
        } finally {
          logger.flush?.();
          // run.log goes with the run's state, so a pod's log outlives the pod; best effort.
          await output
            .put(`.kitchen-batch/logs/run-${started}-${process.pid}.log`, createReadStream(logFile), {
              contentType: 'application/x-ndjson',
            })
            .catch(() => {});
          closeS3Access(access);
        }
      },
    };
  } catch (error) {
    logger.flush?.();
    await state.close();
    closeS3Access(access);
    throw error;
  }
}

/** A bucket run's state, opened: the lease held, the journal read and folded, its writer continuing it. */
interface RemoteState {
  lease: Lease;
  journal: SegmentJournal;
  fold: JournalFold;
  /** The `s3://` name of a segment left out and deleted on opening (see loadRemoteJournal), or null. */
  orphan: string | null;
  /** Set when the journal was compacted into a snapshot on opening. */
  compacted: { records_before: number; records_after: number; segments: number } | null;
  close(): Promise<void>;
}

/** Compaction when the journal has grown past this many segments since its snapshot (a rerun reads each). */
const MAX_SEGMENTS = 200;

/** Takes the lease, reads the journal into `<cache>/journal.jsonl`, folds it, compacts it when it has grown. */
async function openState(
  run: RemoteRun,
  cacheDir: string,
  onLost: (error: StateError) => void,
): Promise<RemoteState> {
  const lease = await acquireLease({ ...run, onLost });
  try {
    const file = path.join(cacheDir, 'journal.jsonl');
    const info = await loadRemoteJournal(run, file);
    // Deleted before this run writes its number again (its PUT would meet it and read it as lease_lost).
    if (info.orphan) {
      await run.access.client.send(new DeleteObjectCommand({ Bucket: run.bucket, Key: info.orphan }));
    }
    const { fold } = await loadJournal(file, { repair: false });
    let compacted: RemoteState['compacted'] = null;
    const lastSeq = info.nextSeq - 1;
    if (
      lastSeq > (info.snapshotSeq ?? 0) &&
      (info.segments > MAX_SEGMENTS || shouldCompact(fold.records, fold.states.size))
    ) {
      const after = await writeCompactJournal(file, fold.states.values(), fold.last);
      await storeSnapshot(run, file, lastSeq, info.keys);
      compacted = { records_before: fold.records, records_after: after, segments: info.segments };
    }
    const journal = new SegmentJournal({ ...run, nextSeq: info.nextSeq, mirror: file });
    return {
      lease,
      journal,
      fold,
      orphan: info.orphan ? formatS3Ref(run.bucket, info.orphan) : null,
      compacted,
      close: async () => {
        try {
          await journal.close();
        } finally {
          await lease.release();
        }
      },
    };
  } catch (error) {
    await lease.release();
    throw error;
  }
}

/**
 * A bucket run's journal folded, read without the lease (what `plan` shows): the segments are read
 * into a private file of the cache, so a run working meanwhile is not disturbed.
 */
export async function readRemoteFold(
  url: string,
  options: { cacheDir: string | null; env: S3Env },
): Promise<JournalFold> {
  const { bucket, prefix } = parseOutputUrl(url);
  const cacheDir = options.cacheDir ?? defaultCacheDir(url, options.env);
  await mkdir(cacheDir, { recursive: true });
  const access = createS3Client(options.env, { directPuts: true });
  const file = path.join(cacheDir, `journal.read-${process.pid}.jsonl`);
  try {
    await loadRemoteJournal({ access, bucket, prefix }, file);
    return (await loadJournal(file, { repair: false })).fold;
  } finally {
    closeS3Access(access);
    await rm(file, { force: true });
  }
}
