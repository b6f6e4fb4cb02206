/** Public shapes of the sandbox: its options, its live statistics and the handle tests hold. */
import type { BadResult, SandboxFaults } from './faults.js';
import type { ResultMode } from './images.js';
import type { StylesShape } from './style-catalogue.js';

/** Options of {@link startSandbox}. */
export interface SandboxOptions {
  /**
   * Interface to listen on.
   * @default '127.0.0.1'
   */
  host?: string;
  /**
   * Port to listen on; 0 picks a free one.
   * @default 0
   */
  port?: number;
  /**
   * The Bearer key every `/v1/*` request must carry. `null` accepts any non-empty Bearer token
   * (`run --sandbox` passes its own random key anyway).
   * @default 'sandbox-key'
   */
  apiKey?: string | null;
  /**
   * Mean time a job spends processing, in milliseconds.
   * @default 1500
   */
  processingMs?: number;
  /**
   * Uniform ± jitter on the processing time, in milliseconds.
   * @default 500
   */
  jitterMs?: number;
  /**
   * Time a job spends `queued` before it starts processing, in milliseconds.
   * @default min(300, processingMs / 4)
   */
  queuedMs?: number;
  /**
   * Seed of the PRNG behind fault rolls and jitter, so a sequence of faults can be replayed. Job
   * ids and storage tokens never come from it (they use crypto and stay unguessable).
   * @default a random seed
   */
  seed?: number;
  /**
   * Initial fault knobs (all off by default); change them later with {@link Sandbox.setFaults}.
   * @default {}
   */
  faults?: Partial<SandboxFaults>;
  /**
   * Shape of the `GET /v1/styles` response.
   * @default 'wrapped-objects'
   */
  stylesShape?: StylesShape;
  /**
   * Receives one line per request (method, path, status, time). Never sees the Authorization value.
   * @default no logging
   */
  logger?: (line: string) => void;
  /**
   * Jobs kept in memory (with their result images); the oldest are forgotten beyond this, and
   * polling a forgotten job answers 404.
   * @default 1000
   */
  maxJobs?: number;
  /**
   * How results are made: `render` styles the upload with sharp (visibly different per style);
   * `render-once` does so once per upload and style and keeps the result (every result in
   * memory), so a repeated job costs no image work; `echo` returns the upload itself, with no
   * image work, so a benchmark measures the client.
   * @default 'render'
   */
  results?: ResultMode;
}

/** One request the sandbox received (service and storage alike). */
export interface SandboxRequestRecord {
  method: string;
  /** Path without the query string. */
  path: string;
  /** Status sent; 0 while unanswered, or when the request was reset or hung. */
  status: number;
  /** `performance.now()` when the request arrived. */
  at: number;
  /** Whether an Authorization header was present (its value is never stored). */
  hasAuthorization: boolean;
  /** The fault injected into this request, if any (`reset`, `hang`, `rate-limit`, `error`, ...). */
  fault?: string;
  /** The job a submission created (polls name theirs in the path). */
  jobId?: string;
}

/** One request to the result storage, with every header, so tests can assert no key reached it. */
export interface StorageRequestRecord {
  path: string;
  /** `primary` is the sandbox's own origin; `secondary` the redirect target of `redirect-cross-origin`. */
  origin: 'primary' | 'secondary';
  headers: Record<string, string | string[] | undefined>;
}

/** Live counters; the object is mutated in place, so a reference stays current. */
export interface SandboxStats {
  /** Every request, in order of arrival. */
  requests: SandboxRequestRecord[];
  /** Every request to `/storage/*`, on either origin, with all its headers. */
  storageRequests: StorageRequestRecord[];
  /** Create requests (`POST /v1/modules/*`) received, whatever their outcome. */
  creates: number;
  /**
   * Jobs created per item, keyed `${sha256(image bytes)}|${module}|${style ?? ''}`. Counts every
   * create that passed validation and created a job, including those whose response was then
   * lost to a reset: a value above 1 means the client submitted that item twice.
   */
  createsByItem: Map<string, number>;
  /** `performance.now()` of each poll, per job id as it appeared in the path. */
  polls: Map<string, number[]>;
  /** 429 responses sent. */
  rateLimited: number;
  /** Jobs created. */
  jobs: number;
  /** Jobs that hand out a bad result on purpose (`badResultRate`), by job id: which kind. */
  badResults: Map<string, BadResult>;
}

/** A running sandbox. */
export interface Sandbox {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:43123`. */
  url: string;
  port: number;
  /** The key required, or `null` when any Bearer token is accepted. */
  apiKey: string | null;
  /** Live counters. */
  stats: SandboxStats;
  /** Changes fault knobs at run time; unspecified knobs keep their current values. */
  setFaults(faults: Partial<SandboxFaults>): void;
  /** Clears the statistics (jobs and results are kept). */
  reset(): void;
  /** Closes both servers and destroys every open socket, hung ones included. */
  close(): Promise<void>;
}
