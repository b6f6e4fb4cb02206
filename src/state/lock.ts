import { readFileSync } from 'node:fs';
import { open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { StateError } from '../errors.js';
import { isoWithOffset } from '../util/time.js';

/** What the lock file says about its holder. */
export interface LockInfo {
  pid: number;
  host: string;
  started_at: string;
}

/** A held lock on an output folder. */
export interface Lock {
  file: string;
  /** Set when a stale lock of a dead process was taken over. */
  tookOver: LockInfo | null;
  release(): Promise<void>;
}

/**
 * Takes the exclusive lock of an output folder: `<out>/.lock` created with O_EXCL, holding pid, host
 * and start time. A lock whose process is gone (same host, pid dead or a zombie) is stale and taken
 * over; a live holder makes this throw a {@link StateError} naming its pid and start time.
 */
export async function acquireLock(outDir: string): Promise<Lock> {
  const file = path.join(outDir, '.lock');
  const mine: LockInfo = { pid: process.pid, host: os.hostname(), started_at: isoWithOffset() };
  let tookOver: LockInfo | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(file, 'wx');
      try {
        await handle.writeFile(`${JSON.stringify(mine)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      let released = false;
      return {
        file,
        tookOver,
        release: async () => {
          if (released) return;
          released = true;
          await rm(file, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = await readLock(file);
    if (holder && !isStale(holder)) {
      throw new StateError(
        'locked',
        `${outDir} is in use by another kitchen-batch run (pid ${holder.pid} on ${holder.host}, started ${holder.started_at}). ` +
          'Wait for it to finish, or use another --out folder.',
      );
    }
    // Stale (or unreadable: a crash while writing the lock itself). Take it over.
    tookOver = holder ?? { pid: 0, host: 'unknown', started_at: 'unknown' };
    await rm(file, { force: true });
  }
  throw new StateError('locked', `could not take the lock ${file}: it keeps reappearing`);
}

async function readLock(file: string): Promise<LockInfo | null> {
  try {
    const info = JSON.parse(await readFile(file, 'utf8')) as Partial<LockInfo>;
    if (typeof info.pid === 'number' && typeof info.host === 'string') {
      return { pid: info.pid, host: info.host, started_at: String(info.started_at ?? 'unknown') };
    }
  } catch {}
  return null;
}

/** A lock is stale when its holder ran on this host and that process no longer lives. */
function isStale(holder: LockInfo): boolean {
  if (holder.host !== os.hostname()) return false; // cannot check another machine: assume alive
  return !isAlive(holder.pid);
}

/**
 * `kill(pid, 0)` succeeds on a zombie (a SIGKILLed process can linger ~2 s until reaped, docs/faults.md
 * E.26), so on Linux the process state in /proc decides.
 */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return true; // no /proc (macOS): kill(0) said it lives
  }
}
