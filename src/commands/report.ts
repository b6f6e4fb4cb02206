import { stat } from 'node:fs/promises';
import path from 'node:path';
import { StateError, UsageError } from '../errors.js';
import { outLocation } from '../pipeline/options.js';
import { type RunInfo, reportRows } from '../report/build.js';
import { WORKER_HINTS } from '../report/html/hints.js';
import { sourceRef, writeReports } from '../report/write.js';
import { JournalFold } from '../state/fold.js';
import { scanJournal } from '../state/journal.js';
import { acquireLock } from '../state/lock.js';
import { planEntries } from '../state/plan-file.js';
import type { JournalRecord } from '../state/records.js';
import { openOutFolder } from '../state/remote-folder.js';
import { journalFile } from '../state/run-files.js';
import { LocalOutputStore } from '../storage/local-output.js';
import { openOutputStore } from '../storage/outputs.js';
import { isS3Ref } from '../storage/s3/ref.js';
import type { OutputStore } from '../storage/types.js';
import type { Report, ReportItem } from '../types.js';
import { IdIndex } from '../util/id-index.js';
import { isoWithOffset } from '../util/time.js';
import type { CommandDeps } from './common.js';
import { parseFlags } from './parse.js';

/**
 * `kitchen-batch report <out-dir>`: rebuilds report.json, report.csv and report.html from the
 * journal alone, without the network. `report --merge <dir>... --out <dir>` combines the runs of
 * several shards into one report. Exit 0 when every item succeeded, else 1.
 */
export async function reportCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('report', args);
  if (values.merge) return mergeCommand(positionals, values, deps);
  if (values.queue !== undefined && values.redis === undefined)
    throw new UsageError('--queue: names a worker run in Redis, so it goes with --redis URL');
  if (values.redis !== undefined) {
    if (positionals.length > 0)
      throw new UsageError('usage: kitchen-batch report --redis URL [--queue NAME] [--out DIR]');
    return redisReport(values.redis, values, deps);
  }
  const dir = positionals[0];
  if (!dir || positionals.length > 1) throw new UsageError('usage: kitchen-batch report <out-dir>');
  if (isS3Ref(dir)) {
    // A bucket run: its lease taken (as the lock), its journal read into the cache.
    const folder = await openOutFolder(outLocation(deps.cwd, dir), {
      logLevel: 'warn',
      secrets: [],
      onWarning: (message) => deps.stderr.write(`warning: ${message}\n`),
      cacheDir: values.cache === undefined ? null : path.resolve(deps.cwd, values.cache),
      env: deps.env,
    });
    try {
      return await rebuildReports(
        folder.dir,
        deps,
        { json: values.json ?? false, html: !values['no-html'] },
        folder,
      );
    } finally {
      await folder.close();
    }
  }
  const outDir = path.resolve(deps.cwd, dir);
  const lock = await acquireLock(await runFolder(outDir));
  try {
    return await rebuildReports(outDir, deps, { json: values.json ?? false, html: !values['no-html'] });
  } finally {
    await lock.release();
  }
}

/**
 * Rebuilds a run folder's reports from its journal (the caller holds the folder's lock) and prints
 * the summary; returns the exit code (0 when every item succeeded, else 1).
 */
export async function rebuildReports(
  outDir: string,
  deps: CommandDeps,
  options: { json: boolean; html: boolean },
  where: { journalFile: string; output: OutputStore } = {
    journalFile: journalFile(outDir),
    output: new LocalOutputStore(outDir),
  },
): Promise<number> {
  const run = await readRun(outDir, deps, true, where.journalFile);
  const { output } = where;
  const written = await writeReports(
    output,
    { info: run.info, rows: () => reportRows(output, run.plan, run.fold) },
    { html: options.html, ...(run.plan?.manifest_dir ? { manifestDir: run.plan.manifest_dir } : {}) },
  );
  return finish(written.run, output, options.json, deps);
}

/**
 * `report --merge`: one report over the folders of several shards. Each part is folded while its
 * rows are written and dropped after, so memory holds one shard's state at a time; results are not
 * copied (paths point into the shard folders), and an item in two parts is refused.
 */
async function mergeCommand(
  dirs: string[],
  values: { json?: boolean | undefined; 'no-html'?: boolean | undefined; out?: string | undefined },
  deps: CommandDeps,
): Promise<number> {
  if (dirs.length < 2 || !values.out) {
    throw new UsageError('usage: kitchen-batch report --merge <out-dir> <out-dir>... --out <merged-dir>');
  }
  const outDir = path.resolve(deps.cwd, values.out);
  const output = new LocalOutputStore(outDir);
  const parts = dirs.map((dir) => path.resolve(deps.cwd, dir));
  const infos: RunInfo[] = [];
  for (const part of parts) infos.push(await readRunInfo(await runFolder(part)));
  const owners = new IdIndex();
  let checked = false;
  const rows = async function* (): AsyncGenerator<ReportItem> {
    for (const [index, dir] of parts.entries()) {
      const { plan, fold } = await readRun(dir, deps, false);
      const manifestDir = plan?.manifest_dir ?? null;
      const part = new LocalOutputStore(dir);
      for await (const item of reportRows(part, plan, fold)) {
        if (!checked) await checkDisjoint(owners, item.id, index, parts);
        // Links stay valid from the merged folder: results are not copied. Both are local folders
        // named on the command line, so the link is a relative path from one to the other.
        const link = item.output
          ? path.relative(outDir, part.refOf(item.output)).split(path.sep).join('/')
          : null;
        // A relative local path (sourceRef can't place it without the folder) is made absolute.
        const image =
          manifestDir && sourceRef(item.image, undefined, true) === null
            ? path.resolve(manifestDir, item.image)
            : item.image;
        yield { ...item, output: link, image };
      }
    }
    checked = true;
  };
  const written = await writeReports(output, { info: mergedInfo(infos), rows }, { html: !values['no-html'] });
  return finish(written.run, output, values.json ?? false, deps);
}

/**
 * `report --redis URL [--out DIR]`: a worker run's reports, rebuilt from Redis into its output folder
 * (or `--out`: the same volume mounted elsewhere). BullMQ and ioredis are loaded only here.
 */
async function redisReport(
  url: string,
  values: {
    json?: boolean | undefined;
    'no-html'?: boolean | undefined;
    out?: string | undefined;
    cache?: string | undefined;
    queue?: string | undefined;
  },
  deps: CommandDeps,
): Promise<number> {
  const { redactUrl, redisUrl, withRedis } = await import('../worker/redis.js');
  const { legacyRunNote, queueKeys, queueName, readRunMeta } = await import('../worker/queue.js');
  const { redisReportSource } = await import('../worker/report.js');
  const checked = redisUrl(url, deps.env);
  const keys = queueKeys(queueName(values.queue, deps.env));
  return withRedis(checked, async (redis) => {
    const meta = await readRunMeta(redis, keys);
    if (!meta) {
      const legacy = await legacyRunNote(redis, checked);
      throw new UsageError(
        `queue ${keys.name} at ${redactUrl(checked)} holds no worker run: ` +
          `kitchen-batch enqueue <manifest> --redis URL${keys.name === 'kitchen-batch' ? '' : ` --queue ${keys.name}`} first` +
          (legacy ? `; ${legacy}` : ''),
      );
    }
    const target = await openOutputStore(values.out ? outLocation(deps.cwd, values.out) : meta.out, {
      cacheDir: values.cache === undefined ? null : path.resolve(deps.cwd, values.cache),
      env: deps.env,
    });
    try {
      const { output } = target;
      const written = await writeReports(output, await redisReportSource(redis, meta, keys), {
        html: !values['no-html'],
        manifestDir: path.dirname(meta.manifest),
        hints: WORKER_HINTS,
      });
      return finish(written.run, output, values.json ?? false, deps);
    } finally {
      target.close();
    }
  });
}

/** An item in two parts means they are not disjoint shards: refused, naming both folders. */
async function checkDisjoint(owners: IdIndex, id: string, part: number, parts: string[]): Promise<void> {
  const earlier = owners.get(id);
  if (earlier !== undefined) {
    // The index keys ids by a 48-bit hash: a match is confirmed against the earlier part's plan.
    const { plan, fold } = await readRun(parts[earlier]!, undefined, false);
    for await (const entry of planEntries(new LocalOutputStore(parts[earlier]!), plan, fold)) {
      if (entry.id === id) {
        throw new StateError(
          'merge_overlap',
          `item ${id} is in both ${parts[earlier]} and ${parts[part]}: not disjoint shards`,
        );
      }
    }
  }
  owners.set(id, part);
}

/** The merged run's facts: every part's manifest and service, the earliest start, the latest end. */
function mergedInfo(infos: RunInfo[]): RunInfo {
  const starts = infos
    .map((r) => r.started_at)
    .filter(Boolean)
    .sort();
  const ends = infos
    .map((r) => r.finished_at)
    .filter(Boolean)
    .sort();
  return {
    manifest: [...new Set(infos.map((r) => r.manifest))].join(', '),
    base_url: [...new Set(infos.map((r) => r.base_url))].join(', '),
    started_at: starts[0] ?? '',
    finished_at: ends[ends.length - 1] ?? '',
  };
}

/** Checks `dir` holds a run's journal; returns it. */
export async function runFolder(dir: string): Promise<string> {
  if (!(await stat(journalFile(dir)).catch(() => null))) {
    throw new StateError('no_journal', `${dir} has no journal.jsonl: is it the --out folder of a run?`);
  }
  return dir;
}

/** A run folder's facts for a report header, from its last `run` record (nothing else is kept). */
async function readRunInfo(dir: string): Promise<RunInfo> {
  let run: Extract<JournalRecord, { t: 'run' }> | undefined;
  const lastRun = (record: JournalRecord) => {
    if (record.t === 'run') run = record;
  };
  await scanJournal(journalFile(dir), lastRun, { repair: false });
  return {
    manifest: run?.manifest ?? '',
    base_url: run?.base_url ?? '',
    started_at: run?.at ?? '',
    finished_at: isoWithOffset(),
  };
}

/** A run folder read for its report: its journal folded compactly (what reports show) and its last run and plan. */
async function readRun(dir: string, deps?: CommandDeps, warn = true, file = journalFile(dir)) {
  const fold = new JournalFold({ lean: true });
  const { tornLine } = await scanJournal(file, (record) => fold.add(record), {
    repair: false,
  });
  if (tornLine !== null && warn) {
    deps?.stderr.write(`warning: ${dir}/journal.jsonl line ${tornLine} was torn by a crash and is ignored\n`);
  }
  const { run, plan } = fold.last;
  const info: RunInfo = {
    manifest: run?.manifest ?? '',
    base_url: run?.base_url ?? '',
    started_at: run?.at ?? '',
    finished_at: isoWithOffset(),
  };
  return { fold: fold.states, plan, info };
}

function finish(run: Report['run'], output: OutputStore, json: boolean, deps: CommandDeps): number {
  const t = run.totals;
  deps.stdout.write(
    json
      ? `${JSON.stringify({ out_dir: output.location, totals: t })}\n`
      : `${t.items} items: ${t.succeeded} succeeded, ${t.failed} failed, ${t.rejected} rejected, ${t.incomplete} incomplete\n` +
          `report: ${output.describe('report.html')}\n`,
  );
  return t.succeeded === t.items ? 0 : 1;
}
