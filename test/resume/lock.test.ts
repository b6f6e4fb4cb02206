/**
 * The output folder's lock and interrupts (docs/faults.md A.3, E.26): a second run on the same folder is
 * refused, a stale lock of a dead (or zombie) process is taken over, SIGINT exits 130 with state
 * saved and a rerun finishes without duplicate POSTs.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireLock, LOCK_STALE_MS, type LockInfo, staleReason } from '../../src/state/lock.js';
import { isDeadOrZombie, waitFor } from '../helpers/cli.js';
import {
  createsPerItem,
  expectRerunComplete,
  expectSecretAbsent,
  openSubmissions,
  perTest,
  readJournalRecords,
  readReport,
  run,
  snapshot,
  startRun,
} from './world.js';

const { setup, cleanup } = perTest({ processingMs: 300, jitterMs: 100 });

/** Whether PID namespaces can be made here (root, or a kernel that allows it). */
const CAN_UNSHARE = (() => {
  try {
    execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn('unshare --pid is not permitted here: the PID-namespace lock test is skipped');
    return false;
  }
})();

async function lockPid(out: string): Promise<number | null> {
  try {
    return (JSON.parse(await readFile(path.join(out, '.lock'), 'utf8')) as { pid: number }).pid;
  } catch {
    return null;
  }
}

/** Spawns a helper process of our own and returns its pid and a killer (tracked for cleanup). */
function spawnOwn(command: string, args: string[]): { pid: number; stdout: () => string; kill: () => void } {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const pid = child.pid!;
  const kill = () => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  };
  cleanup.push(kill);
  return { pid, stdout: () => out, kill };
}

describe('lock', () => {
  it('refuses a second run on the same folder (exit 2, names the holder pid, submits nothing)', async () => {
    // The first run holds the lock while its GET /v1/styles is held back: long enough for the second
    // run to start and be refused on a loaded machine (4 s was not: the holder went on to POST).
    const { fixture, sandbox, out } = await setup(2, { faults: { slowMs: 15_000 } });
    const holder = startRun(fixture, sandbox, out);
    await waitFor(async () => (await lockPid(out)) === holder.pid, {
      what: 'the first run to hold the lock',
    });
    await waitFor(() => sandbox.stats.requests.length > 0, { what: "the first run's styles request" });
    const requests = sandbox.stats.requests.length;
    const second = await run(fixture, sandbox, out);
    expect(second.code, second.stderr).toBe(2);
    expect(second.stderr).toContain(`pid ${holder.pid}`);
    expect(sandbox.stats.requests.length).toBe(requests); // not even GET /v1/styles
    expect(sandbox.stats.creates).toBe(0);
    expect(await lockPid(out)).toBe(holder.pid); // the refused run left the holder's lock alone
    expect(holder.exitedYet()).toBe(false);
    holder.kill('SIGKILL');
    await holder.exited;
    await expectSecretAbsent(fixture.apiKey, out, [second.stdout, second.stderr]);
  });

  it('takes over the lock of a SIGKILLed process with a warning', async () => {
    const { fixture, sandbox, out } = await setup(2);
    const dead = spawnOwn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    dead.kill();
    await waitFor(() => isDeadOrZombie(dead.pid), { what: 'the helper to die' });
    const { mkdir } = await import('node:fs/promises');
    await mkdir(out, { recursive: true });
    await writeFile(
      path.join(out, '.lock'),
      `${JSON.stringify({ pid: dead.pid, host: os.hostname(), started_at: new Date().toISOString() })}\n`,
    );
    const result = await run(fixture, sandbox, out);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(new RegExp(`took over.*pid ${dead.pid}`));
    expect(await lockPid(out)).toBeNull();
  });

  it('takes over the lock of a zombie process (kill(pid, 0) still succeeds on it)', async () => {
    const { fixture, sandbox, out } = await setup(1);
    // `sh` starts a short child and then becomes `sleep 30`, which never reaps it: a zombie.
    const parent = spawnOwn('sh', ['-c', 'sleep 0.05 & echo $!; exec sleep 30']);
    const zombie = Number(await waitFor(() => parent.stdout().trim(), { what: 'the zombie pid' }));
    await waitFor(
      async () => {
        const stat = await readFile(`/proc/${zombie}/stat`, 'utf8').catch(() => '');
        return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
      },
      { what: 'the child to become a zombie' },
    );
    expect(() => process.kill(zombie, 0)).not.toThrow();
    const { mkdir } = await import('node:fs/promises');
    await mkdir(out, { recursive: true });
    await writeFile(
      path.join(out, '.lock'),
      `${JSON.stringify({ pid: zombie, host: os.hostname(), started_at: new Date().toISOString() })}\n`,
    );
    const result = await run(fixture, sandbox, out);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('took over');
    parent.kill();
  });

  it('does not take over the lock of a live process', async () => {
    const { fixture, sandbox, out } = await setup(1);
    const alive = spawnOwn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(out, { recursive: true });
    await writeFile(
      path.join(out, '.lock'),
      `${JSON.stringify({ pid: alive.pid, host: os.hostname(), started_at: new Date().toISOString() })}\n`,
    );
    const result = await run(fixture, sandbox, out);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`pid ${alive.pid}`);
    expect(sandbox.stats.requests.length).toBe(0);
    alive.kill();
  });
});

/** Writes a lock file as a holder would, touched `ageMs` ago. */
async function plantLock(out: string, holder: Partial<LockInfo>, ageMs = 0): Promise<void> {
  await mkdir(out, { recursive: true });
  const file = path.join(out, '.lock');
  await writeFile(
    file,
    `${JSON.stringify({ pid: 999_999, host: os.hostname(), started_at: new Date().toISOString(), ...holder })}\n`,
  );
  const at = new Date(Date.now() - ageMs);
  await utimes(file, at, at);
}

describe('lock in containers (issue 14)', () => {
  it('says why a lock is stale: heartbeat, host, boot, own pid, gone, reused pid', () => {
    const now = Date.now();
    const here = { host: os.hostname(), started_at: 'x' };
    const ownStart = readFileSync('/proc/self/stat', 'utf8');
    const start = ownStart.slice(ownStart.lastIndexOf(')') + 2).split(' ')[19]!;
    // Another machine: only the heartbeat can tell.
    expect(staleReason({ ...here, host: 'elsewhere', pid: 1 }, now - 5_000, now)).toBeNull();
    expect(staleReason({ ...here, host: 'elsewhere', pid: 1 }, now - LOCK_STALE_MS - 1000, now)).toMatch(
      /heartbeat is 61 s old/,
    );
    expect(staleReason({ ...here, pid: process.ppid, boot_id: 'another-boot' }, now, now)).toMatch(
      /restarted/,
    );
    expect(staleReason({ ...here, pid: process.pid }, now, now)).toMatch(/pid is this process/);
    expect(staleReason({ ...here, pid: 999_999_999 }, now, now)).toMatch(/gone/);
    expect(staleReason({ ...here, pid: process.ppid, pid_start: '1' }, now, now)).toMatch(/another process/);
    // A live process that started when the lock says: held.
    const parent = readFileSync(`/proc/${process.ppid}/stat`, 'utf8');
    const parentStart = parent.slice(parent.lastIndexOf(')') + 2).split(' ')[19]!;
    expect(staleReason({ ...here, pid: process.ppid, pid_start: parentStart }, now, now)).toBeNull();
    expect(start).toMatch(/^\d+$/);
  });

  it('keeps its heartbeat while held, refuses a second holder in the same process, and is gone after release', async () => {
    const { out } = await setup(1);
    await mkdir(out, { recursive: true });
    const lock = await acquireLock(out, { heartbeatMs: 200 });
    const file = path.join(out, '.lock');
    const old = new Date(Date.now() - 30_000);
    await utimes(file, old, old);
    await waitFor(async () => Date.now() - (await stat(file)).mtimeMs < 5_000, { what: 'a heartbeat' });
    // Its pid is this process's, but this process holds it: not stale.
    await expect(acquireLock(out)).rejects.toThrow(/in use by another kitchen-batch run/);
    await lock.release();
    expect(existsSync(file)).toBe(false);
  });

  it('takes over a lock from another host whose heartbeat is old; refuses one whose heartbeat is fresh', async () => {
    const { fixture, sandbox, out } = await setup(1);
    await plantLock(out, { host: 'rescheduled-pod-7f9c', pid: 1 }, 5_000);
    const fresh = await run(fixture, sandbox, out);
    expect(fresh.code, fresh.stderr).toBe(2);
    expect(fresh.stderr).toContain('pid 1 on rescheduled-pod-7f9c');
    await plantLock(out, { host: 'rescheduled-pod-7f9c', pid: 1 }, LOCK_STALE_MS + 30_000);
    const old = await run(fixture, sandbox, out);
    expect(old.code, old.stderr).toBe(0);
    expect(old.stderr).toMatch(/took over the lock .*pid 1 on rescheduled-pod-7f9c.*heartbeat is \d+ s old/);
  });

  it.skipIf(!CAN_UNSHARE)(
    'a run SIGKILLed inside a PID namespace is resumed by a run in a new one (its pid 1 is the lock’s)',
    async () => {
      const { fixture, sandbox, out } = await setup(3, { processingMs: 4000, jitterMs: 0 });
      const prefix = ['unshare', '--pid', '--fork', '--mount-proc'];
      const first = startRun(fixture, sandbox, out, [], { prefix });
      // Killed once the three job ids are journaled (mid-poll): a kill between a `submitting` mark
      // and its 202 would make the rerun send that item again, by design, and this test is about
      // the lock, not about that window (test/resume covers it).
      const accepted = async () =>
        (await readFile(path.join(out, 'journal.jsonl'), 'utf8').catch(() => '')).split('"t":"accepted"')
          .length - 1;
      await waitFor(async () => (await lockPid(out)) === 1 && (await accepted()) === 3, {
        timeoutMs: 20_000,
        what: 'the namespaced run to hold the lock and have its three jobs accepted',
      });
      // The namespace's init is unshare's child: killing it kills every process in the namespace.
      const init = Number(execFileSync('pgrep', ['-P', String(first.pid)], { encoding: 'utf8' }).trim());
      process.kill(init, 'SIGKILL');
      await first.exited;
      expect(await lockPid(out)).toBe(1);
      const again = await run(fixture, sandbox, out, [], { prefix, timeoutMs: 60_000 });
      expect(again.code, again.stderr).toBe(0);
      expect(again.stderr).toMatch(/took over the lock .*pid 1 .*pid is this process/);
      expect(sandbox.stats.jobs).toBe(3);
    },
  );
});

describe('SIGINT', () => {
  it('mid-run exits 130 with state saved and the lock released; the rerun finishes, every duplicate flagged', async () => {
    const { fixture, sandbox, out } = await setup(6, { processingMs: 800, jitterMs: 200 });
    const cli = startRun(fixture, sandbox, out);
    await waitFor(async () => (await readJournalRecords(out)).some((r) => r.t === 'accepted'), {
      intervalMs: 3,
      what: 'a job to be accepted',
    });
    cli.kill('SIGINT');
    const first = await cli.exited;
    expect(first.code, first.stderr).toBe(130);
    expect(first.stderr).toMatch(/interrupted|SIGINT/);
    expect(await lockPid(out)).toBeNull();
    const report = await readReport(out);
    expect(report.run.totals.succeeded).toBeLessThan(6);

    const before = await snapshot(fixture, sandbox, out);
    const rerun = await run(fixture, sandbox, out);
    await expectRerunComplete(fixture, sandbox, out, before, rerun, 'SIGINT mid-run');
    await expectSecretAbsent(fixture.apiKey, out, [first.stdout, first.stderr, rerun.stdout, rerun.stderr]);
  });

  it('a POST in flight at SIGINT finishes and its job id is journaled (no duplicate on rerun)', async () => {
    const { fixture, sandbox, out } = await setup(2, { faults: { slowMs: 1000 } });
    const cli = startRun(fixture, sandbox, out);
    await waitFor(
      async () => sandbox.stats.jobs > 0 && openSubmissions(await readJournalRecords(out)).length > 0,
      {
        intervalMs: 3,
        what: 'a create held back by the sandbox',
      },
    );
    cli.kill('SIGINT');
    const first = await cli.exited;
    expect(first.code, first.stderr).toBe(130);
    const records = await readJournalRecords(out);
    const created = await createsPerItem(fixture, sandbox);
    for (const [id, n] of created) {
      if (n === 0) continue;
      expect(
        records.some((r) => r.t === 'accepted' && r.id === id),
        `${id}: created at the service, job id not journaled`,
      ).toBe(true);
    }
    sandbox.setFaults({ slowMs: 0 });
    const rerun = await run(fixture, sandbox, out);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect([...(await createsPerItem(fixture, sandbox)).values()]).toEqual([1, 1]);
    expect((await readReport(out)).run.totals.possible_duplicates).toBe(0);
  });
});
