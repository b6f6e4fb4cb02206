/**
 * Redis for the worker mode (docs/contract.md#worker-mode): where its URL comes from, and a
 * connection that either answers PING within a deadline or fails with exit 3 and a message that
 * names the server (never its password).
 */
import { Redis } from 'ioredis';
import { RedisAuthError, RedisUnreachableError, UsageError } from '../errors.js';

/** How long a command waits for Redis to answer before it gives up (exit 3). */
const CONNECT_TIMEOUT_MS = 5000;

/** The Redis URL from `--redis`, else `KITCHEN_REDIS_URL`; a usage error when neither is set or it is not redis(s)://. */
export function redisUrl(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const url = flag ?? (env.KITCHEN_REDIS_URL?.trim() || undefined);
  if (!url)
    throw new UsageError('no Redis: pass --redis URL or set KITCHEN_REDIS_URL (e.g. redis://127.0.0.1:6379)');
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {}
  if (protocol !== 'redis:' && protocol !== 'rediss:') {
    throw new UsageError(
      `--redis: expected a redis:// or rediss:// URL, got ${JSON.stringify(redactUrl(url))}`,
    );
  }
  return url;
}

/** The URL with any password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/** Options of {@link openRedis}. */
export interface OpenRedisOptions {
  /** Give up after this long without an answer. @default 5000 */
  timeoutMs?: number;
  /**
   * For BullMQ workers' blocking connections: never fail a command for want of a connection, wait
   * for Redis to come back instead (BullMQ requires `maxRetriesPerRequest: null` there).
   */
  blocking?: boolean;
}

/**
 * Why Redis refused the connection's credentials, from the reply ioredis reports (its AUTH, or the
 * first command when none was sent), or undefined when the failure is not about credentials.
 */
function credentialRefusal(error: unknown, url: string): RedisAuthError | undefined {
  const message = (error as { message?: unknown } | undefined)?.message;
  if (typeof message !== 'string') return undefined;
  const where = `Redis at ${redactUrl(url)}`;
  const fix = 'in --redis or KITCHEN_REDIS_URL';
  // Redis 6+ answers WRONGPASS; Redis 5 and older "ERR invalid password".
  if (/^WRONGPASS\b|^ERR invalid (password|username-password)/.test(message)) {
    return new RedisAuthError(
      `${where} refused the password (WRONGPASS): check the user and password ${fix}`,
      { cause: error },
    );
  }
  if (/^NOAUTH\b/.test(message)) {
    return new RedisAuthError(
      `${where} requires a password (NOAUTH): give it in the URL, redis://:PASSWORD@host:port (or redis://USER:PASSWORD@host:port), ${fix}`,
      { cause: error },
    );
  }
  if (/^NOPERM\b/.test(message)) {
    return new RedisAuthError(
      `${where} does not let this user run the commands the worker mode needs (NOPERM): use another user ${fix}`,
      { cause: error },
    );
  }
  return undefined;
}

/**
 * Connects and PINGs. Credentials that Redis refuses are a {@link RedisAuthError} (exit 3) saying so;
 * a Redis that cannot be reached within the deadline is a {@link RedisUnreachableError} (exit 3).
 * Both name the server, never its password; the half-open client is closed.
 */
export async function openRedis(url: string, options: OpenRedisOptions = {}): Promise<Redis> {
  const timeoutMs = options.timeoutMs ?? CONNECT_TIMEOUT_MS;
  let everReady = false;
  const client: Redis = new Redis(url, {
    // RESP2, as ioredis 5 spoke it. ioredis 6 defaults to RESP3, whose handshake sends HELLO on every
    // (re)connect and takes a HELLO that fails as fatal, rejecting every command that waits for the
    // connection: a worker died so (write ECONNRESET on a state write) when Redis restarted under
    // load, where commands must wait for it (docs/faults.md K.49). Without a password RESP2's
    // handshake sends nothing that can fail so. Nothing here needs RESP3.
    protocol: 2,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: options.blocking ? null : 1,
    // The first connection gets one attempt (a wrong URL must not hang a command); once it has
    // worked, a lost connection is retried (a Redis restart), at most every 2 s.
    retryStrategy: (times: number): number | null => (everReady ? Math.min(times * 200, 2000) : null),
  });
  client.on('ready', () => {
    everReady = true;
  });
  // An error event without a listener would crash the process; the command reports it instead. A
  // refused AUTH reaches us only here: the connection then closes and connect() just says so.
  let refused: RedisAuthError | undefined;
  client.on('error', (error: unknown) => {
    refused ??= credentialRefusal(error, url);
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect().then(() => client.ping()),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return client;
  } catch (error) {
    client.disconnect();
    refused ??= credentialRefusal(error, url);
    if (refused) throw refused;
    const reason = (error as { code?: string; message?: string }).code ?? (error as Error).message;
    throw new RedisUnreachableError(`cannot reach Redis at ${redactUrl(url)} (${reason})`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A second connection to the Redis that `connection` reached (for BullMQ's blocking commands). Since
 * Redis has answered once, a restart under way when it opens is waited for, as every command of the
 * first connection waits, instead of failing the worker (docs/faults.md K.49).
 */
export function secondConnection(connection: Redis): Redis {
  // The copy keeps the first's retry strategy, which retries once the first has been ready.
  const second = connection.duplicate({ lazyConnect: false });
  // Errors while it reconnects are the first connection's to report; BullMQ adds its own listener.
  second.on('error', () => {});
  return second;
}

/** Whether an error from a Redis command means the connection is gone (not a bad command). */
function lostConnection(error: unknown): boolean {
  const e = error as { name?: string; code?: string; message?: string };
  return (
    e?.name === 'MaxRetriesPerRequestError' ||
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(e?.code ?? '') ||
    /Connection is closed|Stream isn't writeable|connect ETIMEDOUT/.test(e?.message ?? '')
  );
}

/**
 * Opens Redis, runs `task` on the connection and disconnects. A connection lost while it runs is a
 * {@link RedisUnreachableError} (exit 3) naming the server, like one that never answered.
 */
export async function withRedis<T>(url: string, task: (connection: Redis) => Promise<T>): Promise<T> {
  const connection = await openRedis(url);
  try {
    return await task(connection);
  } catch (error) {
    if (error instanceof RedisUnreachableError || !lostConnection(error)) throw error;
    throw new RedisUnreachableError(`lost Redis at ${redactUrl(url)} (${(error as Error).message})`, {
      cause: error,
    });
  } finally {
    connection.disconnect();
  }
}

/**
 * What in Redis's own settings puts the worker mode's state at risk (docs/contract.md#worker-mode):
 * AOF off (a restart loses queued items and job ids) or a maxmemory policy that evicts keys. Empty
 * when all is well, or when Redis does not let us read its settings (managed services often refuse
 * CONFIG): then nothing can be said.
 */
export async function persistenceWarnings(connection: Redis, url: string): Promise<string[]> {
  let settings: string[];
  try {
    settings = [
      ...((await connection.config('GET', 'appendonly')) as string[]),
      ...((await connection.config('GET', 'maxmemory-policy')) as string[]),
    ];
  } catch {
    return [];
  }
  const value = (name: string) => settings[settings.indexOf(name) + 1];
  const warnings: string[] = [];
  const where = redactUrl(url);
  if (value('appendonly') === 'no') {
    warnings.push(
      `Redis at ${where} runs without AOF (appendonly no): a restart can lose queued items and job ids; ` +
        'run it with --appendonly yes (docs/contract.md#worker-mode)',
    );
  }
  const policy = value('maxmemory-policy');
  if (policy !== undefined && policy !== 'noeviction') {
    warnings.push(
      `Redis at ${where} evicts keys under memory pressure (maxmemory-policy ${policy}): queued items can vanish; ` +
        'use noeviction (docs/contract.md#worker-mode)',
    );
  }
  return warnings;
}
