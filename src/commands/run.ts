import type { Logger } from 'pino';
import { exitCodeFor } from '../errors.js';
import { checkManifestFile } from '../manifest/index.js';
import type { RunMetrics } from '../metrics/registry.js';
import { resolvePlanOptions, withService } from '../pipeline/options.js';
import { type RunResult, runBatch } from '../pipeline/run.js';
import { humanLogger } from '../util/logger.js';
import { redactUrlsInText } from '../util/redact-url.js';
import { flagLabel } from './command-table.js';
import { type CommandDeps, serviceTarget } from './common.js';
import { endpointAddress, livezLimits, serveMetrics } from './metrics-endpoint.js';
import { parseRunArgs } from './parse.js';
import { ProgressPrinter } from './progress.js';
import { createRunMetrics, exportTargets, readsMetrics, runExporter } from './run-metrics.js';

/** `kitchen-batch run <manifest>`: the whole pipeline. Returns the exit code (0 or 1); throws for 2, 3, 130. */
export async function runCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { input, values } = parseRunArgs(args, 'run', deps);
  // Metrics, pushgateway and pings end with the exit code the CLI returns (cli.ts's exitCodeFor).
  const targets = exportTargets(values, deps.env);
  const limits = livezLimits(deps.env);
  const address = endpointAddress(values, deps.env);
  // The metrics only when something reads them: a run that exports none never loads prom-client.
  const metrics = readsMetrics(targets) || address ? await createRunMetrics() : null;
  const { exporter, attachLog } = runExporter(metrics, targets, deps.stderr);
  const endpoint =
    address && metrics
      ? await serveMetrics(address, deps, {
          registry: metrics.registry,
          ready: () => !deps.signal?.aborted,
          ...limits,
        })
      : null;
  await exporter.start();
  let code: number = 1;
  try {
    code = await runPipeline(input, values, deps, metrics, attachLog);
    return code;
  } catch (error) {
    code = exitCodeFor(error);
    throw error;
  } finally {
    await exporter.end(code);
    await endpoint?.close();
  }
}

/** The run itself, with its progress display; the metrics (when made) get every event and store operation. */
async function runPipeline(
  input: ReturnType<typeof parseRunArgs<'run'>>['input'],
  values: ReturnType<typeof parseRunArgs<'run'>>['values'],
  deps: CommandDeps,
  metrics: Pick<RunMetrics, 'handle' | 'finished' | 'store'> | null,
  attachLog: (logger: Logger) => void,
): Promise<number> {
  // A live line needs a terminal that understands `\r` and erase-line (not TERM=dumb), and one that
  // --verbose's log lines would not tear: else plain lines.
  const progress = new ProgressPrinter({
    stream: deps.stderr,
    mode: values['no-progress']
      ? 'off'
      : deps.stderr.isTTY && deps.env.TERM !== 'dumb' && !values.verbose
        ? 'tty'
        : 'plain',
  });
  const options = resolvePlanOptions(
    {
      ...input,
      sources: { ...input.sources, ...(metrics ? { onStoreOp: metrics.store } : {}) },
      onLogger: attachLog,
      signals: {
        ...(deps.signal ? { stop: deps.signal } : {}),
        ...(deps.hardSignal ? { abort: deps.hardSignal } : {}),
      },
      onEvent: (event) => {
        progress.handle(event);
        metrics?.handle(event);
      },
      ...(values.verbose ? { logger: humanLogger(deps.stderr, values['log-level'] ?? 'info') } : {}),
    },
    flagLabel,
  );
  // A manifest that is not there is the cause to name, not the service that is not set up yet.
  await checkManifestFile(options.manifest, options.cwd, options.sources);
  const service = (await serviceTarget(values, deps, true))!;
  try {
    const target = { baseUrl: service.baseUrl, apiKey: service.apiKey };
    const result = await runBatch(withService(options, target, flagLabel));
    progress.finish();
    deps.stdout.write(summary(result, values.json ?? false, service.sandbox));
    metrics?.finished(result.run.totals);
    return result.exitCode;
  } finally {
    progress.finish();
    await service.close();
  }
}
/** The end-of-run summary on stdout: human lines, or one JSON object with --json. */
export function summary(result: RunResult, json: boolean, sandbox: boolean): string {
  const { run, outDir, exitCode } = result;
  const t = run.totals;
  if (json) {
    return `${JSON.stringify({
      exit_code: exitCode,
      out_dir: outDir,
      report: `${outDir}/report.json`,
      totals: t,
      stats: run.stats ?? null,
      started_at: run.started_at,
      finished_at: run.finished_at,
      done_earlier: result.resumed.doneEarlier,
      submitted_now: result.resumed.submittedNow,
    })}\n`;
  }
  const seconds = ((run.stats?.duration_ms ?? 0) / 1000).toFixed(1);
  const { doneEarlier, submittedNow } = result.resumed;
  const lines = [
    `${t.items} items: ${t.succeeded} succeeded, ${t.failed} failed, ${t.rejected} rejected, ${t.incomplete} incomplete` +
      `${t.possible_duplicates ? `, ${t.possible_duplicates} possible duplicate charge${t.possible_duplicates === 1 ? '' : 's'}` : ''} (${seconds} s${sandbox ? ', sandbox' : ''})`,
  ];
  if (t.needs_review > 0) {
    lines.push(
      `  ${t.needs_review} result${t.needs_review === 1 ? '' : 's'} worth a look (report.html: Needs review)`,
    );
  }
  // A resumed run says what it did now, so "9 succeeded in 0.0 s" is not read as 9 jobs run now.
  if (doneEarlier > 0) {
    lines.push(
      `  ${doneEarlier} ${doneEarlier === 1 ? 'was' : 'were'} done by an earlier run; ${submittedNow === 0 ? 'nothing' : submittedNow} submitted now`,
    );
  }
  const shown = result.problems.slice(0, 10);
  for (const item of shown) {
    // The report's problems come redacted (report/write.ts); this line is redacted again all the same.
    lines.push(
      redactUrlsInText(
        `  ${item.status.padEnd(10)} ${item.id}: ${item.error?.code ?? ''} ${item.error?.message ?? ''}`,
      ),
    );
  }
  const more = t.items - t.succeeded - shown.length;
  if (more > 0) lines.push(`  … and ${more} more (see report.csv)`);
  lines.push(`results: ${outDir}/results/`, `report:  ${outDir}/report.html`);
  return `${lines.join('\n')}\n`;
}
