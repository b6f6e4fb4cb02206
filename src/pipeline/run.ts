import type { Logger } from 'pino';
import { KitchenClient } from '../api/client.js';
import { ServiceGate } from '../api/gate.js';
import { RateGovernor } from '../api/governor.js';
import { InterruptedError, type KitchenError, PartialRunError, StateError } from '../errors.js';
import { checkManifestFile, checkStyle, openManifest } from '../manifest/index.js';
import { createPreflighter } from '../preflight/index.js';
import { EarlyThumbnails } from '../report/early-thumbs.js';
import { RunReporter } from '../report/reporter.js';
import type { WrittenReport } from '../report/write.js';
import { PAGE_FIRST } from '../report/write.js';
import { Reviewer } from '../review/index.js';
import { ItemStore } from '../state/items.js';
import { PLAN_FILE, PlanLines, writePlanFile } from '../state/plan-file.js';
import { preparedDir } from '../state/run-files.js';
import { openRunFolder } from '../state/run-folder.js';
import type { Item, Report, ReportItem } from '../types.js';
import { monotonicMs } from '../util/time.js';
import type { StageContext } from './context.js';
import type { RunEvent } from './events.js';
import { fetchStyleKeys } from './fetch-styles.js';
import { Flow } from './flow.js';
import {
  isResolved,
  type ResolvedRunOptions,
  type RunOptions,
  resolvePlanOptions,
  resolveRunOptions,
} from './options.js';
import { folderPath, settleOutDir } from './out-dir.js';
import { MIN_POLL_INTERVAL_MS, PollScheduler } from './poll-schedule.js';
import { inShard, shardChange, shardText } from './shard.js';
import { RunStop } from './stop.js';
import { UploadReader } from './submit.js';

export type { RunOptions } from './options.js';

/** What {@link runBatch} returns. */
export interface RunResult {
  /** The exit code (docs/contract.md#exit-codes): 0 all succeeded, 1 some did not. (2, 3 and 130 are thrown.) */
  exitCode: 0 | 1;
  outDir: string;
  /** report.json's `run` object: totals, stats, times. */
  run: Report['run'];
  /**
   * The first items that did not succeed (at most 100), in manifest order. Every item is in
   * `<outDir>/report.json` and `report.csv`, which a catalogue of any size is streamed into.
   */
  problems: ReportItem[];
  /** Items an earlier run had finished (left alone now), and submissions this run made. */
  resumed: { doneEarlier: number; submittedNow: number };
}

/**
 * Runs a manifest through the service: plan, preflight, submit, poll, download, report. Resumes a
 * previous run in the same output folder. Resolves with exit code 0 or 1; throws `UsageError` /
 * `ManifestError` / `StateError` (exit 2), `ServiceRefusedError` (exit 3), `PartialRunError` (exit 1:
 * a local fault after jobs went out) or `InterruptedError` (exit 130), always after saving the
 * journal and the reports it can (docs/contract.md#exit-codes).
 */
export async function runBatch(input: RunOptions | ResolvedRunOptions): Promise<RunResult> {
  if (!isResolved(input)) {
    // As the CLI: the settings, then a manifest that is not there, and only then a missing service,
    // so a wrong path is not reported as a missing key.
    const { service: _service, ...settings } = input;
    const checked = resolvePlanOptions(settings);
    await checkManifestFile(checked.manifest, checked.cwd);
  }
  let options = resolveRunOptions(input);
  // The manifest is checked whole first (a bad row or a duplicate id submits nothing), keeping only
  // the plan (about 90 bytes per item); the items themselves are read again as the queues make room.
  const { shard } = options.limits;
  const planned = new PlanLines();
  const first = new Set<string>();
  const manifest = await openManifest(options.manifest, {
    cwd: options.cwd,
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
  };
  // The folder holds one manifest's runs: the default moves aside from another's, `--out` is refused.
  const settled = await settleOutDir(
    { ...options, manifestRenamed: options.resume.manifestRenamed },
    (dir) => openRunFolder(dir, folderOptions),
    (opened) => ({ run: opened.lastRun, plan: opened.lastPlan }),
    (opened) => opened.close(),
  );
  const folder = settled.opened;
  options = { ...options, outDir: settled.dir };
  try {
    const refusal = shardChange(folder.lastRun?.shard, shard, options.outDir);
    if (refusal) throw new StateError('shard_changed', refusal);
    const { logger } = folder;
    const store = new ItemStore(folder.journal, folder.states, {
      onFailure: (error) => flow.fail(error),
      interner: folder.interner,
    });
    // report.html's first thumbnails are made as results arrive (only when there is to be a page).
    const thumbnails = options.output.html
      ? new EarlyThumbnails({ output: folder.output, manifestDir: options.manifestDir, first, states: store })
      : null;
    // Each result is reviewed against its source as it arrives, off the critical path.
    const reviewer = options.review.enabled
      ? new Reviewer({
          outDir: folder.output,
          states: store,
          record: (record) => store.record(record),
          logger,
          threshold: options.review.threshold,
        })
      : null;
    const emit = guardedListener(options.onEvent, logger, (event) => {
      thumbnails?.onEvent(event);
      reviewer?.onEvent(event);
    });
    for (const warning of manifest.warnings) emit({ type: 'warning', message: warning });
    if (settled.note) {
      logger.warn({ event: 'out_dir_moved_aside', out_dir: settled.dir }, settled.note);
      emit({ type: 'warning', message: settled.note });
    }

    // The service, and the context every stage works in.
    const { client, governor, gate } = connect(options, logger, emit);
    const stop = new RunStop(options.timing.graceMs);
    const ctx: StageContext<ItemStore> = {
      client,
      gate,
      store,
      polls: new PollScheduler(MIN_POLL_INTERVAL_MS, monotonicMs, {
        pressure: () => governor.pressure,
        // Nothing left to submit: the last jobs decide when the run ends.
        draining: () => flow.counts.pending === 0,
      }),
      logger,
      stop: stop.soft,
      abort: stop.hard,
      resultsDir: folder.resultsDir,
      output: folder.output,
      uploads: new UploadReader(),
    };
    const preflighter = createPreflighter({
      cacheDir: preparedDir(options.outDir),
      ...options.preflight,
      // The as-is check's small rendition is the review's view of the source: not decoded twice.
      ...(reviewer ? { onSample: (sha: string, sample) => reviewer.offerSource(sha, sample) } : {}),
    });
    const { concurrency, maxSubmissions, jobTimeoutMs, maxDurationMs, maxDurationGraceMs } = options.limits;
    const flow: Flow = new Flow(
      ctx,
      stop,
      preflighter,
      {
        outDir: options.outDir,
        concurrency,
        maxSubmissions,
        jobTimeoutMs,
        maxDurationMs,
        maxDurationGraceMs,
        ...options.resume,
      },
      emit,
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
      output: folder.output,
      reportIntervalMs: options.timing.reportIntervalMs,
      progressIntervalMs: options.timing.progressIntervalMs,
      html: options.output.html,
      baseUrl: client.baseUrl,
      total: manifest.count,
      plan,
      store,
      gate,
      polls: ctx.polls.stats,
      flow,
      emit,
    });

    emit({ type: 'start', outDir: options.outDir, items: manifest.count, resumed: folder.resumed });
    reporter.start();
    try {
      await folder.journal.append(
        {
          t: 'run',
          at: reporter.startedAt,
          v: 1,
          manifest: options.manifest,
          manifest_path: settled.file,
          out_dir: await folderPath(settled.dir),
          base_url: client.baseUrl,
          pid: process.pid,
          ...(shard ? { shard: shardText(shard) } : {}),
        },
        { sync: true },
      );
      await writePlanFile(folder.output, planned);
      planned.clear();
      await folder.journal.append(plan);
      logger.info(
        {
          event: 'run_start',
          manifest: options.manifest,
          base_url: client.baseUrl,
          items: manifest.count,
          resumed: folder.resumed,
        },
        'run started',
      );
      // Styles are a manifest check against the service's list: unknown ones are rejected unsent.
      const styles = await fetchStyleKeys(ctx, (message) => {
        logger.warn({ event: 'warning' }, message);
        emit({ type: 'warning', message });
      });
      await flow.run(checkStyles(manifest.items(), styles), manifest.count);
    } catch (error) {
      flow.fail(error);
    } finally {
      reporter.stop();
      await thumbnails?.close();
      // A run that stops leaves the reviews not started to a rerun (or `review`).
      if (flow.interrupted || flow.fatal) reviewer?.stop();
      await reviewer?.drain();
      await reviewer?.close();
      reviewer?.logEnd();
      governor.close(new InterruptedError('shutdown'));
      client.close();
      await preflighter.close();
    }

    // Finish: the final reports, then the exit code (or the error that stopped the run).
    return await finish(flow, reporter, logger, options.outDir, folder.journal.stats);
  } finally {
    await folder.close();
  }
}

/** Writes the final reports and turns how the run ended into its result or its error. */
async function finish(
  flow: Flow,
  reporter: RunReporter,
  logger: Logger,
  outDir: string,
  journal: { records: number; syncs: number },
): Promise<RunResult> {
  reporter.progress();
  let report: WrittenReport;
  try {
    report = await reporter.write(true);
  } catch (error) {
    // The disk that broke the journal usually breaks the report too: the first error is the story.
    if (flow.fatal) {
      logger.error({ event: 'report_write_failed', err: String(error) }, 'could not write the reports');
      throw finalError(flow.fatal, flow.submitted);
    }
    throw new StateError(
      'report_write_failed',
      `cannot write the reports to ${outDir}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  logger.info(
    { event: 'run_end', totals: report.run.totals, stats: report.run.stats, journal },
    'run finished',
  );
  if (flow.fatal) throw finalError(flow.fatal, flow.submitted);
  if (flow.interrupted) throw new InterruptedError(flow.interrupted);
  const t = report.run.totals;
  return {
    exitCode: t.succeeded === t.items ? 0 : 1,
    outDir,
    run: report.run,
    problems: report.problems,
    resumed: { doneEarlier: flow.counts.skipped, submittedNow: flow.submitted },
  };
}

/** The client, the rate governor (its changes logged and announced) and the gate over both. */
function connect(options: ResolvedRunOptions, logger: Logger, emit: (event: RunEvent) => void) {
  const { service } = options;
  const t = service.timeouts ?? {};
  const client = new KitchenClient({
    baseUrl: service.baseUrl,
    apiKey: service.apiKey,
    ...(t.connect !== undefined ? { connectTimeoutMs: t.connect } : {}),
    ...(t.request !== undefined ? { requestTimeoutMs: t.request } : {}),
    ...(t.upload !== undefined ? { uploadTimeoutMs: t.upload } : {}),
    ...(t.download !== undefined ? { downloadTimeoutMs: t.download } : {}),
  });
  const { maxRate } = options.limits;
  const governor = new RateGovernor({
    ...service.governor,
    ...(maxRate !== null ? { maxRate: Math.min(maxRate, service.governor?.maxRate ?? maxRate) } : {}),
    onChange: (event) => {
      logger.info(
        { event: `rate_${event.type}`, ...event, type: undefined },
        `request rate now ${event.rate.toFixed(2)}/s`,
      );
      emit({
        type: 'rate',
        rate: event.rate,
        ...(event.type === 'decrease' ? { pauseMs: event.pauseMs } : {}),
      });
    },
  });
  const gate = new ServiceGate(governor, logger, {
    ...(service.retry ? { retry: service.retry } : {}),
    unreachableMs: service.unreachableMs,
  });
  return { client, governor, gate };
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

/** The manifest's items with the style check against the service's list applied (unknown: rejected). */
async function* checkStyles(
  items: AsyncIterable<Item>,
  styles: ReadonlySet<string> | null,
): AsyncGenerator<Item> {
  for await (const item of items) yield checkStyle(item, styles);
}

/** A local failure after jobs went out is exit 1 (a rerun finishes), not exit 2 ("nothing submitted"). */
function finalError(fatal: KitchenError, submitted: number): KitchenError {
  if (fatal instanceof StateError && submitted > 0) {
    return new PartialRunError(
      fatal.code,
      `${fatal.message}. Jobs already submitted are in the journal; the report lists what is incomplete; rerun the same command to finish`,
      { cause: fatal },
    );
  }
  return fatal;
}
