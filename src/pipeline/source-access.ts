/**
 * How a command reaches remote sources (issue 32), resolved once from what the caller gave, then the
 * environment, then the defaults: the size cap (`--max-source-bytes`, `KITCHEN_MAX_SOURCE_BYTES`)
 * and private addresses (`--allow-private-sources`, `KITCHEN_ALLOW_PRIVATE_SOURCES=1`). A flag (or a
 * library option) wins over the environment. `run`, `plan`, `enqueue` and `worker` all resolve
 * through {@link resolveSourceAccess}, so one value means the same everywhere.
 */
import { DEFAULT_MAX_SOURCE_BYTES } from '../limits.js';
import { allowPrivateFromEnv } from '../storage/http/guard.js';
// A type only: this module is loaded by every command's flags (config.ts), the AWS SDK is not.
import type { SourceAccess } from '../storage/sources.js';
import { flag, OptionError, wholeNumber } from '../util/validate.js';
import type { OptionLabel } from './option-types.js';

/** The environment twin of `--max-source-bytes`. */
export const MAX_SOURCE_BYTES_ENV = 'KITCHEN_MAX_SOURCE_BYTES';

/** The smallest cap taken: below 1 KiB not even an image's header fits. */
export const MIN_SOURCE_BYTES = 1024;

/** Multipliers of the size units, by the unit lower-cased. Binary all: `50M` is 50 × 2^20. */
const UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** What a size refusal says it expected. */
const SIZE_WORDS = `a whole number of bytes of at least ${MIN_SOURCE_BYTES}, or a size with a unit K, M or G (1024-based) such as 50M`;

/**
 * A size as a person writes it (`209715200`, `512K`, `50M`, `1.5G`, `2GiB`, `100MB`) in bytes,
 * refused under `name` (the flag or variable as typed) when it is not one or is under 1 KiB. `KB`,
 * `MB`, `GB` are read as the binary units, as most tools that take sizes on a command line do.
 */
export function parseByteSize(name: string, raw: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(raw);
  const unit = match ? UNITS[match[2]!.toLowerCase()] : undefined;
  const bytes = match && unit !== undefined ? Math.floor(Number(match[1]) * unit) : Number.NaN;
  // A fraction of a byte (`1.5` with no unit) is not a size anyone means.
  const whole = unit !== 1 || /^\s*\d+\s*[a-z]*\s*$/i.test(raw);
  if (!whole || !Number.isSafeInteger(bytes) || bytes < MIN_SOURCE_BYTES) {
    throw new OptionError(name, SIZE_WORDS, raw);
  }
  return bytes;
}

/** `--max-source-bytes`'s value in bytes, or undefined when the flag is absent. */
export function byteSizeFlag(name: string, raw: string | undefined): number | undefined {
  return raw === undefined ? undefined : parseByteSize(`--${name}`, raw);
}

/**
 * The access a command reads sources with: each field as given (checked, named through `label`),
 * else from `env` (the given one, else `process.env`), else the default: 200 MiB, private addresses
 * refused. The environment is read only for a field not given, so a flag wins over a bad variable.
 * @throws {OptionError} (exit 2) for a value that is not one.
 */
export function resolveSourceAccess(
  input: Partial<SourceAccess> | undefined,
  label: OptionLabel = (p) => p,
): SourceAccess {
  if (input !== undefined && (typeof input !== 'object' || input === null)) {
    throw new OptionError(label('sources'), 'an object', input);
  }
  const given = input ?? {};
  if (given.env !== undefined && (typeof given.env !== 'object' || given.env === null)) {
    throw new OptionError(label('sources.env'), 'an object of environment variables', given.env);
  }
  const env = given.env ?? process.env;
  const fromEnv = env[MAX_SOURCE_BYTES_ENV];
  const maxBytes =
    given.maxBytes !== undefined
      ? wholeNumber(
          label('sources.maxBytes'),
          given.maxBytes,
          { min: MIN_SOURCE_BYTES },
          DEFAULT_MAX_SOURCE_BYTES,
        )
      : fromEnv !== undefined && fromEnv.trim() !== ''
        ? parseByteSize(MAX_SOURCE_BYTES_ENV, fromEnv)
        : DEFAULT_MAX_SOURCE_BYTES;
  const allowPrivate =
    given.allowPrivate !== undefined
      ? flag(label('sources.allowPrivate'), given.allowPrivate, false)
      : allowPrivateFromEnv(env);
  return { maxBytes, allowPrivate, env, ...(given.onStoreOp ? { onStoreOp: given.onStoreOp } : {}) };
}

/** Where a resolved access came from, for the log (no value of the environment but these two). */
export function describeSourceAccess(access: SourceAccess): {
  max_source_bytes: number;
  allow_private: boolean;
} {
  return { max_source_bytes: access.maxBytes, allow_private: access.allowPrivate };
}
