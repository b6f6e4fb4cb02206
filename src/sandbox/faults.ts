/**
 * Fault knobs of the sandbox (docs/faults.md, "Fault knobs the sandbox should offer") and the small
 * machinery they need: a seeded PRNG so a run's fault rolls can be replayed, and a token bucket.
 */

/** Which requests a per-request fault applies to. `all` means every `/v1/*` request. */
export type FaultScope = 'create' | 'poll' | 'all';

/** How a 429's `Retry-After` header is written. */
export type RetryAfterMode =
  /** Integer seconds until a token is available, at least 1. */
  | 'seconds'
  /** An HTTP-date, measured against the (possibly skewed) `Date` header of the same response. */
  | 'date'
  /** No header at all. */
  | 'none'
  /** An unreadable value (`soon`). */
  | 'garbage';

/** What goes wrong with a result download. */
export type ResultFault =
  /** 404 although the job said succeeded. */
  | 'not-found'
  /** Content-Length of the whole image, half the bytes, then the socket is destroyed. */
  | 'truncated'
  /**
   * No Content-Length: half the bytes, then the connection closes normally. The body's end is the
   * connection's, so the client sees no error: only decoding the image can tell it is cut.
   */
  | 'truncated-unsized'
  /** 200 with an HTML page. */
  | 'wrong-type'
  /** 302 to a second origin (another port) that serves the image and records the request headers. */
  | 'redirect-cross-origin'
  /** The image trickles out slowly (512 bytes every 250 ms). */
  | 'slow-drip'
  /** A body far larger than any image (the real image followed by padding). */
  | 'oversized';

/** Every fault knob. All default to off; probabilities are 0..1 and rolled per request or per job. */
export interface SandboxFaults {
  /**
   * Token bucket over every `/v1/*` request (never `/storage`); an empty bucket answers 429.
   * @default null
   */
  rateLimit: { rps: number; burst: number } | null;
  /**
   * How 429 responses carry `Retry-After`.
   * @default 'seconds'
   */
  retryAfter: RetryAfterMode;
  /**
   * Probability of an extra random 429 on any `/v1/*` request (Retry-After 1 s in the chosen mode).
   * @default 0
   */
  rate429: number;
  /**
   * Probability of a random 5xx (no job is created by a create that answers 5xx).
   * @default 0
   */
  errorRate: number;
  /**
   * Statuses a random 5xx picks from, uniformly.
   * @default [500, 502, 503, 504]
   */
  errorStatuses: number[];
  /**
   * Which requests `errorRate` applies to.
   * @default 'all'
   */
  errorOn: FaultScope;
  /**
   * Probability that the connection is reset with a TCP RST.
   * @default 0
   */
  resetRate: number;
  /**
   * When the reset happens: before the request body is fully read (no job is created), or after
   * it was read and, for creates, after the job WAS created (the ambiguous case).
   * @default 'after-body'
   */
  resetWhen: 'mid-upload' | 'after-body';
  /**
   * Which requests `resetRate` applies to.
   * @default 'all'
   */
  resetOn: FaultScope;
  /**
   * Probability that a request is accepted and never answered (the socket stays open until the
   * client gives up or the sandbox closes). A hung create does not create a job.
   * @default 0
   */
  hangRate: number;
  /**
   * Which requests `hangRate` applies to.
   * @default 'all'
   */
  hangOn: FaultScope;
  /**
   * Delay added before every response, in milliseconds.
   * @default 0
   */
  slowMs: number;
  /**
   * Probability that a job ends `failed`.
   * @default 0
   */
  failRate: number;
  /**
   * `error.code` of a failed job.
   * @default 'generation_failed'
   */
  failCode: string;
  /**
   * `error.message` of a failed job.
   * @default 'The model could not generate an image for this input.'
   */
  failMessage: string;
  /**
   * Probability that a job stays `processing` forever.
   * @default 0
   */
  stuckRate: number;
  /**
   * Probability that a poll answers `status: "exploded"` (a value outside the spec).
   * @default 0
   */
  badStatusRate: number;
  /**
   * Probability that a poll answers 200 with invalid JSON or a job missing `id`/`status`.
   * @default 0
   */
  malformedRate: number;
  /**
   * Probability that a poll of a known job answers 404 (as if purged).
   * @default 0
   */
  pollNotFoundRate: number;
  /**
   * Age after which a result URL answers 410 `expired`; a poll of the job then hands out a fresh URL.
   * `null` means URLs never expire.
   * @default null
   */
  resultTtlMs: number | null;
  /**
   * What goes wrong with result downloads; `null` means nothing.
   * @default null
   */
  resultFault: ResultFault | null;
  /**
   * Probability that a result download suffers `resultFault`.
   * @default 1
   */
  resultFaultRate: number;
  /**
   * Probability that a job that succeeds hands out a bad result on purpose (issue 15: the review is
   * tested and shown with these): one of `badResults`, picked at random.
   * @default 0
   */
  badResultRate: number;
  /**
   * The bad results to pick from: `blank` (uniform grey), `rotated` (a quarter turn), `mirrored`,
   * `cropped` (to another aspect), `unrelated` (another scene), `unchanged` (the upload itself).
   * @default all six
   */
  badResults: readonly BadResult[];
  /**
   * Skew of the `Date` response header and of the job timestamps, in milliseconds (Retry-After
   * dates are computed against the skewed Date).
   * @default 0
   */
  dateSkewMs: number;
  /**
   * Every create answers this status and error code (e.g. 403 `forbidden`); `null` means off.
   * @default null
   */
  failCreateWith: { status: number; code: string; message?: string } | null;
}

/** Results a bad job hands out on purpose (see `SandboxFaults.badResults`). */
export type BadResult = 'blank' | 'rotated' | 'mirrored' | 'cropped' | 'unrelated' | 'unchanged';
export const BAD_RESULTS: readonly BadResult[] = [
  'blank',
  'rotated',
  'mirrored',
  'cropped',
  'unrelated',
  'unchanged',
];

/** The defaults: every fault off. */
export const DEFAULT_FAULTS: Readonly<SandboxFaults> = Object.freeze({
  rateLimit: null,
  retryAfter: 'seconds',
  rate429: 0,
  errorRate: 0,
  errorStatuses: [500, 502, 503, 504],
  errorOn: 'all',
  resetRate: 0,
  resetWhen: 'after-body',
  resetOn: 'all',
  hangRate: 0,
  hangOn: 'all',
  slowMs: 0,
  failRate: 0,
  failCode: 'generation_failed',
  failMessage: 'The model could not generate an image for this input.',
  stuckRate: 0,
  badStatusRate: 0,
  malformedRate: 0,
  pollNotFoundRate: 0,
  resultTtlMs: null,
  resultFault: null,
  resultFaultRate: 1,
  badResultRate: 0,
  badResults: BAD_RESULTS,
  dateSkewMs: 0,
  failCreateWith: null,
} satisfies SandboxFaults);

/** Whether a fault scoped to `scope` applies to a request of kind `kind`. */
export function inScope(scope: FaultScope, kind: 'create' | 'poll' | 'other'): boolean {
  return scope === 'all' || scope === kind;
}

/**
 * mulberry32: tiny, fast and good enough for fault rolls. Seeded so a failing test's sequence of
 * rolls can be replayed; ids never come from here (they use crypto).
 */
export function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Whether a fault with this probability strikes. A probability of 0 draws nothing from `rng`, so
 * turning a knob off leaves the rolls of the others (and a seed's replay) unchanged.
 */
export function roll(rng: () => number, probability: number): boolean {
  return probability > 0 && rng() < probability;
}

/** A token bucket on the monotonic clock. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly rps: number,
    private readonly burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Takes a token; returns 0 on success, else the milliseconds until one is available. */
  take(now: number): number {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rps);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return this.rps > 0 ? ((1 - this.tokens) / this.rps) * 1000 : Number.POSITIVE_INFINITY;
  }
}

/**
 * The `Retry-After` value for a wait of `waitMs`, or `undefined` for mode `none`. `serverNow` is
 * the (skewed) time the response's `Date` header shows, so a date-mode value means the same wait
 * to a client that measures against that header.
 */
export function retryAfterValue(mode: RetryAfterMode, waitMs: number, serverNow: number): string | undefined {
  const seconds = Math.max(1, Math.ceil(Math.min(waitMs, 86_400_000) / 1000));
  switch (mode) {
    case 'seconds':
      return String(seconds);
    case 'date': {
      // HTTP-dates have whole seconds and the Date header is truncated too: round the target up so
      // `Retry-After - Date` is never shorter than the wait.
      const dateShown = Math.floor(serverNow / 1000) * 1000;
      return new Date(dateShown + seconds * 1000).toUTCString();
    }
    case 'garbage':
      return 'soon';
    case 'none':
      return undefined;
  }
}
