import { readFileSync, statSync } from 'node:fs';
import { UsageError } from './errors.js';
import { parseShard, type Shard } from './pipeline/shard.js';

/** Where the key and the service come from, after flags and environment are read. */
export interface ServiceConfig {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  /** Warnings to show (e.g. a world-readable key file). Never contain the key. */
  warnings: string[];
}

/**
 * Reads the API key from `KITCHEN_API_KEY` or the file named by `--api-key-file` (a trailing newline
 * trimmed), never from a plain flag, so it never shows in `ps` or cron logs; and the base URL from
 * `--base-url` or `KITCHEN_API_BASE_URL`.
 */
export function serviceConfig(
  flags: { 'base-url'?: string | undefined; 'api-key-file'?: string | undefined },
  env: NodeJS.ProcessEnv,
): ServiceConfig {
  const warnings: string[] = [];
  let apiKey = env.KITCHEN_API_KEY?.trim() || undefined;
  const keyFile = flags['api-key-file'];
  if (keyFile) {
    let text: string;
    try {
      text = readFileSync(keyFile, 'utf8');
    } catch (error) {
      throw new UsageError(
        `cannot read --api-key-file ${keyFile} (${(error as NodeJS.ErrnoException).code ?? error})`,
      );
    }
    apiKey = text.replace(/\r?\n$/, '').trim();
    if (!apiKey) throw new UsageError(`--api-key-file ${keyFile} is empty`);
    try {
      if ((statSync(keyFile).mode & 0o004) !== 0) {
        warnings.push(`${keyFile} is readable by every user of this machine; chmod 600 it`);
      }
    } catch {}
  }
  const baseUrl = flags['base-url'] ?? (env.KITCHEN_API_BASE_URL?.trim() || undefined);
  if (baseUrl !== undefined) {
    try {
      const url = new URL(baseUrl);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
    } catch {
      throw new UsageError(`the service URL must be an http(s) URL, got "${baseUrl}"`);
    }
  }
  return { baseUrl, apiKey, warnings };
}

/** A whole number flag within bounds, or undefined when absent. */
export function intFlag(
  name: string,
  raw: string | undefined,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\s*-?\d+\s*$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError(
      `--${name} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, got "${raw}"`,
    );
  }
  return value;
}

/** A positive number of seconds, as milliseconds. */
export function secondsFlag(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value) || value <= 0) {
    throw new UsageError(`--${name} must be a positive number of seconds, got "${raw}"`);
  }
  return Math.round(value * 1000);
}

/** `--shard K/N`, or undefined. */
export function shardFlag(raw: string | undefined): Shard | undefined {
  return raw === undefined ? undefined : parseShard(raw);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `--log-level`, checked. */
export function logLevelFlag(raw: string | undefined): string | undefined {
  if (raw !== undefined && !LOG_LEVELS.includes(raw)) {
    throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  }
  return raw;
}
