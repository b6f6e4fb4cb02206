/**
 * The output folder's lock and interrupts (docs/faults.md A.3, E.26): a second run on the same folder is
 * refused, a stale lock of a dead (or zombie) process is taken over, SIGINT exits 130 with state
 * saved and a rerun finishes without duplicate POSTs.
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
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
    // The first run holds the lock while its GET /v1/styles is held back.
    const { fixture, sandbox, out } = await setup(2, { faults: { slowMs: 4000 } });
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
