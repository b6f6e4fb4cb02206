import { setMaxListeners } from 'node:events';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import sharp from 'sharp';
import { isLocalFsError, KitchenClient } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { type GovernorOptions, RateGovernor } from '../api/governor.js';
import { backoffDelay, isRetryable } from '../api/policy.js';
import type { Job } from '../api/wire.js';
import {
  InterruptedError,
  KitchenError,
  PartialRunError,
  ServiceRefusedError,
  StateError,
  UsageError,
} from '../errors.js';
import { checkStyle, readManifest } from '../manifest/index.js';
import { buildReport } from '../report/build.js';
import { writeReports } from '../report/write.js';
import { compactRecords, lastRunRecords, shouldCompact } from '../state/compact.js';
import { JournalWriter, readJournal } from '../state/journal.js';
import { acquireLock } from '../state/lock.js';
import type { ItemRecord } from '../state/records.js';
import { applyRecord, foldJournal, type ItemState, newItemState } from '../state/state.js';
import type { Item, ItemError, Report } from '../types.js';
import { fsyncDir, writeFileAtomic } from '../util/fs.js';
import { createRunLogger } from '../util/logger.js';
import { isoWithOffset, monotonicMs } from '../util/time.js';
import type { ProgressCounts, RunEvent } from './events.js';
import { type Decision, decide, type Prepared } from './plan.js';
import { PollScheduler } from './poll-schedule.js';
import { createPreflighter, type Preflighter } from './preflight.js';
import { type RetryOptions, ServiceGate } from './service.js';
import { inShard, type Shard } from './shard.js';

/** Options of {@link runBatch}. Everything but `manifest`, `baseUrl` and `apiKey` has a default. */
export interface RunOptions {
  /** Path of the manifest (.csv, .json, .jsonl/.ndjson). */
  manifest: string;
  /** Output folder. @default `output/<manifest file name without extension>` under `cwd` */
  out?: string;
  /** Folder relative paths resolve against. @default process.cwd() */
  cwd?: string;
  /** Service root; `/v1/...` is appended. */
  baseUrl: string;
  /** The API key: sent to `baseUrl` only, never logged or written. */
  apiKey: string;
  /** Jobs in flight (submitted, not yet ended). @default 8 */
  concurrency?: number;
  /** Resubmit items whose job failed in an earlier run. @default false */
  retryFailed?: boolean;
  /** Resend a submission whose outcome is unknown (possible duplicate charge). @default false */
  retryAmbiguous?: boolean;
  /** A job not ended this long after this run started watching it is `incomplete/job_timeout`. @default 1_800_000 */
  jobTimeoutMs?: number;
  /** Submit at most this many new jobs in this run (a cost guard). @default unlimited */
  maxSubmissions?: number;
  /** Run only part K of N of the items. */
  shard?: Shard;
  /** Strip EXIF/GPS from images that would otherwise go up unchanged. @default false */
  stripMetadata?: boolean;
  /** Longest side of an uploaded image, px. @default 4096 */
  maxSide?: number;
  /** Hash every finished result on resume instead of trusting size and mtime. @default false */
  verify?: boolean;
  /** pino level of run.log. @default 'info' */
  logLevel?: string;
  /** Soft stop (SIGINT): no new submissions, in-flight requests get `graceMs` to finish. */
  signal?: AbortSignal;
  /** Hard stop: abort in-flight requests now (a second SIGINT). */
  hardSignal?: AbortSignal;
  /** Time in-flight requests get after a soft stop. @default 5000 */
  graceMs?: number;
  /** Progress and item events. */
  onEvent?: (event: RunEvent) => void;
  /** How often report.json/csv are refreshed during a run. @default 30_000 */
  reportIntervalMs?: number;
  /** How often a `progress` event is emitted. @default 1000 */
  progressIntervalMs?: number;
  /** Write report.html at the end. @default true */
  html?: boolean;
  /** Retry budget of service calls. */
  retry?: RetryOptions;
  /** Rate governor tuning. */
  governor?: GovernorOptions;
  /** Consecutive failed polls of one job before it is left `incomplete/poll_failed`. @default 10 */
  pollErrorBudget?: number;
  /** No answer from the service for this long while calls keep failing: the run ends with exit 3. @default 120_000 */
  unreachableMs?: number;
  /** Client timeouts (ms). */
  timeouts?: { connect?: number; request?: number; upload?: number; download?: number };
}

/** What {@link runBatch} returns. */
export interface RunResult {
  /** The contract's exit code: 0 all succeeded, 1 some did not. (2, 3 and 130 are thrown.) */
  exitCode: 0 | 1;
  outDir: string;
  report: Report;
}

/** The contract's floor between two polls of one job. */
const MIN_POLL_INTERVAL_MS = 2000;
const RESULT_EXTENSIONS = { jpeg: 'jpg', png: 'png', webp: 'webp' } as const;

/**
 * Runs a manifest through the service: plan, preflight, submit, poll, download, report. Resumes a
 * previous run in the same output folder. Resolves with exit code 0 or 1; throws {@link UsageError}
 * / ManifestError / {@link StateError} (exit 2), {@link ServiceRefusedError} (exit 3) or
 * {@link InterruptedError} (exit 130), always after saving the journal and the reports it can.
 */
export async function runBatch(options: RunOptions): Promise<RunResult> {
  const cwd = options.cwd ?? process.cwd();
  validateOptions(options);
  const manifest = await readManifest(options.manifest, { cwd });
  const outDir = path.resolve(
    cwd,
    options.out ?? path.join('output', path.basename(options.manifest).replace(/\.[^.]+$/, '')),
  );
  await prepareOutDir(outDir);
  const lock = await acquireLock(outDir);
  const logger = createRunLogger({
    file: path.join(outDir, 'run.log'),
    level: options.logLevel ?? 'info',
    secrets: [options.apiKey],
  });
  if (lock.tookOver) {
    logger.warn({ event: 'lock_takeover', holder: lock.tookOver }, 'took over a stale lock');
    options.onEvent?.({
      type: 'warning',
      message: `took over the lock of a run that is gone (pid ${lock.tookOver.pid}, started ${lock.tookOver.started_at})`,
    });
  }
  try {
    await removeLeftoverParts(path.join(outDir, 'results'), logger);
    const journalFile = path.join(outDir, 'journal.jsonl');
    const { records, tornLine } = await readJournal(journalFile);
    if (tornLine !== null) {
      const message = `journal.jsonl line ${tornLine} was torn by a crash mid-write and is ignored`;
      logger.warn({ event: 'journal_torn_line', line: tornLine }, message);
      options.onEvent?.({ type: 'warning', message });
    }
    for (const warning of manifest.warnings) options.onEvent?.({ type: 'warning', message: warning });
    let states = foldJournal(records);
    if (shouldCompact(records.length, states.size)) {
      const compacted = compactRecords(states.values(), lastRunRecords(records));
      await writeFileAtomic(journalFile, compacted.map((r) => `${JSON.stringify(r)}\n`).join(''));
      logger.info(
        { event: 'journal_compacted', records_before: records.length, records_after: compacted.length },
        'journal compacted',
      );
      states = foldJournal(compacted);
    }
    const journal = await JournalWriter.open(journalFile);
    const engine = new Engine(options, outDir, logger, journal, states, records.length > 0);
    try {
      return await engine.run(
        manifest.items.filter((item) => !options.shard || inShard(item.id, options.shard)),
      );
    } finally {
      await journal.close();
    }
  } finally {
    logger.flush?.();
    await lock.release();
  }
}

/**
 * A run killed mid-download leaves `results/.<id>.<pid>.part`. We hold the folder's lock, so no other
 * run is writing one: every leftover is garbage.
 */
async function removeLeftoverParts(results: string, logger: Logger): Promise<void> {
  const names = await readdir(results).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith('.') || !name.endsWith('.part')) continue;
    await rm(path.join(results, name), { force: true });
    logger.info({ event: 'part_removed', file: name }, 'removed a partial download of an earlier run');
  }
}

function validateOptions(options: RunOptions): void {
  const positiveInt = (name: string, value: number | undefined) => {
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      throw new UsageError(`${name} must be a whole number of at least 1, got ${value}`);
    }
  };
  positiveInt('--concurrency', options.concurrency);
  if (
    options.maxSubmissions !== undefined &&
    (!Number.isInteger(options.maxSubmissions) || options.maxSubmissions < 0)
  ) {
    throw new UsageError(
      `--max-submissions must be a whole number of at least 0, got ${options.maxSubmissions}`,
    );
  }
  if (options.jobTimeoutMs !== undefined && !(options.jobTimeoutMs > 0)) {
    throw new UsageError(
      `--job-timeout must be a positive number of seconds, got ${options.jobTimeoutMs / 1000}`,
    );
  }
  if (!options.apiKey)
    throw new UsageError('no API key: set KITCHEN_API_KEY (or --api-key-file), or use --sandbox');
  if (!options.baseUrl)
    throw new UsageError('no service URL: set KITCHEN_API_BASE_URL or --base-url, or use --sandbox');
}

async function prepareOutDir(outDir: string): Promise<void> {
  try {
    await mkdir(path.join(outDir, 'results'), { recursive: true });
  } catch (error) {
    let code = (error as NodeJS.ErrnoException).code;
    // Node 20's recursive mkdir says ENOENT on a read-only file system; a plain mkdir tells the truth.
    if (code === 'ENOENT') {
      code = await mkdir(outDir).then(
        () => code,
        (e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? code : e.code),
      );
    }
    throw new StateError('out_dir', `cannot create the output folder ${outDir} (${code ?? String(error)})`, {
      cause: error,
    });
  }
}

/** The run's moving parts; one instance per run. */
class Engine {
  readonly #options: RunOptions;
  readonly #outDir: string;
  readonly #logger: Logger;
  readonly #journal: JournalWriter;
  readonly #states: Map<string, ItemState>;
  readonly #resumed: boolean;
  readonly #client: KitchenClient;
  readonly #governor: RateGovernor;
  readonly #gate: ServiceGate;
  readonly #preflighter: Preflighter;
  readonly #polls = new PollScheduler(MIN_POLL_INTERVAL_MS);
  readonly #stop = new AbortController();
  readonly #hard = new AbortController();
  readonly #jobs: PQueue;
  readonly #prep: PQueue;
  readonly #downloads: PQueue;
  readonly #startedAt = isoWithOffset();
  readonly #startedMono = monotonicMs();
  readonly #counts = { pending: 0, running: 0, downloading: 0, skipped: 0 };
  #fatal: KitchenError | undefined;
  #interrupted: string | undefined;
  #submitted = 0;
  #items: Item[] = [];

  constructor(
    options: RunOptions,
    outDir: string,
    logger: Logger,
    journal: JournalWriter,
    states: Map<string, ItemState>,
    resumed: boolean,
  ) {
    this.#options = options;
    this.#outDir = outDir;
    this.#logger = logger;
    this.#journal = journal;
    this.#states = states;
    this.#resumed = resumed;
    const t = options.timeouts ?? {};
    this.#client = new KitchenClient({
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      ...(t.connect !== undefined ? { connectTimeoutMs: t.connect } : {}),
      ...(t.request !== undefined ? { requestTimeoutMs: t.request } : {}),
      ...(t.upload !== undefined ? { uploadTimeoutMs: t.upload } : {}),
      ...(t.download !== undefined ? { downloadTimeoutMs: t.download } : {}),
    });
    this.#governor = new RateGovernor({
      ...options.governor,
      onChange: (event) => {
        this.#logger.info(
          { event: `rate_${event.type}`, ...event, type: undefined },
          `request rate now ${event.rate.toFixed(2)}/s`,
        );
        this.#emit({
          type: 'rate',
          rate: event.rate,
          ...(event.type === 'decrease' ? { pauseMs: event.pauseMs } : {}),
        });
      },
    });
    this.#gate = new ServiceGate(this.#governor, options.retry ?? {}, logger);
    this.#preflighter = createPreflighter({
      cacheDir: path.join(outDir, '.prepared'),
      ...(options.stripMetadata !== undefined ? { stripMetadata: options.stripMetadata } : {}),
      ...(options.maxSide !== undefined ? { maxSide: options.maxSide } : {}),
    });
    // Every queued request and sleep listens on these two signals: thousands at once is by design.
    setMaxListeners(0, this.#stop.signal, this.#hard.signal);
    const concurrency = options.concurrency ?? 8;
    this.#jobs = new PQueue({ concurrency });
    this.#prep = new PQueue({ concurrency: Math.max(2, os.availableParallelism()) });
    this.#downloads = new PQueue({ concurrency: Math.min(16, Math.max(4, concurrency)) });
    const soft = options.signal;
    if (soft) {
      const onStop = () =>
        this.#interrupt(String(soft.reason instanceof Error ? soft.reason.message : 'signal'));
      if (soft.aborted) onStop();
      else soft.addEventListener('abort', onStop, { once: true });
    }
    options.hardSignal?.addEventListener('abort', () => this.#hard.abort(options.hardSignal?.reason), {
      once: true,
    });
  }

  async run(items: Item[]): Promise<RunResult> {
    this.#items = items;
    this.#emit({ type: 'start', outDir: this.#outDir, items: items.length, resumed: this.#resumed });
    await this.#journal.append(
      {
        t: 'run',
        at: this.#startedAt,
        v: 1,
        manifest: this.#options.manifest,
        base_url: this.#client.baseUrl,
        pid: process.pid,
      },
      { sync: true },
    );
    await this.#journal.append({ t: 'plan', ids: items.map((i) => i.id), manifest_dir: this.#manifestDir() });
    this.#logger.info(
      {
        event: 'run_start',
        manifest: this.#options.manifest,
        base_url: this.#client.baseUrl,
        items: items.length,
        resumed: this.#resumed,
      },
      'run started',
    );
    const reportTimer = setInterval(
      () => void this.#writeReports(false).catch(() => {}),
      this.#options.reportIntervalMs ?? 30_000,
    );
    const progressTimer = setInterval(
      () => this.#emit({ type: 'progress', counts: this.counts() }),
      this.#options.progressIntervalMs ?? 1000,
    );
    try {
      const validStyles = await this.#fetchStyles();
      await this.#feed(items, validStyles);
      await this.#drain();
    } catch (error) {
      this.#fail(error);
    } finally {
      clearInterval(reportTimer);
      clearInterval(progressTimer);
      this.#governor.close(new InterruptedError('shutdown'));
      this.#client.close();
      await this.#preflighter.close?.();
    }
    this.#emit({ type: 'progress', counts: this.counts() });
    let report: Report;
    try {
      report = await this.#writeReports(true);
    } catch (error) {
      // The disk that broke the journal usually breaks the report too: the first error is the story.
      if (this.#fatal) {
        this.#logger.error(
          { event: 'report_write_failed', err: String(error) },
          'could not write the reports',
        );
        throw this.#finalError(this.#fatal);
      }
      throw new StateError(
        'report_write_failed',
        `cannot write the reports to ${this.#outDir}: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    this.#logger.info(
      { event: 'run_end', totals: report.run.totals, stats: report.run.stats },
      'run finished',
    );
    if (this.#fatal) throw this.#finalError(this.#fatal);
    if (this.#interrupted) throw new InterruptedError(this.#interrupted);
    const t = report.run.totals;
    return { exitCode: t.succeeded === t.items ? 0 : 1, outDir: this.#outDir, report };
  }

  /** A local failure after jobs went out is exit 1 (a rerun finishes), not exit 2 ("nothing submitted"). */
  #finalError(fatal: KitchenError): KitchenError {
    if (fatal instanceof StateError && this.#submitted > 0) {
      return new PartialRunError(
        fatal.code,
        `${fatal.message}. Jobs already submitted are in the journal; the report lists what is incomplete; rerun the same command to finish`,
        { cause: fatal },
      );
    }
    return fatal;
  }

  /** Counts for progress displays. */
  counts(): ProgressCounts {
    const c = { succeeded: 0, failed: 0, rejected: 0, incomplete: 0 };
    // Cheap enough per second for 10^5 items; avoids a second bookkeeping that could drift.
    for (const item of this.#items) {
      const state = this.#states.get(item.id);
      if (!state) continue;
      if (state.phase === 'downloaded') c.succeeded++;
      else if (state.phase === 'failed') c.failed++;
      else if (state.phase === 'rejected') c.rejected++;
    }
    c.incomplete = this.#items.length - c.succeeded - c.failed - c.rejected;
    const s = this.#gate.stats;
    return {
      total: this.#items.length,
      ...this.#counts,
      ...c,
      requests: s.requests,
      rateLimited: s.rateLimited,
      retries: s.retries,
      rate: this.#governor.rate,
      elapsedMs: monotonicMs() - this.#startedMono,
    };
  }

  // ---- the flow --------------------------------------------------------------------------------

  /** `GET /v1/styles` once: a set of keys, or null when the list is missing or not understood. */
  async #fetchStyles(): Promise<ReadonlySet<string> | null> {
    try {
      const styles = await this.#gate.call(
        'styles',
        'poll',
        () => this.#client.listStyles({ signal: this.#hard.signal }),
        {
          signal: this.#stop.signal,
        },
      );
      if (styles === null) {
        this.#warn(
          'the service answered GET /v1/styles in a shape this tool does not understand; styles are not checked before submitting',
        );
        return null;
      }
      return new Set(styles.map((s) => s.key));
    } catch (error) {
      if (error instanceof ApiError && error.auth) throw this.#refused(error);
      if (error instanceof ApiError && !error.transient) {
        this.#warn(`GET /v1/styles failed (${error.message}); styles are not checked before submitting`);
        return null;
      }
      if (error instanceof ApiError) {
        throw new ServiceRefusedError(
          'unreachable',
          `the service at ${this.#client.baseUrl} cannot be reached: ${error.message}`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }

  /** Streams items through preflight into the job queue, with back-pressure so memory stays flat. */
  async #feed(items: Item[], validStyles: ReadonlySet<string> | null): Promise<void> {
    this.#counts.pending = items.length;
    const window = Math.max(4, (this.#options.concurrency ?? 8) * 2);
    for (const raw of items) {
      if (this.#stop.signal.aborted) break;
      const item = checkStyle(raw, validStyles);
      await this.#prep.onSizeLessThan(this.#prep.concurrency * 2);
      await this.#jobs.onSizeLessThan(window);
      await this.#downloads.onSizeLessThan(window);
      if (this.#stop.signal.aborted) break;
      void this.#prep.add(() => this.#prepare(item)).catch((error) => this.#fail(error));
    }
  }

  async #drain(): Promise<void> {
    // Queues feed each other (prep → jobs → downloads): wait until all three are idle at once.
    while (
      this.#prep.size +
        this.#prep.pending +
        this.#jobs.size +
        this.#jobs.pending +
        this.#downloads.size +
        this.#downloads.pending >
      0
    ) {
      await Promise.all([this.#prep.onIdle(), this.#jobs.onIdle(), this.#downloads.onIdle()]);
    }
  }

  async #prepare(item: Item): Promise<void> {
    if (this.#stop.signal.aborted) return;
    let decision: Decision;
    try {
      decision = await decide(item, {
        preflighter: this.#preflighter,
        state: this.#states.get(item.id),
        outDir: this.#outDir,
        retryFailed: this.#options.retryFailed ?? false,
        verify: this.#options.verify ?? false,
      });
    } catch (error) {
      if (this.#stop.signal.aborted) return;
      throw error;
    }
    const state = await this.#ensureItem(item, decision);
    switch (decision.action) {
      case 'reject':
        this.#counts.pending--;
        if (
          state.phase !== 'rejected' ||
          state.error?.code !== decision.error.code ||
          state.error.message !== decision.error.message
        ) {
          await this.#record({ t: 'rejected', id: item.id, fp: decision.fp, error: decision.error });
        }
        this.#itemEvent(item.id, 'rejected', { error: decision.error });
        return;
      case 'skip':
        this.#counts.pending--;
        this.#counts.skipped++;
        this.#itemEvent(item.id, 'skipped');
        return;
      case 'download':
        this.#counts.pending--;
        this.#queueDownload(item, state);
        return;
      case 'poll':
        void this.#jobs.add(() => this.#lifecycle(item, state, null)).catch((error) => this.#fail(error));
        return;
      case 'submit':
        void this.#jobs
          .add(() => this.#lifecycle(item, state, decision.prepared))
          .catch((error) => this.#fail(error));
        return;
    }
  }

  /** Writes the item's `item` record when it is new, its fingerprint changed or its source moved. */
  async #ensureItem(item: Item, decision: Decision): Promise<ItemState> {
    const known = this.#states.get(item.id);
    const record = {
      t: 'item' as const,
      id: item.id,
      fp: decision.fp,
      image: item.image,
      module: item.module,
      style: item.style ?? null,
      src: decision.src,
    };
    if (known && known.fp === decision.fp) {
      const same = known.image === item.image && JSON.stringify(known.src) === JSON.stringify(decision.src);
      if (!same) {
        await this.#journal.append(record);
        known.image = item.image;
        known.src = decision.src;
      }
      return known;
    }
    await this.#journal.append(record);
    const fresh = newItemState(record);
    if (known) Object.assign(known, fresh);
    else this.#states.set(item.id, fresh);
    return this.#states.get(item.id)!;
  }

  /** One job slot: submit (when needed) and poll to the end; the download goes on outside the slot. */
  async #lifecycle(item: Item, state: ItemState, prepared: Prepared | null): Promise<void> {
    this.#counts.pending--;
    if (this.#stop.signal.aborted) return;
    this.#counts.running++;
    try {
      if (prepared) {
        const accepted = await this.#submit(item, state, prepared);
        if (!accepted) return;
      }
      const job = await this.#poll(item, state);
      if (job?.status === 'succeeded') this.#queueDownload(item, state);
    } finally {
      this.#counts.running--;
    }
  }

  /** Submits one job. True when a job id is recorded. */
  async #submit(item: Item, state: ItemState, prepared: Prepared): Promise<boolean> {
    const max = this.#options.maxSubmissions;
    if (max !== undefined && this.#submitted >= max) {
      await this.#incomplete(item, state, {
        code: 'max_submissions',
        message: `not submitted: this run reached --max-submissions ${max}; a rerun continues`,
      });
      return false;
    }
    this.#submitted++;
    const image = await readFile(prepared.path);
    const fp = state.fp;
    const retryAmbiguous = this.#options.retryAmbiguous ?? false;
    try {
      const job = await this.#gate.call(
        'submit',
        'submit',
        async () => {
          // Fsynced before the request leaves: a crash from here on counts as a possible duplicate.
          await this.#record({ t: 'submitting', id: item.id, fp, at: isoWithOffset() }, true);
          try {
            return await this.#client.createJob(
              {
                module: item.module,
                image,
                filename: prepared.filename,
                contentType: prepared.contentType,
                ...(item.style !== undefined ? { style: item.style } : {}),
                ...(item.prompt !== undefined ? { prompt: item.prompt } : {}),
                ...(item.configuration !== undefined ? { configuration: item.configuration } : {}),
              },
              { signal: this.#hard.signal },
            );
          } catch (error) {
            if (error instanceof ApiError && !error.mayHaveCreatedJob && error.transient) {
              await this.#record({ t: 'not_created', id: item.id, fp, error: errorOf(error) });
            }
            throw error;
          }
        },
        {
          signal: this.#stop.signal,
          label: item.id,
          retryable: (error) =>
            !this.#stop.signal.aborted &&
            (isRetryable(error, 'submit') ||
              (retryAmbiguous && error instanceof ApiError && error.transient)),
        },
      );
      await this.#record({ t: 'accepted', id: item.id, fp, job_id: job.id, at: isoWithOffset() }, true);
      this.#polls.accepted(item.id, job.createdAt);
      this.#itemEvent(item.id, 'submitted', { jobId: job.id });
      this.#logger.info({ event: 'accepted', item: item.id, job_id: job.id }, 'job accepted');
      return true;
    } catch (error) {
      if (!(error instanceof ApiError)) {
        if (this.#stop.signal.aborted) return false;
        throw error;
      }
      if (error.auth) {
        await this.#record({ t: 'not_created', id: item.id, fp, error: errorOf(error) });
        this.#fail(this.#refused(error));
        return false;
      }
      if (!error.transient) {
        // 400/413/415/422: the service refused this item alone; nothing was created.
        await this.#record({ t: 'refused', id: item.id, fp, error: errorOf(error) });
        this.#itemEvent(item.id, 'failed', { error: errorOf(error) });
        this.#logger.warn(
          { event: 'refused', item: item.id, status: error.status, code: error.serviceCode },
          error.message,
        );
        return false;
      }
      if (error.mayHaveCreatedJob) {
        const unknown = {
          code: 'submit_unknown',
          message: `the job may have been created (${error.message}); not resent, to avoid a duplicate charge. A rerun (or --retry-ambiguous) sends it again`,
        };
        await this.#incomplete(item, state, unknown);
        return false;
      }
      await this.#incomplete(item, state, {
        code: 'service_unavailable',
        message: `not submitted: ${error.message}`,
      });
      this.#checkReachable(error);
      return false;
    }
  }

  /** Polls the item's job until it ends, times out or the run stops. Null unless ended. */
  async #poll(item: Item, state: ItemState): Promise<Job | null> {
    const jobId = state.jobId!;
    const startedMono = monotonicMs();
    const timeout = this.#options.jobTimeoutMs ?? 1_800_000;
    const budget = this.#options.pollErrorBudget ?? 10;
    let errors = 0;
    let wait = this.#polls.firstDelay(item.id);
    for (;;) {
      try {
        await this.#polls.waitTurn(item.id, wait, this.#stop.signal);
      } catch {
        return null; // stopping: the job id is in the journal, a rerun polls it
      }
      if (monotonicMs() - startedMono > timeout) {
        await this.#incomplete(item, state, {
          code: 'job_timeout',
          message: `job ${jobId} did not end within --job-timeout ${Math.round(timeout / 1000)} s; a rerun polls it again`,
        });
        return null;
      }
      let job: Job;
      try {
        job = await this.#gate.call(
          'poll',
          'poll',
          () => this.#client.getJob(jobId, { signal: this.#hard.signal }),
          {
            signal: this.#stop.signal,
            label: item.id,
            retryable: () => false,
          },
        );
        this.#polls.polled(item.id);
      } catch (error) {
        this.#polls.polled(item.id);
        if (this.#stop.signal.aborted) return null;
        if (!(error instanceof ApiError)) throw error;
        if (error.auth) {
          this.#fail(this.#refused(error));
          return null;
        }
        if (error.rateLimited) {
          wait = MIN_POLL_INTERVAL_MS;
          continue;
        }
        if (error.status === 404 || error.status === 410) {
          await this.#incomplete(item, state, {
            code: 'job_not_found',
            message: `the service no longer knows job ${jobId} (HTTP ${error.status}); not resubmitted automatically`,
          });
          return null;
        }
        errors++;
        this.#logger.info(
          { event: 'poll_error', item: item.id, job_id: jobId, reason: error.code, errors },
          error.message,
        );
        if (errors >= budget || !error.transient) {
          await this.#incomplete(item, state, {
            code: 'poll_failed',
            message: `polling job ${jobId} kept failing: ${error.message}`,
          });
          this.#checkReachable(error);
          return null;
        }
        wait = Math.max(MIN_POLL_INTERVAL_MS, backoffDelay(errors - 1, this.#options.retry ?? {}));
        continue;
      }
      errors = 0;
      if (job.status === 'succeeded' || job.status === 'failed') {
        this.#polls.ended(item.id, job);
        await this.#record({
          t: 'ended',
          id: item.id,
          fp: state.fp,
          job_id: jobId,
          status: job.status,
          image_url: job.imageUrl,
          processing_time_ms: job.processingTimeMs,
          error: job.error,
        });
        if (job.status === 'failed') {
          this.#itemEvent(item.id, 'failed', { jobId, error: job.error! });
          this.#logger.info(
            { event: 'failed', item: item.id, job_id: jobId, code: job.error?.code },
            'job failed',
          );
        }
        return job;
      }
      wait = this.#polls.nextDelay(item.id);
    }
  }

  #queueDownload(item: Item, state: ItemState): void {
    this.#counts.downloading++;
    void this.#downloads
      .add(async () => {
        try {
          await this.#download(item, state);
        } finally {
          this.#counts.downloading--;
        }
      })
      .catch((error) => this.#fail(error));
  }

  /**
   * Fetches the result into `results/` whole or not at all: stream to a `.part`, check it decodes,
   * fsync, rename, fsync the folder, then journal it. An expired URL re-polls the job once for a
   * fresh one.
   */
  async #download(item: Item, state: ItemState): Promise<void> {
    if (this.#stop.signal.aborted) return;
    const results = path.join(this.#outDir, 'results');
    let refreshed = false;
    for (;;) {
      const url = state.imageUrl;
      if (!url) {
        await this.#incomplete(item, state, {
          code: 'download_failed',
          message: 'the job succeeded without a result URL',
        });
        return;
      }
      const part = path.join(results, `.${item.id}.${process.pid}.part`);
      try {
        const file = await this.#gate.call(
          'download',
          'poll',
          async () => {
            const got = await this.#client.downloadResult(url, part, { signal: this.#hard.signal });
            await checkDecodes(part).catch(async (error: unknown) => {
              await rm(part, { force: true });
              throw error;
            });
            return got;
          },
          {
            signal: this.#stop.signal,
            label: item.id,
            retryable: (error) => isRetryable(error, 'download') && !isExpired(error),
          },
        );
        const name = `${item.id}.${RESULT_EXTENSIONS[file.format]}`;
        const final = path.resolve(results, name);
        if (path.dirname(final) !== results)
          throw new StateError('bad_id', `item id ${item.id} escapes results/`);
        await rename(part, final);
        await fsyncDir(results);
        const st = await stat(final);
        await this.#removeOtherFormats(item.id, name);
        await this.#record(
          {
            t: 'downloaded',
            id: item.id,
            fp: state.fp,
            job_id: state.jobId!,
            output: `results/${name}`,
            sha256: file.sha256,
            bytes: file.bytes,
            mtime_ms: st.mtimeMs,
          },
          true,
        );
        this.#itemEvent(item.id, 'succeeded', { jobId: state.jobId! });
        this.#logger.info(
          { event: 'downloaded', item: item.id, job_id: state.jobId, bytes: file.bytes },
          'result saved',
        );
        return;
      } catch (error) {
        await rm(part, { force: true });
        if (this.#stop.signal.aborted) return;
        if (error instanceof StateError) throw error;
        if (isLocalFsError(error)) {
          throw new StateError(
            'disk',
            `cannot write results to ${results} (${error.code}); the run stops, nothing is marked done; free space and rerun`,
            { cause: error },
          );
        }
        if (isExpired(error) && !refreshed && state.jobId) {
          refreshed = true;
          this.#logger.info(
            { event: 'result_url_expired', item: item.id, job_id: state.jobId },
            're-polling the job for a fresh URL',
          );
          const fresh = await this.#refreshUrl(item, state).catch(() => null);
          if (fresh) continue;
        }
        const message = error instanceof Error ? error.message : String(error);
        await this.#incomplete(item, state, {
          code: 'download_failed',
          message: `result download failed: ${message}; a rerun retries it`,
        });
        if (error instanceof ApiError) this.#checkReachable(error);
        return;
      }
    }
  }

  async #refreshUrl(item: Item, state: ItemState): Promise<boolean> {
    await this.#polls.waitTurn(item.id, MIN_POLL_INTERVAL_MS, this.#stop.signal);
    const job = await this.#gate.call(
      'poll',
      'poll',
      () => this.#client.getJob(state.jobId!, { signal: this.#hard.signal }),
      {
        signal: this.#stop.signal,
        label: item.id,
      },
    );
    this.#polls.polled(item.id);
    if (job.status !== 'succeeded' || !job.imageUrl) return false;
    await this.#record({
      t: 'ended',
      id: item.id,
      fp: state.fp,
      job_id: job.id,
      status: 'succeeded',
      image_url: job.imageUrl,
      processing_time_ms: job.processingTimeMs ?? state.processingTimeMs,
      error: null,
    });
    return true;
  }

  async #removeOtherFormats(id: string, keep: string): Promise<void> {
    for (const ext of Object.values(RESULT_EXTENSIONS)) {
      const name = `${id}.${ext}`;
      if (name !== keep) await rm(path.join(this.#outDir, 'results', name), { force: true });
    }
  }

  // ---- bookkeeping -----------------------------------------------------------------------------

  /** Appends a record and applies it to the live state, so the live state equals a replay. */
  async #record(record: ItemRecord, sync = false): Promise<void> {
    try {
      await this.#journal.append(record, { sync });
    } catch (error) {
      this.#fail(error);
      throw error;
    }
    if (record.t !== 'item') {
      const state = this.#states.get(record.id);
      if (state) applyRecord(state, record);
    }
  }

  async #incomplete(item: Item, state: ItemState, error: ItemError): Promise<void> {
    await this.#record({ t: 'incomplete', id: item.id, fp: state.fp, error });
    this.#itemEvent(item.id, 'incomplete', { error });
    this.#logger.info({ event: 'incomplete', item: item.id, code: error.code }, error.message);
  }

  #itemEvent(
    id: string,
    status: Extract<RunEvent, { type: 'item' }>['status'],
    extra: { jobId?: string; error?: ItemError } = {},
  ): void {
    this.#emit({ type: 'item', id, status, ...extra });
  }

  #emit(event: RunEvent): void {
    try {
      this.#options.onEvent?.(event);
    } catch (error) {
      this.#logger.error({ event: 'listener_error', err: String(error) }, 'an onEvent listener threw');
    }
  }

  #warn(message: string): void {
    this.#logger.warn({ event: 'warning' }, message);
    this.#emit({ type: 'warning', message });
  }

  #refused(error: ApiError): ServiceRefusedError {
    return new ServiceRefusedError(
      error.status === 403 ? 'forbidden' : 'unauthorized',
      `the service refused the API key (HTTP ${error.status}${error.serviceMessage ? `: ${error.serviceMessage}` : ''}); check KITCHEN_API_KEY. State is saved; rerun when fixed`,
      { cause: error },
    );
  }

  /** Ends the run with exit 3 when calls keep failing and the service has not answered for a long time. */
  #checkReachable(error: ApiError): void {
    if (error.kind === 'http' && error.status !== undefined && error.status < 500 && error.status !== 429)
      return;
    const silentFor = monotonicMs() - Math.max(this.#gate.lastAliveAt, this.#startedMono);
    if (silentFor >= (this.#options.unreachableMs ?? 120_000) || this.#gate.stats.successes === 0) {
      this.#fail(
        new ServiceRefusedError(
          'unreachable',
          `the service at ${this.#client.baseUrl} stayed unreachable (${error.message}); state is saved, rerun to continue`,
          { cause: error },
        ),
      );
    }
  }

  /** Stops the run for good: first fatal error wins; no new submissions, in-flight work gets the grace period. */
  #fail(error: unknown): void {
    if (!this.#fatal) {
      this.#fatal =
        error instanceof KitchenError
          ? error
          : isLocalFsError(error)
            ? new StateError(
                'disk',
                `cannot write in ${this.#outDir} (${error.code}${error.path ? ` on ${error.path}` : ''}); free space or fix permissions, then rerun`,
                { cause: error },
              )
            : new KitchenError('internal', `unexpected error: ${(error as Error)?.stack ?? String(error)}`);
      this.#logger.error({ event: 'fatal', code: this.#fatal.code }, this.#fatal.message);
    }
    this.#beginStop();
  }

  #interrupt(reason: string): void {
    this.#interrupted ??= reason;
    this.#logger.warn(
      { event: 'interrupted', reason },
      'stopping: no new submissions; in-flight requests may finish',
    );
    this.#beginStop();
  }

  #beginStop(): void {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort(new InterruptedError('stop'));
    this.#jobs.clear();
    this.#prep.clear();
    this.#downloads.clear();
    const grace = setTimeout(
      () => this.#hard.abort(new InterruptedError('grace period over')),
      this.#options.graceMs ?? 5000,
    );
    grace.unref();
  }

  #manifestDir(): string {
    return path.dirname(path.resolve(this.#options.cwd ?? process.cwd(), this.#options.manifest));
  }

  async #writeReports(final: boolean): Promise<Report> {
    const stats = this.#gate.stats;
    const states = this.#items.map(
      (item) =>
        this.#states.get(item.id) ??
        newItemState({
          t: 'item',
          id: item.id,
          fp: '',
          image: item.image,
          module: item.module,
          style: item.style ?? null,
          src: null,
        }),
    );
    const report = buildReport(
      {
        manifest: this.#options.manifest,
        base_url: this.#client.baseUrl,
        started_at: this.#startedAt,
        finished_at: isoWithOffset(),
        stats: {
          duration_ms: Math.round(monotonicMs() - this.#startedMono),
          requests: stats.requests,
          retries: stats.retries,
          rate_limited: stats.rateLimited,
          processing_time_p50_ms: null,
          processing_time_p95_ms: null,
        },
      },
      states,
    );
    await writeReports(this.#outDir, report, {
      html: final && (this.#options.html ?? true),
      manifestDir: this.#manifestDir(),
    });
    return report;
  }
}

function errorOf(error: ApiError): ItemError {
  return {
    code: error.serviceCode ?? error.code,
    message: error.serviceMessage ?? error.message,
  };
}

function isExpired(error: unknown): boolean {
  return (
    error instanceof ApiError &&
    error.kind === 'http' &&
    (error.status === 403 || error.status === 404 || error.status === 410)
  );
}

/** A result must decode whole: a connection-close body can be cut short without any error. */
async function checkDecodes(file: string): Promise<void> {
  try {
    // A full decode (shrink-on-load still reads every byte of the entropy-coded data) at a tiny
    // output size: ~10× cheaper than stats(), and it still fails on a cut-short file.
    await sharp(file, { failOn: 'error' }).resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch (error) {
    throw new ApiError({
      kind: 'protocol',
      code: 'bad_result',
      message: `result image does not decode: ${(error as Error).message}`,
      request: { method: 'GET', path: '(result)' },
      requestMayHaveReached: true,
    });
  }
}
