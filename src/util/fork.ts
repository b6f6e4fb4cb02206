/**
 * Child processes from this package's own modules. Built (`dist/`), a module is plain JavaScript
 * and starts as it is. Run from the TypeScript sources (the tests, `npm run bench`), the child
 * first registers tsx's loader, which it does not inherit from its parent.
 */
import { type ChildProcess, type ForkOptions, fork } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';
import { pathToFileURL } from 'node:url';

/**
 * Starts the module `name` that lies beside `from` (the caller's `import.meta.url`; its extension
 * says whether the sources run as TypeScript) in a child process, with an IPC channel that passes
 * typed arrays as they are (`serialization: 'advanced'`). The child gets `options.env` (none of
 * this process's environment unless given) and `options.execArgv` (none of this process's Node.js
 * flags, a test runner's or a profiler's), plus tsx's loader when the sources are TypeScript.
 */
export function startProcess(name: string, from: string, options: ForkOptions = {}): ChildProcess {
  const typescript = from.endsWith('.ts');
  const entry = new URL(`./${name}.${typescript ? 'ts' : 'js'}`, from);
  const flags = options.execArgv ?? [];
  return fork(entry, [], {
    serialization: 'advanced',
    env: {},
    ...options,
    execArgv: typescript ? ['--import', tsxLoader(from), ...flags] : flags,
  });
}

/** The URL of tsx's loader (the package's `import` entry, what `node --import tsx` loads). */
function tsxLoader(from: string): string {
  const manifest = createRequire(from).resolve('tsx/package.json');
  const exported = JSON.parse(readFileSync(manifest, 'utf8')).exports['.'];
  const target = typeof exported === 'string' ? exported : exported.import;
  return new URL(target, pathToFileURL(manifest)).href;
}

/** The lowest priority (nice 19): such a process runs on what the others leave idle. */
const IDLE_NICE = 19;

/**
 * Lowers this whole process to the lowest priority: every thread it has now (on Linux one thread
 * at a time, from /proc/self/task, since the kernel's priority is per thread) and, as threads
 * inherit it, every thread it starts later (libuv's pool, libvips' workers). Where that is not
 * allowed or not known, the process keeps its priority: the work is the same, only less polite.
 *
 * Not SCHED_IDLE (`chrt --idle`), measured: it keeps the run's thread from waiting a few more
 * milliseconds now and then, but leaves the review a longer queue to finish after the last
 * download, and the run took longer in all (docs/contract.md#review).
 */
export function lowerPriority(): void {
  let threads: string[] = [];
  try {
    threads = readdirSync('/proc/self/task');
  } catch {}
  for (const tid of [0, ...threads.map(Number)]) {
    try {
      setPriority(tid, IDLE_NICE);
    } catch {}
  }
}
