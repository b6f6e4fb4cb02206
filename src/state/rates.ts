/**
 * The key rates learnt by earlier runs, remembered per service so that `plan` can say how long the
 * night will take before it starts (docs/contract.md#plan). One small JSON file in the user's cache
 * directory, keyed by the service's base URL (its userinfo and secret parameters removed): never the
 * API key, nor a hash of it, which would let anyone holding the file test a guessed key.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { kitchenCacheDir } from '../util/cache-dir.js';
import { redactUrl } from '../util/redact-url.js';

/** A rate remembered for one service. */
export interface RememberedRate {
  /** Requests per second the key sustained (the governor's estimate, learnt from its 429s). */
  rate_per_second: number;
  /** When it was learnt (ISO 8601, UTC). */
  learnt_at: string;
}

/** Where the rates live: `$XDG_CACHE_HOME/kitchen-batch/rates.json`, else `~/.cache/kitchen-batch/rates.json`. */
export function ratesFile(env: Readonly<Record<string, string | undefined>>): string {
  return path.join(kitchenCacheDir(env), 'rates.json');
}

/** The file's key for a service: its base URL without credentials or a trailing slash. */
function serviceKey(baseUrl: string): string {
  return redactUrl(baseUrl).replace(/\/+$/, '');
}

/** Every remembered rate; an absent, unreadable or corrupt file is no rates (it is only a cache). */
async function readAll(file: string): Promise<Record<string, RememberedRate>> {
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    const rates: Record<string, RememberedRate> = {};
    for (const [key, value] of Object.entries(parsed)) {
      const entry = value as Partial<RememberedRate> | null;
      if (
        typeof entry?.rate_per_second === 'number' &&
        entry.rate_per_second > 0 &&
        typeof entry.learnt_at === 'string'
      ) {
        rates[key] = { rate_per_second: entry.rate_per_second, learnt_at: entry.learnt_at };
      }
    }
    return rates;
  } catch {
    return {};
  }
}

/** The rate remembered for `baseUrl`, or null. */
export async function recallRate(
  baseUrl: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<RememberedRate | null> {
  return (await readAll(ratesFile(env)))[serviceKey(baseUrl)] ?? null;
}

/**
 * Remembers `rate` for `baseUrl`, keeping the other services' entries. Written to a temporary file
 * and renamed over the old one, so a reader never sees half a file and two runs ending at once
 * leave one whole file (the last one's).
 */
export async function rememberRate(
  baseUrl: string,
  rate: number,
  env: Readonly<Record<string, string | undefined>>,
  now: Date = new Date(),
): Promise<void> {
  const file = ratesFile(env);
  await mkdir(path.dirname(file), { recursive: true });
  const rates = await readAll(file);
  rates[serviceKey(baseUrl)] = { rate_per_second: Number(rate.toFixed(3)), learnt_at: now.toISOString() };
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(rates, null, 2)}\n`);
  await rename(temp, file);
}
