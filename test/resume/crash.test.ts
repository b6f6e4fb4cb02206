/**
 * SQLite-style crash test (docs/faults.md A.1, issue 5 "Proof"): real CLI children against the sandbox,
 * SIGKILLed at many moments of a run, then rerun with every fault off. After every round the rerun
 * must exit 0 with every item succeeded, no item with a journaled job id submitted again, every
 * duplicate create flagged in the report, no finished result fetched again, every result whole,
 * and the API key nowhere.
 */
import { existsSync, type FSWatcher, watch } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_FAULTS, type Sandbox, type SandboxFaults } from '../../src/sandbox/index.js';
import type { Report } from '../../src/types.js';
import { type CliProcess, type CliResult, killAllClis, waitFor } from '../helpers/cli.js';
import { removeDir } from '../helpers/tmp.js';
import {
  expectRerunComplete,
  expectSecretAbsent,
  type Fixture,
  makeFixture,
  openSubmissions,
  readJournalRecords,
  run,
  type Snapshot,
  sandboxFor,
  snapshot,
  startRun,
} from './world.js';

const ITEMS = 6;

let fixture: Fixture;

beforeAll(async () => {
  fixture = await makeFixture(ITEMS, { name: 'crash' });
});

afterAll(async () => {
  await killAllClis();
  if (fixture && !process.env.KITCHEN_TEST_KEEP) await removeDir(fixture.dir);
  else if (fixture) console.info(`[crash] kept ${fixture.dir}`);
});

/** What a kill-point trigger sees. */
interface Moment {
  sandbox: Sandbox;
  out: string;
  cli: CliProcess;
}

/** Calls `kill` at the chosen moment; returns a function that stops watching. */
type Trigger = (moment: Moment, kill: () => void) => () => void;

/** Kill when `condition` holds, checked every few milliseconds. */
function when(condition: (moment: Moment) => boolean | Promise<boolean>): Trigger {
  return (moment, kill) => {
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      void Promise.resolve(condition(moment))
        .then((hit) => {
          if (hit) kill();
        })
        .catch(() => {})
        .finally(() => {
          busy = false;
        });
    }, 3);
    return () => clearInterval(timer);
  };
}

/** Kill on the first inotify event in `<out>/<sub>` for a name `match` accepts (lowest latency). */
function onFsEvent(sub: string, match: (name: string) => boolean): Trigger {
  return (moment, kill) => {
    let watcher: FSWatcher | undefined;
    const dir = path.join(moment.out, sub);
    const timer = setInterval(() => {
      if (watcher || !existsSync(dir)) return;
      watcher = watch(dir, (_event, name) => {
        if (name && match(name)) kill();
      });
      watcher.on('error', () => {});
    }, 2);
    return () => {
      clearInterval(timer);
      watcher?.close();
    };
  };
}

/** Kill `ms` after the start. */
function after(ms: number): Trigger {
  return (_moment, kill) => {
    const timer = setTimeout(kill, ms);
    return () => clearTimeout(timer);
  };
}

async function journalTypes(out: string): Promise<string[]> {
  return (await readJournalRecords(out)).map((r) => r.t);
}

/** Items with a `submitting` record but no outcome yet. */
async function inSubmitWindow(out: string): Promise<string[]> {
  return openSubmissions(await readJournalRecords(out));
}

async function partFiles(out: string): Promise<string[]> {
  return (await readdir(path.join(out, 'results')).catch(() => [])).filter((n) => n.endsWith('.part'));
}

interface RoundPlan {
  name: string;
  /** Faults of the first (killed) run; the rerun runs with every fault off. */
  faults?: Partial<SandboxFaults>;
  trigger: Trigger;
  /** Checks, at the instant of the kill, that the intended moment was hit. */
  atKill?: (moment: Moment) => Promise<void> | void;
  /** Checks of the finished rerun specific to this kill point. */
  afterRerun?: (report: Report, before: Snapshot, first: CliResult) => void;
}

interface RoundOutcome {
  killed: boolean;
  lastRecord: string | undefined;
  report: Report;
  ms: number;
}

let roundNo = 0;

async function round(plan: RoundPlan): Promise<RoundOutcome> {
  const started = Date.now();
  const out = path.join(fixture.dir, `out-${++roundNo}-${plan.name.replace(/\W+/g, '-')}`);
  const sandbox = await sandboxFor(fixture, { processingMs: 500, jitterMs: 300, faults: plan.faults ?? {} });
  try {
    const first = startRun(fixture, sandbox, out);
    const moment: Moment = { sandbox, out, cli: first };
    let killedResolve: () => void = () => {};
    const killedSignal = new Promise<void>((resolve) => {
      killedResolve = resolve;
    });
    let killed = false;
    const stop = plan.trigger(moment, () => {
      if (killed || first.exitedYet()) return;
      killed = true;
      first.kill('SIGKILL');
      killedResolve();
    });
    const deadline = setTimeout(() => killedResolve(), 30_000);
    await Promise.race([first.exited, killedSignal]);
    clearTimeout(deadline);
    stop();
    const firstResult = await first.exited;
    if (killed) {
      expect(firstResult.signal, `${plan.name}: killed by SIGKILL`).toBe('SIGKILL');
      await plan.atKill?.(moment);
    } else {
      expect(firstResult.code, `${plan.name}: first run ended by itself\n${firstResult.stderr}`).toBe(0);
    }
    const lastRecord = (await journalTypes(out)).at(-1);
    sandbox.setFaults({ ...DEFAULT_FAULTS });
    const before = await snapshot(fixture, sandbox, out);
    const rerun = await run(fixture, sandbox, out);
    const report = await expectRerunComplete(fixture, sandbox, out, before, rerun, plan.name, {
      tolerate: [first.pid],
    });
    plan.afterRerun?.(report, before, firstResult);
    await expectSecretAbsent(fixture.apiKey, out, [
      firstResult.stdout,
      firstResult.stderr,
      rerun.stdout,
      rerun.stderr,
    ]);
    return { killed, lastRecord, report, ms: Date.now() - started };
  } finally {
    await sandbox.close();
  }
}

const log: string[] = [];

describe('SIGKILL at chosen moments, then rerun', () => {
  afterAll(() => {
    if (log.length) console.info(`[crash] rounds:\n  ${log.join('\n  ')}`);
  });

  const note = (name: string, o: RoundOutcome) =>
    log.push(
      `${name}: killed=${o.killed} last=${o.lastRecord} dup=${o.report.run.totals.possible_duplicates} ${o.ms}ms`,
    );

  it('before the first POST (styles answer held back)', async () => {
    const o = await round({
      name: 'before-first-post',
      faults: { slowMs: 1500 },
      trigger: when(({ sandbox }) => sandbox.stats.requests.some((r) => r.path === '/v1/styles')),
      atKill: ({ sandbox }) => {
        expect(sandbox.stats.creates).toBe(0);
      },
      afterRerun: (report) => {
        expect(report.run.totals.possible_duplicates).toBe(0);
        for (const item of report.items) expect(item.submissions).toBe(1);
      },
    });
    note('before-first-post', o);
    expect(o.killed).toBe(true);
  });

  it('between the fsynced "submitting" and the 202 (job created, answer held back)', async () => {
    let window: string[] = [];
    const o = await round({
      name: 'submit-window',
      faults: { slowMs: 1200 },
      trigger: when(
        async ({ sandbox, out }) => sandbox.stats.jobs > 0 && (await inSubmitWindow(out)).length > 0,
      ),
      atKill: async ({ out }) => {
        window = await inSubmitWindow(out);
        expect(window.length).toBeGreaterThan(0);
      },
      afterRerun: (report, before) => {
        // Every item caught in the window was created at the service and is sent again by the
        // rerun: a possible duplicate, flagged.
        const created = [...before.creates].filter(([, n]) => n > 0).map(([id]) => id);
        const flagged = report.items.filter((i) => i.submissions > 1).map((i) => i.id);
        for (const id of created) if (window.includes(id)) expect(flagged).toContain(id);
        expect(report.run.totals.possible_duplicates).toBeGreaterThan(0);
      },
    });
    note('submit-window', o);
    expect(o.killed).toBe(true);
  });

  it('right after a job id was journaled ("accepted")', async () => {
    const o = await round({
      name: 'after-accepted',
      trigger: when(async ({ out }) => (await journalTypes(out)).includes('accepted')),
      afterRerun: (_report, before) => {
        expect(before.accepted.size).toBeGreaterThan(0);
      },
    });
    note('after-accepted', o);
    expect(o.killed).toBe(true);
  });

  it('mid-poll (polls hang)', async () => {
    const o = await round({
      name: 'mid-poll',
      faults: { hangRate: 1, hangOn: 'poll' },
      trigger: when(({ sandbox }) => sandbox.stats.requests.some((r) => r.path.startsWith('/v1/jobs/'))),
      afterRerun: (_report, before) => {
        expect(before.accepted.size).toBeGreaterThan(0);
      },
    });
    note('mid-poll', o);
    expect(o.killed).toBe(true);
  });

  it('mid-download (slow-drip result, a .part on disk)', async () => {
    const o = await round({
      name: 'mid-download',
      faults: { resultFault: 'slow-drip' },
      trigger: when(async ({ out }) => (await partFiles(out)).length > 0),
      atKill: async ({ out }) => {
        expect((await partFiles(out)).length).toBeGreaterThan(0);
      },
    });
    note('mid-download', o);
    expect(o.killed).toBe(true);
  });

  it('mid-rename (the instant a result file appears in results/)', async () => {
    let journaled = false;
    const o = await round({
      name: 'mid-rename',
      trigger: onFsEvent('results', (name) => !name.startsWith('.')),
      atKill: async ({ out }) => {
        journaled = (await journalTypes(out)).includes('downloaded');
      },
    });
    note(`mid-rename (downloaded journaled at kill: ${journaled})`, o);
    expect(o.killed).toBe(true);
  });

  it('while writing the report', async () => {
    let partial = false;
    const o = await round({
      name: 'report',
      trigger: onFsEvent('', (name) => name.startsWith('report.')),
      atKill: async ({ out }) => {
        // report.json is written whole or not at all.
        const file = path.join(out, 'report.json');
        if (existsSync(file)) JSON.parse(await readFile(file, 'utf8'));
        else partial = true;
        const types = await journalTypes(out);
        expect(types.filter((t) => t === 'downloaded').length).toBe(ITEMS);
      },
      afterRerun: (report) => {
        expect(report.run.totals.possible_duplicates).toBe(0);
      },
    });
    note(`report (report.json absent at kill: ${partial})`, o);
    expect(o.killed).toBe(true);
  });
});

describe('SIGKILL at random moments, then rerun', () => {
  /** Bounded: rounds until the budget is spent (at least MIN_ROUNDS). */
  const BUDGET_MS = 22_000;
  const MIN_ROUNDS = 3;
  const MAX_ROUNDS = 8;
  const profiles: Array<{ name: string; faults: Partial<SandboxFaults> }> = [
    { name: 'clean', faults: {} },
    { name: 'slow', faults: { slowMs: 250 } },
    { name: 'drip', faults: { resultFault: 'slow-drip' } },
  ];

  it('holds the invariants after every round', { timeout: 120_000 }, async () => {
    const seed = Number(process.env.KITCHEN_CRASH_SEED ?? Date.now() % 1_000_000);
    let state = seed;
    const random = () => {
      state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
      return state / 2_147_483_648;
    };
    const started = Date.now();
    const rounds: string[] = [];
    const only = process.env.KITCHEN_CRASH_ROUND;
    for (let i = 0; i < MAX_ROUNDS; i++) {
      if (i >= MIN_ROUNDS && Date.now() - started > BUDGET_MS) break;
      const profile = profiles[Math.floor(random() * profiles.length)]!;
      const delay = Math.round(300 + random() * 5000);
      const name = `random#${i} seed=${seed} ${profile.name} kill@${delay}ms`;
      if (only !== undefined && String(i) !== only) continue;
      const o = await round({ name, faults: profile.faults, trigger: after(delay) });
      rounds.push(
        `${name}: killed=${o.killed} last=${o.lastRecord} dup=${o.report.run.totals.possible_duplicates}`,
      );
    }
    console.info(`[crash] random rounds (replay with KITCHEN_CRASH_SEED=${seed}):\n  ${rounds.join('\n  ')}`);
    expect(rounds.length).toBeGreaterThanOrEqual(MIN_ROUNDS);
  });
});

describe('leftovers of a killed download', () => {
  it('a rerun removes the .part a SIGKILLed download left behind', async () => {
    const out = path.join(fixture.dir, 'out-leftover-part');
    const sandbox = await sandboxFor(fixture, { faults: { resultFault: 'slow-drip' } });
    try {
      const first = startRun(fixture, sandbox, out);
      await waitFor(async () => (await partFiles(out)).length > 0 || first.exitedYet(), {
        timeoutMs: 30_000,
        intervalMs: 3,
        what: 'a .part file',
      });
      first.kill('SIGKILL');
      await first.exited;
      const left = await partFiles(out);
      expect(left.length).toBeGreaterThan(0);
      sandbox.setFaults({ resultFault: null });
      const rerun = await run(fixture, sandbox, out);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(await partFiles(out)).toEqual([]);
    } finally {
      await sandbox.close();
    }
  });
});
