/**
 * What a local run is made of, put together and taken apart for `runBatch` (`run.ts`): the
 * manifest's plan and the run folder (`openRun`), then the item store, the review, the early
 * thumbnails, the service (`connect`), the flow and the reporter (`assembleRun`), and their orderly
 * close (`closeRun`).
 */
import type { Logger } from 'pino';
import { StateError } from '../errors.js';
import { checkManifestFile, type Manifest, openManifest } from '../manifest/index.js';
import { createPreflighter, type Preflighter } from '../preflight/index.js';
import { EarlyThumbnails } from '../report/early-thumbs.js';
import { RunReporter } from '../report/reporter.js';
import { PAGE_FIRST } from '../report/write.js';
import { Reviewer } from '../review/index.js';
import { type Connection, connect } from '../stages/connect.js';
import type { StageContext } from '../stages/context.js';
import { RunStop } from '../stages/stop.js';
import { UploadReader } from '../stages/submit.js';
import { ItemStore } from '../state/items.js';
import { PLAN_FILE, PlanLines } from '../state/plan-file.js';
import { openOutFolder } from '../state/remote-folder.js';
import type { RunFolder } from '../state/run-folder.js';
import { countedOutput } from '../storage/counted.js';
import { createSources, type Sources } from '../storage/sources.js';
import type { Item } from '../types.js';
import type { RunEvent } from './events.js';
import { Flow } from './flow.js';
import {
  isResolved,
  type ResolvedRunOptions,
  type RunOptions,
  resolvePlanOptions,
  resolveRunOptions,
} from './options.js';
import { settleOutDir } from './out-dir.js';
import { inShard, shardChange } from './shard.js';

/** A run's options, its manifest's plan, and its folder, opened (and locked). */
export interface OpenedRun {
  options: ResolvedRunOptions;
  manifest: Manifest;
  /** The plan's lines, for `plan.jsonl`. */
  planned: PlanLines;
  /** The first items of the manifest: report.html's first page. */
  first: Set<string>;
  folder: RunFolder;
  /** The manifest path as the folder records it. */
  manifestFile: string;
  /** Why the default folder moved aside from another manifest's, if it did. */
  note: string | null;
}

/**
 * Checks the options and the whole manifest (a bad row or a duplicate id submits nothing), then
 * opens the run folder; throws the usage, manifest or state error the CLI reports.
 */
export async function openRun(input: RunOptions | ResolvedRunOptions): Promise<OpenedRun> {
  if (!isResolved(input)) {
    // As the CLI: the settings, then a manifest that is not there, and only then a missing service,
    // so a wrong path is not reported as a missing key.
    const { service: _service, ...settings } = input;
    const checked = resolvePlanOptions(settings);
    await checkManifestFile(checked.manifest, checked.cwd, checked.sources);
  }
  const options = resolveRunOptions(input);
  // Only the plan is kept (about 90 bytes per item); the items themselves are read again as the
  // queues make room.
  const { shard } = options.limits;
  const planned = new PlanLines();
  const first = new Set<string>();
  const manifest = await openManifest(options.manifest, {
    cwd: options.cwd,
    access: options.sources,
    ...(shard ? { filter: (item: Item) => inShard(item.id, shard) } : {}),
    onItem: (item) => {
      planned.add({ id: item.id, image: item.image, module: item.module, style: item.style ?? null });
      if (first.size < PAGE_FIRST) first.add(item.id);
    },
  });
  const folderOptions = {
    logLevel: options.output.logLevel,
    secrets: [options.service.apiKey],
    onWarning: (message: string) => options.onEvent({ type: 'warning', message }),
    mirror: options.logger ?? undefined,
    // A bucket prefix's local cache, and the environment its S3 client is configured from.
    cacheDir: options.cacheDir,
    env: options.sources.env,
  };
  // The folder holds one manifest's runs: the default moves aside from another's, `--out` is refused.
  const settled = await settleOutDir(
    { ...options, manifestRenamed: options.resume.manifestRenamed },
    (dir) => openOutFolder(dir, folderOptions),
    (opened) => ({ run: opened.lastRun, plan: opened.lastPlan }),
    (opened) => opened.close(),
  );
  return {
    options: { ...options, outDir: settled.dir },
    manifest,
    planned,
    first,
    folder: settled.opened,
    manifestFile: settled.file,
    note: settled.note,
  };
}

/** The parts of a run, assembled by {@link assembleRun}. */
export interface RunParts {
  logger: Logger;
  store: ItemStore;
  /** The run's events: ours first (thumbnails), then the caller's listener. */
  emit: (event: RunEvent) => void;
  service: Connection;
  ctx: StageContext<ItemStore>;
  preflighter: Preflighter;
  /** Where the items' images are read (local, https, S3), under the run's `sources` access. */
  sources: Sources;
  thumbnails: EarlyThumbnails | null;
  reviewer: Reviewer | null;
  flow: Flow;
  reporter: RunReporter;
  /** The `plan` record of the journal. */
  plan: { t: 'plan'; manifest_dir: string; file: string; count: number };
}

/** Puts a run's parts together over its opened folder; refuses a folder sharded another way. */
export function assembleRun(run: OpenedRun): RunParts {
  const { options, folder, manifest } = run;
  const refusal = shardChange(folder.lastRun?.shard, options.limits.shard, options.outDir);
  if (refusal) throw new StateError('shard_changed', refusal);
  const { logger } = folder;
  options.onLogger?.(logger);
  // One set of pooled connections (http keep-alive, the S3 client) for every stage of the run.
  const sources = createSources(options.sources);
  // The results, reports and thumbnails written through it are counted for the metrics.
  const output = countedOutput(folder.output, options.sources.onStoreOp);
  const store = new ItemStore(folder.journal, folder.states, {
    onFailure: (error) => flow.fail(error),
    interner: folder.interner,
  });
  // report.html's first thumbnails are made as results arrive (only when there is to be a page).
  const thumbnails = options.output.html
    ? new EarlyThumbnails({
        output: output,
        manifestDir: options.manifestDir,
        first: run.first,
        states: store,
      })
    : null;
  // Each result is reviewed against its source as it arrives, off the critical path.
  const reviewer = options.review.enabled
    ? new Reviewer({
        outDir: output,
        states: store,
        record: (record) => store.record(record),
        logger,
        threshold: options.review.threshold,
      })
    : null;
  const emit = guardedListener(options.onEvent, logger, (event) => thumbnails?.onEvent(event));
  for (const warning of manifest.warnings) emit({ type: 'warning', message: warning });
  if (run.note) {
    logger.warn({ event: 'out_dir_moved_aside', out_dir: options.outDir }, run.note);
    emit({ type: 'warning', message: run.note });
  }
  const service = connect({
    service: options.service,
    maxRate: options.limits.maxRate,
    logger,
    onRate: (event) =>
      emit({
        type: 'rate',
        rate: event.rate,
        ...(event.type === 'decrease' ? { pauseMs: event.pauseMs } : {}),
      }),
    onRequest: (kind, status) =>
      emit({ type: 'request', endpoint: kind === 'submit-ambiguous' ? 'submit' : kind, status }),
    // Nothing left to submit: the last jobs decide when the run ends.
    polls: { draining: () => flow.counts.pending === 0 },
  });
  const stop = new RunStop(options.timing.graceMs);
  const ctx: StageContext<ItemStore> = {
    client: service.client,
    gate: service.gate,
    store,
    polls: service.polls,
    logger,
    stop: stop.soft,
    abort: stop.hard,
    resultsDir: folder.resultsDir,
    output: output,
    uploads: new UploadReader(),
  };
  const preflighter = createPreflighter({
    cacheDir: folder.preparedDir,
    ...options.preflight,
    sources,
    // The as-is check's small rendition is the review's view of the source: not decoded twice.
    ...(reviewer ? { onSample: (sha: string, sample) => reviewer.offerSource(sha, sample) } : {}),
  });
  const flow: Flow = new Flow(
    { ctx, stop, preflighter, emit, ...(reviewer ? { review: (id: string) => reviewer.add(id) } : {}) },
    { outDir: options.outDir, ...options.limits, ...options.resume },
  );
  stop.follow(options.signals, (reason) => flow.interrupt(reason));
  const plan = {
    t: 'plan' as const,
    manifest_dir: options.manifestDir,
    file: PLAN_FILE,
    count: manifest.count,
  };
  const reporter = new RunReporter({
    manifest: options.manifest,
    manifestDir: options.manifestDir,
    output: output,
    reportIntervalMs: options.timing.reportIntervalMs,
    progressIntervalMs: options.timing.progressIntervalMs,
    html: options.output.html,
    baseUrl: service.client.baseUrl,
    total: manifest.count,
    plan,
    store,
    gate: service.gate,
    polls: service.polls.stats,
    flow,
    emit,
  });
  return {
    logger,
    store,
    emit,
    service,
    ctx,
    preflighter,
    sources,
    thumbnails,
    reviewer,
    flow,
    reporter,
    plan,
  };
}

/** Stops what a run started, in order: reports, thumbnails, reviews (drained), the service, preflight, sources. */
export async function closeRun(parts: RunParts): Promise<void> {
  const { reporter, thumbnails, reviewer, flow } = parts;
  reporter.stop();
  await thumbnails?.close();
  // A run that stops leaves the reviews not started to a rerun (or `review`).
  if (flow.interrupted || flow.fatal) reviewer?.stop();
  await reviewer?.drain();
  await reviewer?.close();
  reviewer?.logEnd();
  parts.service.close();
  await parts.preflighter.close();
  parts.sources.close();
}

/** The caller's listener, made safe (one that throws is logged, never the run's end), after ours. */
function guardedListener(
  listener: (event: RunEvent) => void,
  logger: Logger,
  internal: (event: RunEvent) => void,
): (event: RunEvent) => void {
  return (event) => {
    internal(event);
    try {
      listener(event);
    } catch (error) {
      logger.error({ event: 'listener_error', err: String(error) }, 'an onEvent listener threw');
    }
  };
}
