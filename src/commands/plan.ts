import { ServiceRefusedError } from '../errors.js';
import { checkStyle, openManifest } from '../manifest/index.js';
import { resolvePlanOptions } from '../pipeline/options.js';
import { settleOutDir } from '../pipeline/out-dir.js';
import { inShard } from '../pipeline/shard.js';
import { createPreflighter, describePreflight } from '../preflight/index.js';
import { type Decision, decide, releaseDecision } from '../stages/decide.js';
import { loadJournal } from '../state/journal.js';
import { readRemoteFold } from '../state/remote-folder.js';
import { journalFile } from '../state/run-files.js';
import { openOutputStore } from '../storage/outputs.js';
import { isS3Ref } from '../storage/s3/ref.js';
import { createSources } from '../storage/sources.js';
import type { Item } from '../types.js';
import { mapOrdered } from '../util/async.js';
import { jsonElement, jsonHead, jsonTail } from '../util/json-stream.js';
import { redactUrl, redactUrlsInText } from '../util/redact-url.js';
import { Spool } from '../util/spool.js';
import { flagLabel } from './command-table.js';
import { type CommandDeps, fetchStyles, serviceTarget } from './common.js';
import { parseRunArgs } from './parse.js';
import { describeEstimate, type PlanEstimate, planEstimate } from './plan-estimate.js';

/** One row of the plan. */
export interface PlanRow {
  id: string;
  image: string;
  module: string;
  style: string | null;
  /**
   * What a run would do: submit, skip (done or failed earlier), poll, download, reject; `unavailable`:
   * a remote source could not be read now (a run leaves the item incomplete, a rerun tries again).
   */
  action: 'submit' | 'resubmit' | 'skip' | 'poll' | 'download' | 'reject' | 'unavailable' | 'over_limit';
  preflight: string | null;
  error: { code: string; message: string } | null;
  line: number;
}

/**
 * `kitchen-batch plan <manifest>`: everything up to submission, nothing submitted. Exit 0 when every
 * item can go (or is done), 1 when some are rejected, 2 when the manifest is unreadable. The items
 * are read, decided and spooled to a temp file one at a time (the table's column widths and the
 * summary need them all), so a manifest of 10^6 rows plans in bounded memory.
 */
export async function planCommand(args: string[], deps: CommandDeps): Promise<number> {
  // The same flags as `run`, checked the same way: `plan` is the run stopped before submitting.
  const { input, values } = parseRunArgs(args, 'plan', deps);
  const options = resolvePlanOptions(input, flagLabel);
  const { manifest: manifestPath } = options;
  const { shard, maxSubmissions } = options.limits;
  const manifest = await openManifest(manifestPath, {
    cwd: deps.cwd,
    access: options.sources,
    ...(shard ? { filter: (item: Item) => inShard(item.id, shard) } : {}),
  });
  for (const warning of manifest.warnings) deps.stderr.write(`warning: ${redactUrlsInText(warning)}\n`);
  const styles = await fetchStyleKeys(values, deps);
  const bucket = isS3Ref(options.outDir);
  // The folder `run` would take (the default moves aside from another manifest's run; `--out` of one
  // is refused), read without its lock.
  const settled = await settleOutDir(
    { ...options, manifestRenamed: options.resume.manifestRenamed },
    async (dir) =>
      bucket
        ? await readRemoteFold(dir, { cacheDir: options.cacheDir, env: options.sources.env })
        : (await loadJournal(journalFile(dir), { repair: false })).fold,
    (fold) => fold.last,
  );
  const { dir: outDir, opened: fold } = settled;
  // Finished results are looked at (not changed) where the run keeps them.
  const target = await openOutputStore(outDir, { cacheDir: options.cacheDir, env: options.sources.env });
  const { output } = target;
  if (settled.note) deps.stderr.write(`warning: ${settled.note}\n`);
  const sources = createSources(options.sources);
  const preflighter = createPreflighter({ ...options.preflight, sources });
  const spool = await Spool.create('kitchen-batch-plan-');
  const summary = new PlanSummary();
  const table = new TableWidths();
  try {
    const decisions = mapOrdered(manifest.items(), 8, async (raw) => {
      const item = checkStyle(raw, styles);
      const decision = await decide(item, {
        preflighter,
        state: fold.states.get(item.id),
        outDir: output,
        retryFailed: options.resume.retryFailed,
        verify: options.resume.verify,
      });
      // The plan uploads nothing: a remote source's spooled copy goes at once, so disk stays bounded.
      await releaseDecision(preflighter, item, decision);
      return planRow(item, decision);
    });
    for await (let row of decisions) {
      if ((row.action === 'submit' || row.action === 'resubmit') && maxSubmissions !== null) {
        if (summary.counts.submit >= maxSubmissions) row = { ...row, action: 'over_limit' };
      }
      summary.add(row);
      table.add(row);
      await spool.write(JSON.stringify(row));
    }
    const estimate = await planEstimate(
      values.sandbox ? undefined : (values['base-url'] ?? deps.env.KITCHEN_API_BASE_URL),
      deps.env,
      {
        jobs: summary.counts.submit,
        concurrency: options.limits.concurrency,
        maxRate: options.limits.maxRate,
        maxDurationMs: options.limits.maxDurationMs,
      },
    );
    const header = {
      manifest: redactUrl(manifestPath),
      out_dir: outDir,
      styles_checked: styles !== null,
      summary: summary.counts,
      estimate,
    };
    const rows = async function* () {
      for await (const line of spool.lines()) yield JSON.parse(line) as PlanRow;
    };
    if (values.json) await writeJson(deps.stdout, header, rows());
    else await writeTable(deps.stdout, rows(), table, summary.counts, styles !== null, estimate);
  } finally {
    await preflighter.close();
    sources.close();
    target.close();
    await spool.remove();
    await manifest.close();
  }
  return summary.counts.rejected + summary.counts.unavailable > 0 ? 1 : 0;
}

async function fetchStyleKeys(
  values: {
    'base-url'?: string | undefined;
    'api-key-file'?: string | undefined;
    sandbox?: boolean | undefined;
  },
  deps: CommandDeps,
): Promise<ReadonlySet<string> | null> {
  const service = await serviceTarget(values, deps, false);
  if (!service) {
    deps.stderr.write(
      'note: no service configured (KITCHEN_API_BASE_URL/KITCHEN_API_KEY or --sandbox); styles are not checked\n',
    );
    return null;
  }
  try {
    const styles = await fetchStyles(service);
    if (!styles) {
      deps.stderr.write(
        'warning: GET /v1/styles answered in a shape this tool does not understand; styles are not checked\n',
      );
      return null;
    }
    return new Set(styles.map((s) => s.key));
  } catch (error) {
    if (error instanceof ServiceRefusedError) throw error;
    deps.stderr.write(`warning: cannot list styles (${(error as Error).message}); styles are not checked\n`);
    return null;
  }
}

function planRow(item: Item, decision: Decision): PlanRow {
  const base = {
    id: item.id,
    // The plan is read by people and pasted in tickets: a pre-signed URL's signature stays out.
    image: redactUrl(item.image),
    module: item.module,
    style: item.style ?? null,
    preflight: decision.preflight ? redactUrlsInText(describePreflight(decision.preflight)) : null,
    line: item.source.line,
  };
  switch (decision.action) {
    case 'reject':
      return {
        ...base,
        action: decision.error.code === 'source_unavailable' ? 'unavailable' : 'reject',
        error: shownError(decision.error),
      };
    case 'skip':
      return {
        ...base,
        action: 'skip',
        preflight: base.preflight,
        error:
          decision.reason === 'failed'
            ? { code: 'failed_earlier', message: 'failed in an earlier run; --retry-failed resubmits it' }
            : null,
      };
    case 'submit':
      return { ...base, action: decision.again ? 'resubmit' : 'submit', error: null };
    default:
      return { ...base, action: decision.action, error: null };
  }
}

/** An error as the plan shows it: any URL it quotes redacted. */
function shownError(error: { code: string; message: string }): { code: string; message: string } {
  return error.message.includes('://') ? { ...error, message: redactUrlsInText(error.message) } : error;
}

/** Counts of the plan, row by row. */
export class PlanSummary {
  readonly counts = {
    items: 0,
    submit: 0,
    resubmit: 0,
    skip_done: 0,
    skip_failed: 0,
    poll: 0,
    download: 0,
    over_limit: 0,
    rejected: 0,
    unavailable: 0,
  };

  add(row: PlanRow): void {
    const c = this.counts;
    c.items++;
    if (row.action === 'submit' || row.action === 'resubmit') c.submit++;
    if (row.action === 'resubmit') c.resubmit++;
    if (row.action === 'skip') {
      if (row.error) c.skip_failed++;
      else c.skip_done++;
    }
    if (row.action === 'poll') c.poll++;
    if (row.action === 'download') c.download++;
    if (row.action === 'over_limit') c.over_limit++;
    if (row.action === 'reject') c.rejected++;
    if (row.action === 'unavailable') c.unavailable++;
  }
}

const HEADER = ['ID', 'IMAGE', 'MODULE', 'STYLE', 'ACTION', 'PREFLIGHT / PROBLEM'];

/** A row's table cells. */
function cells(r: PlanRow): string[] {
  return [
    r.id,
    r.image,
    r.module,
    r.style ?? '-',
    r.action,
    r.error
      ? `${r.error.code}: ${r.error.message}`
      : (r.preflight ?? (r.action === 'skip' ? 'done in an earlier run' : '')),
  ];
}

/** Column widths of the table, grown row by row (40 characters at most but for the last column). */
class TableWidths {
  readonly widths = HEADER.map((h) => h.length);

  add(row: PlanRow): void {
    cells(row).forEach((cell, i) => {
      this.widths[i] = Math.min(i === HEADER.length - 1 ? 200 : 40, Math.max(this.widths[i]!, cell.length));
    });
  }

  format(values: string[]): string {
    return values
      .map((c, i) =>
        i === values.length - 1
          ? c
          : c.length > this.widths[i]!
            ? `${c.slice(0, this.widths[i]! - 1)}…`
            : c.padEnd(this.widths[i]!),
      )
      .join('  ');
  }
}

type Out = CommandDeps['stdout'];

/** Writes text, waiting when the stream asks to (a pipe into `head` or a slow terminal). */
async function put(out: Out, text: string): Promise<void> {
  const stream = out as NodeJS.WritableStream;
  if (out.write(text) === false && typeof stream.once === 'function') {
    await new Promise<void>((resolve) => stream.once('drain', () => resolve()));
  }
}

async function writeTable(
  out: Out,
  rows: AsyncIterable<PlanRow>,
  table: TableWidths,
  summary: PlanSummary['counts'],
  stylesChecked: boolean,
  estimate: PlanEstimate,
): Promise<void> {
  await put(out, `${table.format(HEADER)}\n`);
  for await (const row of rows) await put(out, `${table.format(cells(row))}\n`);
  const lines = [
    '',
    `${summary.items} items: ${summary.submit} to submit (${summary.resubmit} again), ${summary.poll} to poll, ` +
      `${summary.download} to download, ${summary.skip_done} done earlier, ${summary.skip_failed} failed earlier, ` +
      `${summary.rejected} rejected${summary.unavailable ? `, ${summary.unavailable} unavailable (a remote source could not be read; a run tries again)` : ''}` +
      `${summary.over_limit ? `, ${summary.over_limit} over --max-submissions` : ''}`,
  ];
  if (!stylesChecked) lines.push('styles were not checked against the service');
  lines.push(describeEstimate(estimate));
  await put(out, `${lines.join('\n')}\n`);
}

/** `plan --json`: the same document as `JSON.stringify(…, null, 2)` would give, written row by row. */
async function writeJson(out: Out, header: object, rows: AsyncIterable<PlanRow>): Promise<void> {
  await put(out, jsonHead({ ...header, items: [] }));
  let count = 0;
  for await (const row of rows) await put(out, jsonElement(row, count++));
  await put(out, jsonTail(count));
}
