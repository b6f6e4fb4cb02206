import path from 'node:path';
import { flagLabel } from '../config.js';
import { ServiceRefusedError } from '../errors.js';
import { checkStyle, readManifest } from '../manifest/index.js';
import { resolvePlanOptions } from '../pipeline/options.js';
import { type Decision, decide } from '../pipeline/plan.js';
import { createPreflighter, describePreflight } from '../pipeline/preflight/index.js';
import { inShard } from '../pipeline/shard.js';
import { readJournal } from '../state/journal.js';
import { foldJournal } from '../state/state.js';
import type { Item } from '../types.js';
import { type CommandDeps, fetchStyles, serviceTarget } from './common.js';
import { parseRunArgs } from './run.js';

/** One row of the plan. */
export interface PlanRow {
  id: string;
  image: string;
  module: string;
  style: string | null;
  /** What a run would do: submit, skip (done or failed earlier), poll, download, reject. */
  action: 'submit' | 'resubmit' | 'skip' | 'poll' | 'download' | 'reject' | 'over_limit';
  preflight: string | null;
  error: { code: string; message: string } | null;
  line: number;
}

/**
 * `kitchen-batch plan <manifest>`: everything up to submission, nothing submitted. Exit 0 when every
 * item can go (or is done), 1 when some are rejected, 2 when the manifest is unreadable.
 */
export async function planCommand(args: string[], deps: CommandDeps): Promise<number> {
  // The same flags as `run`, checked the same way: `plan` is the run stopped before submitting.
  const { input, values } = parseRunArgs(args, 'plan', deps);
  const options = resolvePlanOptions(input, flagLabel);
  const { outDir, manifest: manifestPath } = options;
  const { shard, maxSubmissions } = options.limits;
  const manifest = await readManifest(manifestPath, { cwd: deps.cwd });
  for (const warning of manifest.warnings) deps.stderr.write(`warning: ${warning}\n`);
  const styles = await fetchStyleKeys(values, deps);
  const { records } = await readJournal(path.join(outDir, 'journal.jsonl'), { repair: false });
  const states = foldJournal(records);
  const preflighter = createPreflighter(options.preflight);
  const rows: PlanRow[] = [];
  let submits = 0;
  try {
    const items = manifest.items.filter((item) => !shard || inShard(item.id, shard));
    const decisions = await mapBounded(items, 8, async (raw) => {
      const item = checkStyle(raw, styles);
      return [
        item,
        await decide(item, {
          preflighter,
          state: states.get(item.id),
          outDir,
          retryFailed: options.resume.retryFailed,
          verify: options.resume.verify,
        }),
      ] as const;
    });
    for (const [item, decision] of decisions) {
      let row = planRow(item, decision);
      if (row.action === 'submit' || row.action === 'resubmit') {
        if (maxSubmissions !== null && submits >= maxSubmissions) row = { ...row, action: 'over_limit' };
        else submits++;
      }
      rows.push(row);
    }
  } finally {
    await preflighter.close();
  }
  const summary = summarise(rows);
  if (values.json) {
    deps.stdout.write(
      `${JSON.stringify({ manifest: manifestPath, out_dir: outDir, styles_checked: styles !== null, summary, items: rows }, null, 2)}\n`,
    );
  } else {
    deps.stdout.write(renderTable(rows, summary, styles !== null));
  }
  return summary.rejected > 0 ? 1 : 0;
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
    image: item.image,
    module: item.module,
    style: item.style ?? null,
    preflight: decision.preflight ? describePreflight(decision.preflight) : null,
    line: item.source.line,
  };
  switch (decision.action) {
    case 'reject':
      return { ...base, action: 'reject', error: decision.error };
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

/** Counts of the plan. */
export function summarise(rows: readonly PlanRow[]) {
  const count = (...actions: PlanRow['action'][]) => rows.filter((r) => actions.includes(r.action)).length;
  return {
    items: rows.length,
    submit: count('submit', 'resubmit'),
    resubmit: count('resubmit'),
    skip_done: rows.filter((r) => r.action === 'skip' && !r.error).length,
    skip_failed: rows.filter((r) => r.action === 'skip' && r.error).length,
    poll: count('poll'),
    download: count('download'),
    over_limit: count('over_limit'),
    rejected: count('reject'),
  };
}

function renderTable(
  rows: readonly PlanRow[],
  summary: ReturnType<typeof summarise>,
  stylesChecked: boolean,
): string {
  const header = ['ID', 'IMAGE', 'MODULE', 'STYLE', 'ACTION', 'PREFLIGHT / PROBLEM'];
  const body = rows.map((r) => [
    r.id,
    r.image,
    r.module,
    r.style ?? '-',
    r.action,
    r.error
      ? `${r.error.code}: ${r.error.message}`
      : (r.preflight ?? (r.action === 'skip' ? 'done in an earlier run' : '')),
  ]);
  const widths = header.map((h, i) =>
    Math.min(i === 5 ? 200 : 40, Math.max(h.length, ...body.map((row) => row[i]!.length))),
  );
  const fmt = (cells: string[]) =>
    cells
      .map((c, i) =>
        i === cells.length - 1
          ? c
          : c.length > widths[i]!
            ? `${c.slice(0, widths[i]! - 1)}…`
            : c.padEnd(widths[i]!),
      )
      .join('  ');
  const lines = [fmt(header), ...body.map(fmt), ''];
  lines.push(
    `${summary.items} items: ${summary.submit} to submit (${summary.resubmit} again), ${summary.poll} to poll, ` +
      `${summary.download} to download, ${summary.skip_done} done earlier, ${summary.skip_failed} failed earlier, ` +
      `${summary.rejected} rejected${summary.over_limit ? `, ${summary.over_limit} over --max-submissions` : ''}`,
  );
  if (!stylesChecked) lines.push('styles were not checked against the service');
  return `${lines.join('\n')}\n`;
}

/** Maps with at most `limit` promises at once, keeping order. */
async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
