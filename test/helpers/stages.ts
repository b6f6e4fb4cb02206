/**
 * One stage at a time: a real {@link StageContext} (client, gate, item store over a real journal,
 * poll scheduler, recording logger, stop signals) against a sandbox, in a temp folder, for tests
 * that run `submitItem`, `pollJob` or `downloadItem` alone.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { onTestFinished } from 'vitest';
import { KitchenClient } from '../../src/api/client.js';
import { ServiceGate } from '../../src/api/gate.js';
import { RateGovernor } from '../../src/api/governor.js';
import type { RetryOptions } from '../../src/api/policy.js';
import { createPreflighter } from '../../src/preflight/index.js';
import type { Sandbox, SandboxOptions } from '../../src/sandbox/index.js';
import type { StageContext } from '../../src/stages/context.js';
import { decide, type PreparedUpload } from '../../src/stages/decide.js';
import { PollScheduler } from '../../src/stages/poll-schedule.js';
import { UploadReader } from '../../src/stages/submit.js';
import { ItemStore } from '../../src/state/items.js';
import { JournalWriter, readJournal } from '../../src/state/journal.js';
import type { JournalRecord } from '../../src/state/records.js';
import type { ItemState } from '../../src/state/state.js';
import { ItemTable } from '../../src/state/table.js';
import { LocalOutputStore } from '../../src/storage/local-output.js';
import type { Item } from '../../src/types.js';
import { createRunLogger } from '../../src/util/logger.js';
import { kitchenJpeg } from '../support/images.js';
import { canaryKey, QUICK_JOBS, sandboxForTest } from './sandbox.js';
import { type TempDir, tempDirForTest } from './tmp.js';

/** Options of {@link stageWorld}. */
export interface StageWorldOptions {
  sandbox?: SandboxOptions;
  /** The key the client sends. @default the sandbox's key */
  clientKey?: string;
  retry?: RetryOptions;
  /** The poll floor (the contract's 2 s makes tests slow; the stages take whatever the scheduler says). @default 200 */
  pollFloorMs?: number;
}

/** A stage context over a sandbox, plus what tests look at. */
export interface StageWorld {
  ctx: StageContext;
  sandbox: Sandbox;
  tmp: TempDir;
  /** Aborts `ctx.stop` (the soft stop). */
  stop(): void;
  /** Errors the item store reported as journal failures. */
  failures: unknown[];
  /** Parsed run.log lines. */
  log(): Array<Record<string, unknown>>;
  /** Every record of the journal, read back from disk. */
  records(): Promise<JournalRecord[]>;
  /** A change-style item over a fresh kitchen JPEG, planned in the store, and its prepared upload. */
  item(n: number, style?: string): Promise<{ item: Item; state: ItemState; upload: PreparedUpload }>;
}

/** Builds a {@link StageWorld}; everything it starts is closed when the test finishes. */
export async function stageWorld(options: StageWorldOptions = {}): Promise<StageWorld> {
  const apiKey = canaryKey();
  const sandbox = await sandboxForTest({ apiKey, ...QUICK_JOBS, ...options.sandbox });
  const tmp = await tempDirForTest('kb-stage-');
  const resultsDir = tmp.file('results');
  await mkdir(resultsDir, { recursive: true });
  const journalFile = tmp.file('journal.jsonl');
  const journal = await JournalWriter.open(journalFile);
  const failures: unknown[] = [];
  const store = new ItemStore(journal, new ItemTable(), { onFailure: (error) => failures.push(error) });
  const lines: string[] = [];
  const logger = createRunLogger({
    stream: { write: (line) => lines.push(line) },
    level: 'trace',
    secrets: [apiKey],
  });
  const client = new KitchenClient({ baseUrl: sandbox.url, apiKey: options.clientKey ?? apiKey });
  const governor = new RateGovernor();
  const gate = new ServiceGate(governor, logger, {
    retry: options.retry ?? { retries: 3, baseMs: 20, capMs: 100 },
  });
  const stop = new AbortController();
  const abort = new AbortController();
  const preflighter = createPreflighter({ cacheDir: tmp.file('.prepared') });
  onTestFinished(async () => {
    stop.abort();
    abort.abort();
    governor.close(new Error('test over'));
    client.close();
    await journal.close();
    await preflighter.close();
  });
  const ctx: StageContext = {
    client,
    gate,
    store,
    polls: new PollScheduler(options.pollFloorMs ?? 200),
    logger,
    stop: stop.signal,
    abort: abort.signal,
    resultsDir,
    output: new LocalOutputStore(tmp.dir),
    uploads: new UploadReader(),
  };
  return {
    ctx,
    sandbox,
    tmp,
    stop: () => stop.abort(new Error('stop')),
    failures,
    log: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
    records: async () => (await readJournal(journalFile, { repair: false })).records,
    async item(n, style = 'scandinavian') {
      const file = await tmp.write(`images/k${n}.jpg`, await kitchenJpeg(n));
      const item: Item = {
        id: `k${n}__${style}`,
        image: path.relative(tmp.dir, file),
        imagePath: file,
        module: 'change-style',
        style,
        source: { file: 'manifest.csv', line: n + 1 },
      };
      const decision = await decide(item, {
        preflighter,
        state: store.get(item.id),
        outDir: tmp.dir,
        retryFailed: false,
        verify: false,
      });
      if (decision.action !== 'submit') throw new Error(`expected a submit decision, got ${decision.action}`);
      const state = await store.plan({
        id: item.id,
        fp: decision.fp,
        image: item.image,
        module: item.module,
        style,
        src: decision.src,
      });
      return { item, state, upload: decision.upload };
    },
  };
}

/** Records of one kind, in journal order. */
export function ofKind<T extends JournalRecord['t']>(
  records: JournalRecord[],
  t: T,
): Array<Extract<JournalRecord, { t: T }>> {
  return records.filter((r): r is Extract<JournalRecord, { t: T }> => r.t === t);
}
