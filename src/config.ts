/**
 * The command line's side of the configuration: the key and the service from flags and environment,
 * and `run`'s flags (declared in `commands/command-table.ts`) mapped onto run options. Flag strings
 * are read into numbers here by `util/validate.ts` (a value that is not even a number is refused
 * naming the flag); ranges and defaults are checked once, by `pipeline/options.ts`, whose messages
 * name the flag through `flagLabel` (command-table.ts).
 */
import { readFileSync, statSync } from 'node:fs';
import type { RUN_FLAGS } from './commands/command-table.js';
import { UsageError } from './errors.js';
import type { PlanOptions } from './pipeline/options.js';
import { parseShard } from './pipeline/shard.js';
import { byteSizeFlag } from './pipeline/source-access.js';
import type { SourceAccess } from './storage/sources.js';
import type { FlagValues } from './util/flags.js';
import { durationFlag, fractionFlag, intFlag, OptionError, rateFlag, secondsFlag } from './util/validate.js';

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
      throw new OptionError('--base-url', 'an http(s) URL', baseUrl);
    }
  }
  return { baseUrl, apiKey, warnings };
}

/** The flags of `run` and `plan` as parsed, typed by their declaration. */
export type RunFlagValues = FlagValues<typeof RUN_FLAGS>;

/**
 * The source flags of `run`, `plan`, `enqueue` and `worker` as a partial {@link SourceAccess}: what a
 * flag gives wins, the rest comes from `env` when the access is resolved (`resolveSourceAccess`).
 */
export function sourceFlagOptions(
  values: { 'max-source-bytes'?: string | undefined; 'allow-private-sources'?: boolean | undefined },
  env: NodeJS.ProcessEnv,
): Partial<SourceAccess> {
  const maxBytes = byteSizeFlag('max-source-bytes', values['max-source-bytes']);
  return {
    env,
    ...(maxBytes !== undefined ? { maxBytes } : {}),
    ...(values['allow-private-sources'] ? { allowPrivate: true } : {}),
  };
}

/** Maps `run`'s (and `plan`'s) flags onto run options (unchecked but for the flags' syntax). */
export function runFlagOptions(
  manifest: string,
  cwd: string,
  values: RunFlagValues,
  env: NodeJS.ProcessEnv = process.env,
): PlanOptions {
  const defined = <T extends object>(o: T) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
      [K in keyof T]: Exclude<T[K], undefined>;
    };
  return {
    manifest,
    cwd,
    ...(values.out !== undefined ? { out: values.out } : {}),
    ...(values.cache !== undefined ? { cache: values.cache } : {}),
    limits: defined({
      concurrency: intFlag('concurrency', values.concurrency),
      maxSubmissions: intFlag('max-submissions', values['max-submissions']),
      jobTimeoutMs: secondsFlag('job-timeout', values['job-timeout']),
      shard: values.shard === undefined ? undefined : parseShard(values.shard),
      maxDurationMs: durationFlag('max-duration', values['max-duration']),
      maxRate: rateFlag('max-rate', values['max-rate']),
    }),
    preflight: defined({
      maxSide: intFlag('max-side', values['max-side']),
      stripMetadata: values['strip-metadata'],
      keepMetadata: values['keep-metadata'],
    }),
    sources: sourceFlagOptions(values, env),
    resume: defined({
      retryFailed: values['retry-failed'],
      retryAmbiguous: values['retry-ambiguous'],
      verify: values.verify,
      manifestRenamed: values['manifest-renamed'],
    }),
    output: defined({ logLevel: values['log-level'] }),
    review: defined({
      enabled: values['no-review'] ? false : values.review ? true : undefined,
      threshold: fractionFlag('review-threshold', values['review-threshold']),
    }),
  };
}
