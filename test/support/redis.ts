/**
 * A real Redis for tests: Debian's `redis-server` on a free loopback port, with its own temporary
 * data directory and AOF on (the persistence the worker mode relies on), stopped by its PID. Tests
 * skip with a message when `redis-server` is not installed (CI installs it with apt).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Whether `redis-server` can be started here. */
export const HAS_REDIS = (() => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

if (!HAS_REDIS) {
  console.warn(
    'redis-server is not installed: the worker-mode tests are skipped (apt-get install redis-server)',
  );
}

/** A running Redis. */
export interface TestRedis {
  url: string;
  port: number;
  pid: number;
  dir: string;
  /** Stops it (SIGTERM, then SIGKILL after 5 s) and removes its data directory. */
  stop(): Promise<void>;
  /**
   * Stops it and starts it again on the same port and data directory (its AOF replayed), running
   * `whileDown` (if given) while it is stopped.
   */
  restart(whileDown?: () => unknown): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

async function launch(port: number, dir: string, aof: boolean, password?: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no'],
      ...['--appendonly', aof ? 'yes' : 'no'],
      ...(password === undefined ? [] : ['--requirepass', password]),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 10_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${output}`));
    });
  });
  await ready;
  return child;
}

async function halt(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * Starts a Redis for one test file or test (AOF on unless `aof: false`). With `password` it requires
 * it (`--requirepass`) and `url` carries it (`redis://:<password>@127.0.0.1:<port>`).
 */
export async function startRedis(options: { aof?: boolean; password?: string } = {}): Promise<TestRedis> {
  const { password } = options;
  const aof = options.aof ?? true;
  const dir = await mkdtemp(path.join(tmpdir(), 'kb-redis-'));
  const port = await freePort();
  let child = await launch(port, dir, aof, password);
  const redis: TestRedis = {
    url: `redis://${password === undefined ? '' : `:${encodeURIComponent(password)}@`}127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    dir,
    stop: async () => {
      await halt(child);
      await rm(dir, { recursive: true, force: true });
    },
    restart: async (whileDown) => {
      await halt(child);
      await whileDown?.();
      child = await launch(port, dir, aof, password);
      redis.pid = child.pid!;
    },
  };
  return redis;
}
