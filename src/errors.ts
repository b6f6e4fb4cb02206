/**
 * The one error model of kitchen-batch. Every error the tool raises on purpose is a
 * {@link KitchenError} with a stable string `code`; the CLI maps the classes below to exit codes in
 * one place (`src/cli.ts`). API errors live in `src/api/errors.ts` and extend the same base.
 */

/** Base class: a stable machine-readable `code`, a message in words, and an optional `cause`. */
export class KitchenError extends Error {
  /** Stable, machine-readable code (snake_case). */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Bad flags, options out of range, missing configuration: exit 2, nothing submitted. */
export class UsageError extends KitchenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('usage', message, options);
  }
}

/** Where in a file a problem sits (1-based). */
export interface FilePosition {
  file: string;
  line?: number;
  column?: number;
}

/** Formats `file:line:column` with whatever parts are known. */
export function formatPosition(pos: FilePosition): string {
  let s = pos.file;
  if (pos.line !== undefined) s += `:${pos.line}`;
  if (pos.line !== undefined && pos.column !== undefined) s += `:${pos.column}`;
  return s;
}

/** The manifest cannot be read as a whole (bad quoting, bad JSON, no image column, duplicate ids): exit 2. */
export class ManifestError extends KitchenError {
  readonly position: FilePosition;

  constructor(position: FilePosition, message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? 'manifest_error', `${formatPosition(position)}: ${message}`, options);
    this.position = position;
  }
}

/** The run's state cannot be trusted or written (journal corrupt mid-file, lock held, disk full): exit 2. */
export class StateError extends KitchenError {}

/** The service refused the run (401/403) or stayed unreachable: exit 3, state saved. */
export class ServiceRefusedError extends KitchenError {}

/** The worker mode's Redis cannot be reached (or stopped answering): exit 3, as an unreachable service. */
export class RedisUnreachableError extends KitchenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('redis_unreachable', message, options);
  }
}

/**
 * The worker mode's Redis refused the credentials in its URL (a wrong password or user, or none where
 * one is required): exit 3, as a refused API key. The message names the server with the password
 * shown as `***`.
 */
export class RedisAuthError extends KitchenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('redis_auth_failed', message, options);
  }
}

/**
 * A downloaded result that does not decode as an image (a body cut short without any transport
 * error, or garbage behind valid magic bytes). Local evidence, not a service answer: retried like
 * a failed download, and the item is `incomplete/download_failed` when retries run out.
 */
export class ResultDecodeError extends KitchenError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('bad_result', message, options);
  }
}

/** SIGINT/SIGTERM: exit 130, state saved. */
export class InterruptedError extends KitchenError {
  constructor(signal: string) {
    super('interrupted', `interrupted by ${signal}`);
  }
}

/**
 * The run stopped early on a local problem (disk full, journal unwritable) after jobs had already
 * been submitted: exit 1 (items are incomplete, a rerun finishes them), not 2, which promises that
 * nothing was submitted.
 */
export class PartialRunError extends KitchenError {}

/** Exit codes (docs/contract.md#exit-codes). */
export const EXIT = {
  ok: 0,
  partial: 1,
  usage: 2,
  service: 3,
  interrupted: 130,
} as const;

/** Maps any thrown value to its exit code (docs/contract.md#exit-codes). */
export function exitCodeFor(error: unknown): number {
  if (error instanceof InterruptedError) return EXIT.interrupted;
  if (
    error instanceof ServiceRefusedError ||
    error instanceof RedisUnreachableError ||
    error instanceof RedisAuthError
  ) {
    return EXIT.service;
  }
  if (error instanceof PartialRunError) return EXIT.partial;
  if (error instanceof UsageError || error instanceof ManifestError || error instanceof StateError) {
    return EXIT.usage;
  }
  // An unexpected bug: not 1, which means "some items did not succeed".
  return EXIT.usage;
}
