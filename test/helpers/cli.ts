/**
 * Runs the real CLI as a child process: spawn with an explicit environment, capture stdout and
 * stderr, kill by PID (SIGKILL, SIGINT, ...) and always clean up.
 *
 * By default the child runs the built `dist/`, as users run it: the helper builds it once per test
 * file (under a cross-process lock, aside, then swapped in) when `dist/` is missing or older
 * than any file under `src/`, so it always tests the current sources. A CLI started through tsx costs about 0.3 s more
 * CPU (the whole suite: 798 s of CPU through tsx, 637 s from dist). Set `KITCHEN_TEST_CLI=tsx` to
 * run the TypeScript sources through tsx instead (`node --import tsx src/bin.ts`), with no build.
 * The entry is `bin` (the executable) when `src/bin.ts` exists, else `cli`.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository root. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** How a finished child ended. */
export interface CliResult {
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running child of the CLI. */
export interface CliProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  /** Everything written to stdout so far. */
  stdout(): string;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Whether the child has exited. */
  exitedYet(): boolean;
  /** Resolves when the child has exited and its pipes are closed. */
  readonly exited: Promise<CliResult>;
  /** Sends a signal to the child's PID (no-op when it has exited). */
  kill(signal?: NodeJS.Signals): void;
}

/** Options of {@link spawnCli}. */
export interface SpawnOptions {
  /** Extra environment; `KITCHEN_*` variables of the test process are never inherited. */
  env?: Record<string, string>;
  /** Working directory of the child. @default the repository root */
  cwd?: string;
  /** A command line to run the CLI under, e.g. `['faketime', '-f', '+2h']`. */
  prefix?: string[];
  /** The Node.js executable that runs the CLI. @default the test's own (`process.execPath`) */
  node?: string;
}

const live = new Set<CliProcess>();

/** The executable module: `bin` when the package has one, else `cli`. */
function entry(): 'bin' | 'cli' {
  return existsSync(path.join(REPO_ROOT, 'src', 'bin.ts')) ? 'bin' : 'cli';
}

/** The command line (executable and leading arguments) that runs the CLI with `node`. */
export function cliCommand(node: string = process.execPath): { command: string; args: string[] } {
  if (process.env.KITCHEN_TEST_CLI !== 'tsx') {
    ensureBuilt();
    return { command: node, args: [path.join(REPO_ROOT, 'dist', `${entry()}.js`)] };
  }
  // An absolute loader URL, so the child's cwd can be any temp folder.
  const loader = pathToFileURL(path.join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
  return {
    command: node,
    args: ['--import', loader, path.join(REPO_ROOT, 'src', `${entry()}.ts`)],
  };
}

/** Starts the CLI with `args`. Track it: {@link killAllClis} in `afterEach` ends it if still running. */
export function spawnCli(args: string[], options: SpawnOptions = {}): CliProcess {
  const { command, args: lead } = cliCommand(options.node);
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (
      value === undefined ||
      key.startsWith('KITCHEN_') ||
      key.startsWith('VITEST') ||
      key === 'NODE_OPTIONS'
    )
      continue;
    env[key] = value;
  }
  Object.assign(env, { NO_COLOR: '1', FORCE_COLOR: '0' }, options.env ?? {});
  const line = [...(options.prefix ?? []), command, ...lead, ...args];
  const child = spawn(line[0]!, line.slice(1), {
    cwd: options.cwd ?? REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  let done = false;
  const exited = new Promise<CliResult>((resolve) => {
    child.on('close', (code, signal) => {
      done = true;
      live.delete(handle);
      resolve({ code, signal, stdout: out, stderr: err });
    });
    child.on('error', (error) => {
      err += `\n[spawn error] ${error.message}\n`;
    });
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${line[0]}`);
  const pid = child.pid;
  const handle: CliProcess = {
    pid,
    child,
    stdout: () => out,
    stderr: () => err,
    exitedYet: () => done,
    exited,
    kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (done) return;
      try {
        process.kill(pid, signal);
      } catch {
        // gone already
      }
    },
  };
  live.add(handle);
  return handle;
}

/** Runs the CLI to its end; SIGKILLs it (and fails) after `timeoutMs`. */
export async function runCli(
  args: string[],
  options: SpawnOptions & { timeoutMs?: number } = {},
): Promise<CliResult> {
  const cli = spawnCli(args, options);
  const timeoutMs = options.timeoutMs ?? 45_000;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cli.kill('SIGKILL');
      reject(
        new Error(
          `kitchen-batch ${args.join(' ')} did not finish within ${timeoutMs} ms\nstdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`,
        ),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([cli.exited, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** SIGKILLs every child still running (by PID) and waits for each to exit. For `afterEach`. */
export async function killAllClis(): Promise<void> {
  const running = [...live];
  for (const cli of running) cli.kill('SIGKILL');
  await Promise.all(running.map((cli) => cli.exited));
}

/** An in-memory stdout/stderr for in-process `main()` and the progress printer; `text()` is all written. */
export function textSink(isTTY = false): { write(text: string): string; isTTY: boolean; text(): string } {
  let written = '';
  return { write: (text) => (written += text), isTTY, text: () => written };
}

/** Polls `predicate` every `intervalMs` until it returns a truthy value; throws after `timeoutMs`. */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  for (;;) {
    const value = await predicate();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? 'a condition'}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 5));
  }
}

/** Whether `pid` is gone or a zombie (a SIGKILLed process can linger unreaped for a while). */
export function isDeadOrZombie(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

// ---- dist mode ----------------------------------------------------------------------------------

let built = false;

/** The newest modification time of any file below `dir`. */
/** The newest file under `dir`: its path and mtime. */
function newestFile(dir: string): { file: string; mtimeMs: number } {
  let newest = { file: dir, mtimeMs: 0 };
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    const found = entry.isDirectory() ? newestFile(full) : { file: full, mtimeMs: statSync(full).mtimeMs };
    if (found.mtimeMs > newest.mtimeMs) newest = found;
  }
  return newest;
}

/**
 * Why `dist/` must be built: missing, or older than a file under `src/`; null when it is current.
 * A rebuild while other test files run the CLI can hand them half-written modules, so the reason
 * is printed (stderr) where the suite's output shows it.
 */
function distStale(): string | null {
  const cli = path.join(REPO_ROOT, 'dist', `${entry()}.js`);
  let builtAt: number;
  try {
    builtAt = statSync(cli).mtimeMs;
  } catch {
    return `${cli} is missing`;
  }
  const newest = newestFile(path.join(REPO_ROOT, 'src'));
  if (newest.mtimeMs <= builtAt) return null;
  return `${newest.file} (${new Date(newest.mtimeMs).toISOString()}) is newer than ${cli} (${new Date(builtAt).toISOString()})`;
}

/**
 * `npm run build`'s steps (tsc, then bin.js made executable) into a folder of its own under
 * node_modules/, which then replaces `dist/` by two renames: a CLI that other test files start
 * meanwhile reads the old build or the new one, never a module tsc is half-way through writing (CI
 * once saw `SyntaxError: ... does not provide an export named 'ApiError'` from a build made in
 * place mid-suite).
 */
function buildAside(): void {
  const dist = path.join(REPO_ROOT, 'dist');
  const fresh = path.join(REPO_ROOT, 'node_modules', `.kitchen-test-dist-${process.pid}`);
  const old = path.join(REPO_ROOT, 'node_modules', `.kitchen-test-old-dist-${process.pid}`);
  rmSync(fresh, { recursive: true, force: true });
  try {
    const tsc = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', fresh], {
      cwd: REPO_ROOT,
      stdio: 'pipe',
    });
  } catch (error) {
    rmSync(fresh, { recursive: true, force: true });
    // tsc prints its errors on stdout.
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(
      `the build (tsc -p tsconfig.build.json) failed, so the CLI cannot be tested:\n${stdout ?? ''}${stderr ?? ''}`,
    );
  }
  chmodSync(path.join(fresh, 'bin.js'), 0o755);
  if (existsSync(dist)) renameSync(dist, old);
  renameSync(fresh, dist);
  rmSync(old, { recursive: true, force: true });
}

/** Builds `dist/` once per test file when stale; a lock directory keeps parallel test files apart. */
function ensureBuilt(): void {
  if (built) return;
  const lock = path.join(REPO_ROOT, 'node_modules', '.kitchen-test-build.lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`build lock ${lock} held for too long; remove it`);
      execFileSync('sleep', ['0.2']);
    }
  }
  try {
    const stale = distStale();
    if (stale) {
      process.stderr.write(`test/helpers/cli.ts (pid ${process.pid}): building dist/: ${stale}\n`);
      buildAside();
    }
    built = true;
  } finally {
    rmdirSync(lock);
  }
}
