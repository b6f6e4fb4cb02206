/**
 * `run`: a manifest through the service, driven by the local flow (`flow.ts`) over the parts
 * `setup.ts` assembles; the journal's first records, and how the run ended turned into its result.
 */
import type { Logger } from 'pino';
import { InterruptedError, type KitchenError, PartialRunError, StateError } from '../errors.js';
import { checkStyle } from '../manifest/index.js';
import type { RunReporter } from '../report/reporter.js';
import type { WrittenReport } from '../report/write.js';
import { fetchStyleKeys } from '../stages/fetch-styles.js';
import { writePlanFile } from '../state/plan-file.js';
import { rememberRate } from '../state/rates.js';
import type { Item, Report, ReportItem } from '../types.js';
import type { Flow } from './flow.js';
import type { ResolvedRunOptions, RunOptions } from './options.js';
import { folderPath } from './out-dir.js';
import { assembleRun, closeRun, type OpenedRun, openRun, type RunParts } from './setup.js';
import { shardText } from './shard.js';

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
  const opened = await openRun(input);
  const { options, folder, manifest } = opened;
  try {
    const parts = assembleRun(opened);
    const { flow, reporter, logger, emit } = parts;
    emit({ type: 'start', outDir: options.outDir, items: manifest.count, resumed: folder.resumed });
    reporter.start();
    try {
      await journalStart(opened, parts);
      // Styles are a manifest check against the service's list: unknown ones are rejected unsent.
      const styles = await fetchStyleKeys(parts.ctx, (message) => emit({ type: 'warning', message }));
      await flow.run(checkStyles(manifest.items(), styles), manifest.count);
    } catch (error) {
      flow.fail(error);
    } finally {
      await closeRun(parts);
    }
    // Finish: the final reports, then the exit code (or the error that stopped the run).
    return await finish(flow, reporter, logger, options, folder.journal.stats);
  } finally {
    await folder.close();
    // A manifest read from a URL or a bucket leaves a temporary copy and a client to close.
    await manifest.close();
  }
}

/** The run's first records: `run` (fsynced), the plan file and its `plan` record; then the log says so. */
async function journalStart(run: OpenedRun, parts: RunParts): Promise<void> {
  const { options, folder, manifest } = run;
  const { shard } = options.limits;
  const baseUrl = parts.service.client.baseUrl;
  await folder.journal.append(
    {
      t: 'run',
      at: parts.reporter.startedAt,
      v: 1,
      manifest: options.manifest,
      manifest_path: run.manifestFile,
      out_dir: await folderPath(options.outDir),
      base_url: baseUrl,
      pid: process.pid,
      ...(shard ? { shard: shardText(shard) } : {}),
    },
    { sync: true },
  );
  await writePlanFile(run.folder.output, run.planned);
  run.planned.clear();
  await folder.journal.append(parts.plan);
  parts.logger.info(
    {
      event: 'run_start',
      manifest: options.manifest,
      base_url: baseUrl,
      items: manifest.count,
      resumed: folder.resumed,
    },
    'run started',
  );
}

/** Writes the final reports and turns how the run ended into its result or its error. */
async function finish(
  flow: Flow,
  reporter: RunReporter,
  logger: Logger,
  options: ResolvedRunOptions,
  journal: { records: number; syncs: number },
): Promise<RunResult> {
  const { outDir } = options;
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
  await rememberLearntRate(report.run, options, logger);
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

/**
 * Remembers the key's rate for `plan`'s estimate (docs/contract.md#plan) when the run learnt it from
 * 429s; a rate that never met the key's limit says nothing about it. A cache that cannot be written
 * is a warning in the log, never the run's failure.
 */
async function rememberLearntRate(run: Report['run'], options: ResolvedRunOptions, logger: Logger) {
  const stats = run.stats;
  if (!stats || stats.rate_limited === 0 || stats.rate_learnt === undefined || stats.rate_learnt <= 0) return;
  try {
    await rememberRate(options.service.baseUrl, stats.rate_learnt, options.sources.env);
  } catch (error) {
    logger.warn(
      { event: 'rate_not_remembered', err: (error as Error).message },
      'cannot remember the learnt rate',
    );
  }
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
