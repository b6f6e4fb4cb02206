import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { StateError, UsageError } from '../errors.js';
import { buildReport, totals } from '../report/build.js';
import { writeReports } from '../report/write.js';
import { lastRunRecords } from '../state/compact.js';
import { readJournal } from '../state/journal.js';
import { acquireLock } from '../state/lock.js';
import { foldJournal, type ItemState } from '../state/state.js';
import type { Report, ReportItem } from '../types.js';
import { isoWithOffset } from '../util/time.js';
import type { CommandDeps } from './common.js';

/** Flags of `report`. */
export const REPORT_FLAGS = {
  json: { type: 'boolean' },
  'no-html': { type: 'boolean' },
  merge: { type: 'boolean' },
  out: { type: 'string' },
} as const;

/**
 * `kitchen-batch report <out-dir>`: rebuilds report.json, report.csv and report.html from the
 * journal alone, without the network. `report --merge <dir>... --out <dir>` combines the runs of
 * several shards into one report. Exit 0 when every item succeeded, else 1.
 */
export async function reportCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: REPORT_FLAGS,
    allowPositionals: true,
    strict: true,
  });
  if (values.merge) return mergeCommand(positionals, values, deps);
  const dir = positionals[0];
  if (!dir || positionals.length > 1) throw new UsageError('usage: kitchen-batch report <out-dir>');
  const outDir = path.resolve(deps.cwd, dir);
  const lock = await acquireLock(await runFolder(outDir));
  try {
    const { report, manifestDir } = await rebuild(outDir, deps);
    await writeReports(outDir, report, { html: !values['no-html'], ...(manifestDir ? { manifestDir } : {}) });
    return finish(report, outDir, values.json ?? false, deps);
  } finally {
    await lock.release();
  }
}

async function mergeCommand(
  dirs: string[],
  values: { json?: boolean | undefined; 'no-html'?: boolean | undefined; out?: string | undefined },
  deps: CommandDeps,
): Promise<number> {
  if (dirs.length < 2 || !values.out) {
    throw new UsageError('usage: kitchen-batch report --merge <out-dir> <out-dir>... --out <merged-dir>');
  }
  const outDir = path.resolve(deps.cwd, values.out);
  const parts: Array<{ dir: string; report: Report; manifestDir: string | null }> = [];
  for (const dir of dirs) {
    const abs = path.resolve(deps.cwd, dir);
    await runFolder(abs);
    parts.push({ dir: abs, ...(await rebuild(abs, deps)) });
  }
  const seen = new Map<string, string>();
  const items: ReportItem[] = [];
  for (const part of parts) {
    for (const item of part.report.items) {
      const other = seen.get(item.id);
      if (other)
        throw new StateError(
          'merge_overlap',
          `item ${item.id} is in both ${other} and ${part.dir}: not disjoint shards`,
        );
      seen.set(item.id, part.dir);
      // Paths stay valid from the merged folder: results are not copied.
      const output = item.output
        ? path.relative(outDir, path.join(part.dir, item.output)).split(path.sep).join('/')
        : null;
      const image =
        part.manifestDir && !path.isAbsolute(item.image)
          ? path.resolve(part.manifestDir, item.image)
          : item.image;
      items.push({ ...item, output, image });
    }
  }
  const report = buildMerged(
    parts.map((p) => p.report),
    items,
  );
  await mkdir(outDir, { recursive: true });
  await writeReports(outDir, report, { html: !values['no-html'] });
  return finish(report, outDir, values.json ?? false, deps);
}

/** One report over several runs' rows; totals follow the same rules as a single run. */
function buildMerged(reports: Report[], items: ReportItem[]): Report {
  const starts = reports
    .map((r) => r.run.started_at)
    .filter(Boolean)
    .sort();
  const ends = reports
    .map((r) => r.run.finished_at)
    .filter(Boolean)
    .sort();
  return {
    run: {
      manifest: [...new Set(reports.map((r) => r.run.manifest))].join(', '),
      base_url: [...new Set(reports.map((r) => r.run.base_url))].join(', '),
      started_at: starts[0] ?? '',
      finished_at: ends[ends.length - 1] ?? '',
      totals: totals(items),
    },
    items,
  };
}

/** Checks `dir` holds a run's journal; returns it. */
async function runFolder(dir: string): Promise<string> {
  if (!(await stat(path.join(dir, 'journal.jsonl')).catch(() => null))) {
    throw new StateError('no_journal', `${dir} has no journal.jsonl: is it the --out folder of a run?`);
  }
  return dir;
}

/** The report of one run folder, from its journal alone. */
async function rebuild(
  outDir: string,
  deps: CommandDeps,
): Promise<{ report: Report; manifestDir: string | null }> {
  const { records, tornLine } = await readJournal(path.join(outDir, 'journal.jsonl'), { repair: false });
  if (tornLine !== null)
    deps.stderr.write(
      `warning: ${outDir}/journal.jsonl line ${tornLine} was torn by a crash and is ignored\n`,
    );
  const { run, plan } = lastRunRecords(records);
  const states = foldJournal(records);
  const ordered: ItemState[] = plan
    ? plan.ids.map((id) => states.get(id)).filter((s): s is ItemState => !!s)
    : [...states.values()];
  const report = buildReport(
    {
      manifest: run?.manifest ?? '',
      base_url: run?.base_url ?? '',
      started_at: run?.at ?? '',
      finished_at: isoWithOffset(),
    },
    ordered,
  );
  return { report, manifestDir: plan?.manifest_dir ?? null };
}

function finish(report: Report, outDir: string, json: boolean, deps: CommandDeps): number {
  const t = report.run.totals;
  deps.stdout.write(
    json
      ? `${JSON.stringify({ out_dir: outDir, totals: t })}\n`
      : `${t.items} items: ${t.succeeded} succeeded, ${t.failed} failed, ${t.rejected} rejected, ${t.incomplete} incomplete\n` +
          `report: ${path.join(outDir, 'report.html')}\n`,
  );
  return t.succeeded === t.items ? 0 : 1;
}
