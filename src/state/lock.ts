import { readFileSync } from 'node:fs';
import { open, readFile, rm, stat, utimes } from 'node:fs/promises';
import os from 'node:os';
import { StateError } from '../errors.js';
import { isoWithOffset } from '../util/time.js';
import { lockFile } from './run-files.js';

/** What the lock file says about its holder. */
export interface LockInfo {
  pid: number;
  host: string;
  started_at: string;
  /** The holder's process start time (Linux: clock ticks after boot), so a reused pid is told apart. */
  pid_start?: string | null;
  /** The kernel's boot id: a lock from before a reboot is stale. */
  boot_id?: string | null;
}

/**
 * The holder touches the lock file (its mtime) this often while it lives; a lock not touched for
 * {@link LOCK_STALE_MS} is stale wherever its holder ran (docs/contract.md#resume).
 */
export const LOCK_HEARTBEAT_MS = 10_000;
/** See {@link LOCK_HEARTBEAT_MS}. */
export const LOCK_STALE_MS = 60_000;

/** Lock files this process holds: never taken over by itself (two runs in one process refuse too). */
const held = new Set<string>();

/** A held lock on an output folder. */
export interface Lock {
  file: string;
  /** Set when a stale lock was taken over, with why it was stale. */
  tookOver: (LockInfo & { reason: string }) | null;
  release(): Promise<void>;
}

/**
 * Takes the exclusive lock of an output folder: `<out>/.lock` created with O_EXCL, holding pid, host,
 * start time, the process's start time and the boot id, and touched every
 * {@link LOCK_HEARTBEAT_MS} while held. A stale lock is taken over (see {@link staleReason}); a
 * live holder makes this throw a {@link StateError} naming its pid and start time.
 */
export async function acquireLock(outDir: string, options: { heartbeatMs?: number } = {}): Promise<Lock> {
  const file = lockFile(outDir);
  const mine = holderInfo();
  let tookOver: Lock['tookOver'] = null;
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
      held.add(file);
      const heartbeat = setInterval(() => {
        const now = new Date();
        utimes(file, now, now).catch(() => {});
      }, options.heartbeatMs ?? LOCK_HEARTBEAT_MS);
      heartbeat.unref();
      return {
        file,
        tookOver,
        release: async () => {
          if (released) return;
          released = true;
          clearInterval(heartbeat);
          held.delete(file);
          await rm(file, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = await readLock(file);
    const touched = await stat(file).then(
      (st) => st.mtimeMs,
      () => null,
    );
    if (touched === null) continue; // released meanwhile: try again
    // An unreadable lock is one a crash cut short while it was being written.
    const reason = held.has(file)
      ? null
      : holder
        ? staleReason(holder, touched)
        : 'its file is unreadable (a crash while it was written)';
    if (reason === null) {
      const who = holder ?? { pid: process.pid, host: os.hostname(), started_at: 'unknown' };
      throw lockedError(outDir, who);
    }
    tookOver = { ...(holder ?? { pid: 0, host: 'unknown', started_at: 'unknown' }), reason };
    await rm(file, { force: true });
  }
  throw new StateError('locked', `could not take the lock ${file}: it keeps reappearing`);
}

/** This process as a lock's (or a lease's) holder. */
export function holderInfo(): LockInfo {
  return {
    pid: process.pid,
    host: os.hostname(),
    started_at: isoWithOffset(),
    pid_start: processStart(process.pid),
    boot_id: bootId(),
  };
}

/** A lock's (or lease's) holder as JSON gave it, or null when it is not one. */
export function parseHolder(info: Partial<LockInfo> | null | undefined): LockInfo | null {
  if (!info || typeof info.pid !== 'number' || typeof info.host !== 'string') return null;
  return {
    pid: info.pid,
    host: info.host,
    started_at: String(info.started_at ?? 'unknown'),
    pid_start: typeof info.pid_start === 'string' ? info.pid_start : null,
    boot_id: typeof info.boot_id === 'string' ? info.boot_id : null,
  };
}

/** The refusal of a run whose folder (or prefix) a live run holds. */
export function lockedError(where: string, who: LockInfo): StateError {
  return new StateError(
    'locked',
    `${where} is in use by another kitchen-batch run (pid ${who.pid} on ${who.host}, started ${who.started_at}). ` +
      'Wait for it to finish, or use another --out folder.',
  );
}

async function readLock(file: string): Promise<LockInfo | null> {
  try {
    return parseHolder(JSON.parse(await readFile(file, 'utf8')) as Partial<LockInfo>);
  } catch {
    return null;
  }
}

/**
 * Why a lock is stale, or null when its holder may live (then it is not taken):
 * - its heartbeat (the file's mtime) is older than {@link LOCK_STALE_MS}, wherever it ran;
 * - another host with a fresh heartbeat may live (it cannot be checked from here);
 * - on this host: another boot; its pid is ours (a run killed in an earlier container or PID
 *   namespace, whose pid 1 is now us); its process is gone (or a zombie); or its pid now belongs to a
 *   process that started at another time (the pid was reused).
 */
export function staleReason(holder: LockInfo, touchedMs: number, now = Date.now()): string | null {
  const age = now - touchedMs;
  if (age > LOCK_STALE_MS) return `its heartbeat is ${Math.round(age / 1000)} s old`;
  if (holder.host !== os.hostname()) return null;
  const boot = bootId();
  if (holder.boot_id && boot && holder.boot_id !== boot) return 'the machine was restarted since';
  if (holder.pid === process.pid) return 'its pid is this process (an earlier container or PID namespace)';
  if (!isAlive(holder.pid)) return 'its process is gone';
  if (holder.pid_start) {
    const start = processStart(holder.pid);
    if (start !== null && start !== holder.pid_start) return 'its pid now belongs to another process';
  }
  return null;
}

/**
 * The fields of `/proc/<pid>/stat` after the command name (which may hold spaces): [0] is field 3,
 * the state; [19] is field 22, the start time. Null without such a process, or off Linux.
 */
function procStat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** A process's start time in clock ticks after boot (`/proc/<pid>/stat` field 22), or null off Linux. */
function processStart(pid: number): string | null {
  return procStat(pid)?.[19] ?? null;
}

/** The kernel's boot id, or null off Linux. */
function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
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
  const state = procStat(pid)?.[0];
  // No /proc (macOS): kill(0) said it lives.
  return state === undefined || (state !== 'Z' && state !== 'X');
}
