import { stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { StateError, UsageError } from '../errors.js';
import { buildReport } from '../report/build.js';
import { writeReports } from '../report/write.js';
import { readJournal } from '../state/journal.js';
import { acquireLock } from '../state/lock.js';
import type { JournalRecord } from '../state/records.js';
import { foldJournal, type ItemState } from '../state/state.js';
import { isoWithOffset } from '../util/time.js';
import type { CommandDeps } from './common.js';

/** Flags of `report`. */
export const REPORT_FLAGS = {
  json: { type: 'boolean' },
  'no-html': { type: 'boolean' },
} as const;

/**
 * `kitchen-batch report <out-dir>`: rebuilds report.json, report.csv and report.html from the
 * journal alone, without the network. Exit 0 when every item succeeded, else 1.
 */
export async function reportCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: REPORT_FLAGS,
    allowPositionals: true,
    strict: true,
  });
  const dir = positionals[0];
  if (!dir || positionals.length > 1) throw new UsageError('usage: kitchen-batch report <out-dir>');
  const outDir = path.resolve(deps.cwd, dir);
  const journalFile = path.join(outDir, 'journal.jsonl');
  if (!(await stat(journalFile).catch(() => null))) {
    throw new StateError('no_journal', `${outDir} has no journal.jsonl: is it the --out folder of a run?`);
  }
  const lock = await acquireLock(outDir);
  try {
    const { records, tornLine } = await readJournal(journalFile);
    if (tornLine !== null)
      deps.stderr.write(`warning: journal.jsonl line ${tornLine} was torn by a crash and is ignored\n`);
    const { run, plan } = lastRun(records);
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
    await writeReports(outDir, report, {
      html: !values['no-html'],
      ...(plan ? { manifestDir: plan.manifest_dir } : {}),
    });
    const t = report.run.totals;
    deps.stdout.write(
      values.json
        ? `${JSON.stringify({ out_dir: outDir, totals: t })}\n`
        : `${t.items} items: ${t.succeeded} succeeded, ${t.failed} failed, ${t.rejected} rejected, ${t.incomplete} incomplete\n` +
            `report: ${path.join(outDir, 'report.html')}\n`,
    );
    return t.succeeded === t.items ? 0 : 1;
  } finally {
    await lock.release();
  }
}

function lastRun(records: readonly JournalRecord[]) {
  let run: Extract<JournalRecord, { t: 'run' }> | undefined;
  let plan: Extract<JournalRecord, { t: 'plan' }> | undefined;
  for (const record of records) {
    if (record.t === 'run') run = record;
    else if (record.t === 'plan') plan = record;
  }
  return { run, plan };
}
