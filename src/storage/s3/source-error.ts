/**
 * COPY of src/storage/http/errors.ts on branch i32-fetch (the http(s) fetcher's error type), kept
 * identical so that the lead can unify the two on merge by deleting this file and importing that one.
 * The one difference: `AddressClass` is declared here (the fetcher's `address.ts` is not on this
 * branch); S3 errors never set it.
 */
import { KitchenError } from '../../errors.js';

/**
 * The outcome codes of a failed source fetch, as issue 32 names them (docs/contract.md):
 * - `file_not_found`: 404 or 410 (rejected).
 * - `source_forbidden`: 401 or 403 (rejected).
 * - `source_blocked`: the address guard, a URL with user:password, a non-http(s) URL or an
 *   https → http redirect (rejected; the message says whether `--allow-private-sources` would help).
 * - `too_large`: over `maxBytes` (rejected).
 * - `source_unavailable`: timeouts, resets, 5xx and 429 after the retries, too many redirects,
 *   any other unexpected status (incomplete: a rerun tries again).
 */
export type SourceErrorCode =
  | 'file_not_found'
  | 'source_forbidden'
  | 'source_blocked'
  | 'too_large'
  | 'source_unavailable';

/** Why, in more detail than the code: for logs, tests and the lead's mapping, not for users. */
export type SourceErrorReason =
  | 'status'
  | 'address'
  | 'credentials'
  | 'scheme'
  | 'downgrade'
  | 'redirects'
  | 'size'
  | 'timeout'
  | 'network';

/** Fields of a {@link SourceError}. */
export interface SourceErrorInit {
  code: SourceErrorCode;
  reason: SourceErrorReason;
  message: string;
  /** The HTTP status that decided it, when a response did. */
  status?: number;
  /** The refused address and its class, for `reason: 'address'`. */
  address?: string;
  addressClass?: AddressClass;
  /** How many requests were sent for this fetch (redirect hops and retries included). */
  attempts?: number;
  /** Low-level error code (ECONNRESET, ETIMEDOUT, …) when there was one. */
  errno?: string;
  cause?: unknown;
}

/**
 * A source (an http(s) URL named by the manifest) could not be fetched. The message never holds a
 * secret: URLs in it are redacted (`redactUrl`), and the fetcher sends no credentials to begin with.
 */
export class SourceError extends KitchenError {
  declare readonly code: SourceErrorCode;
  readonly reason: SourceErrorReason;
  readonly status: number | undefined;
  readonly address: string | undefined;
  readonly addressClass: AddressClass | undefined;
  readonly errno: string | undefined;
  /** Requests sent before giving up; set by the fetcher when the error leaves it. */
  attempts: number;

  constructor(init: SourceErrorInit) {
    super(init.code, init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.reason = init.reason;
    this.status = init.status;
    this.address = init.address;
    this.addressClass = init.addressClass;
    this.errno = init.errno;
    this.attempts = init.attempts ?? 0;
  }

  /** Whether a later run may succeed without anyone changing anything (issue 32's "incomplete"). */
  get retryLater(): boolean {
    return this.code === 'source_unavailable';
  }
}

/** What an IP address is, for the fetcher's address guard (the same union as i32-fetch's `address.ts`). */
export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'unspecified'
  | 'multicast'
  | 'broadcast'
  | 'metadata'
  | 'documentation'
  | 'benchmark'
  | 'reserved';
