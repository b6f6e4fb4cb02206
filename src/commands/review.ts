import path from 'node:path';
import { UsageError } from '../errors.js';
import { LOG_LEVELS, outLocation } from '../pipeline/options.js';
import { DEFAULT_THRESHOLD, Reviewer } from '../review/index.js';
import { ItemStore } from '../state/items.js';
import { openOutFolder } from '../state/remote-folder.js';
import { isS3Ref } from '../storage/s3/ref.js';
import { fractionFlag, OptionError, oneOf } from '../util/validate.js';
import type { CommandDeps } from './common.js';
import { parseFlags } from './parse.js';
import { rebuildReports, runFolder } from './report.js';

/**
 * `kitchen-batch review <out-dir>` (docs/contract.md#review): reviews every downloaded result of a
 * run folder again (another threshold, or a run made before the review existed), journals the new
 * verdicts and rebuilds the reports. It holds the folder's lock, so it waits for no run and no run
 * can start beside it. A first Ctrl-C stops after the reviews in flight: the verdicts journaled so
 * far stay, and the reports are rebuilt from them.
 */
export async function reviewCommand(args: string[], deps: CommandDeps): Promise<number> {
  const { values, positionals } = parseFlags('review', args);
  const dir = positionals[0];
  if (!dir || positionals.length > 1) {
    throw new UsageError('usage: kitchen-batch review <out-dir> [--review-threshold X] [--json]');
  }
  const threshold = reviewThreshold(values['review-threshold']) ?? DEFAULT_THRESHOLD;
  const logLevel = oneOf('--log-level', values['log-level'], LOG_LEVELS, 'info');
  const bucket = isS3Ref(dir);
  const outDir = bucket ? outLocation(deps.cwd, dir) : await runFolder(path.resolve(deps.cwd, dir));
  const folder = await openOutFolder(outDir, {
    logLevel,
    secrets: [],
    onWarning: (message) => deps.stderr.write(`warning: ${message}\n`),
    cacheDir: values.cache === undefined ? null : path.resolve(deps.cwd, values.cache),
    env: deps.env,
  });
  try {
    const store = new ItemStore(folder.journal, folder.states, { interner: folder.interner });
    const reviewer = new Reviewer({
      outDir: folder.output,
      states: store,
      record: (record) => store.record(record),
      logger: folder.logger,
      threshold,
      again: true,
    });
    const stop = () => reviewer.stop();
    deps.signal?.addEventListener('abort', stop, { once: true });
    folder.logger.info({ event: 'review_start', threshold }, 'reviewing the results again');
    try {
      for (const id of store.keys()) {
        if (deps.signal?.aborted) break;
        reviewer.add(id);
      }
      await reviewer.drain();
    } finally {
      deps.signal?.removeEventListener('abort', stop);
      await reviewer.close();
    }
    const { stats } = reviewer;
    reviewer.logEnd();
    await folder.journal.close();
    if (!values.json) {
      deps.stderr.write(
        `reviewed ${stats.reviewed} result${stats.reviewed === 1 ? '' : 's'}: ${stats.flagged} worth a look` +
          (stats.skipped > 0 ? `, ${stats.skipped} could not be reviewed (see run.log)` : '') +
          (deps.signal?.aborted ? ' (interrupted: the rest keep their earlier review)' : '') +
          '\n',
      );
    }
    return await rebuildReports(
      outDir,
      deps,
      { json: values.json ?? false, html: !values['no-html'] },
      folder,
    );
  } finally {
    await folder.close();
  }
}

/**
 * `review`'s `--review-threshold X`, checked as `run` checks it (a number from 0 to 1), or undefined
 * when not given. Its refusal keeps the words `review` has always used (`--review-threshold must be
 * a number from 0 to 1, got "…"`, test/review/command.test.ts), where `run` and `worker` say
 * `--review-threshold: expected a number from 0 to 1, got "…"`.
 */
function reviewThreshold(raw: string | undefined): number | undefined {
  try {
    return fractionFlag('review-threshold', raw);
  } catch (error) {
    if (!(error instanceof OptionError)) throw error;
    throw new UsageError(`${error.option} must be ${error.expected}, got ${JSON.stringify(raw)}`);
  }
}
