/**
 * The sandbox's job state machine: jobs are created with a processing time and a fate, read as
 * queued -> processing -> succeeded / failed (or processing forever when stuck), and a succeeded
 * job hands out result URLs whose tokens expire and rotate. Clocks and the PRNG are injected, so
 * the whole timeline can be driven by a fake clock in unit tests; nothing here does HTTP.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ModuleId } from '../types.js';
import { isoWithOffset } from '../util/time.js';
import { type BadResult, roll, type SandboxFaults } from './faults.js';
import { badResult, echoResult, type RenderedImage, type ResultMode, renderResult } from './images.js';

/** The knobs the state machine reads; read again on every call, so `setFaults` applies at once. */
export type JobFaults = Pick<
  SandboxFaults,
  | 'failRate'
  | 'stuckRate'
  | 'failCode'
  | 'failMessage'
  | 'resultTtlMs'
  | 'dateSkewMs'
  | 'badResultRate'
  | 'badResults'
>;

/** Options of {@link JobStore}. */
export interface JobStoreOptions {
  /** Mean processing time, in milliseconds. */
  processingMs: number;
  /** Uniform ± jitter on the processing time, in milliseconds. */
  jitterMs: number;
  /** Time a job stays `queued` before it starts processing, in milliseconds. */
  queuedMs: number;
  /** Jobs kept; the oldest are forgotten (with their result URLs) beyond this. */
  maxJobs: number;
  /** How results are made. @default 'render' */
  results?: ResultMode;
  /** Monotonic milliseconds; drives the state machine and the URL expiry. */
  now: () => number;
  /** Wall-clock milliseconds since the epoch; only the timestamps shown in a job use it. */
  wallNow: () => number;
  /** PRNG in [0, 1) for the jitter and the fate rolls (the sandbox shares its seeded one). */
  rng: () => number;
  /** The current fault knobs. */
  faults: () => JobFaults;
}

/** How a job ends, decided when it is created. */
export type JobFate = 'succeed' | 'fail' | 'stuck';

/** One job as the store keeps it. */
export interface JobRecord {
  id: string;
  module: ModuleId;
  style: string | null;
  /** Wall clock at creation (ms since epoch), for timestamps. */
  createdWall: number;
  /** Monotonic times that drive the state machine. */
  createdAt: number;
  queuedUntil: number;
  doneAt: number;
  fate: JobFate;
  /** A bad result handed out on purpose (`badResultRate`), if this job was picked. */
  bad?: BadResult;
  result?: RenderedImage;
  renderError?: string;
  renderedAt?: number;
  /** Settles once the render finished (at once for a job that never renders). */
  rendered: Promise<void>;
  /** The current storage token and when it was issued (monotonic). */
  token?: { value: string; issuedAt: number };
  /** Every token ever issued for this job, so eviction can forget them all. */
  tokens: string[];
}

/** A job as the service shows it (`job` of a create or poll answer), in wire key order. */
export interface JobView {
  id: string;
  module: ModuleId;
  created_at: string;
  status: 'queued' | 'processing' | 'succeeded' | 'failed';
  updated_at: string;
  error?: { code: string; message: string };
  result?: { image_url: string };
  processing_time_ms?: number;
}

/** What a storage path leads to. */
export type ResultLookup =
  | { kind: 'ok'; job: JobRecord; result: RenderedImage }
  /** Unknown token, a job that was forgotten or has no result, or the wrong file name. */
  | { kind: 'not-found' }
  /** The token is known but older than `resultTtlMs`. */
  | { kind: 'expired' };

/** Jobs of one sandbox, in creation order (the order eviction follows). */
export class JobStore {
  private readonly jobs = new Map<string, JobRecord>();
  private readonly tokens = new Map<string, { jobId: string; issuedAt: number }>();

  /** `render-once` results by upload (sha256), module and style. */
  private readonly kept = new Map<string, Promise<RenderedImage>>();

  constructor(private readonly options: JobStoreOptions) {}

  /** The result of a job that succeeds as it should, made as {@link JobStoreOptions.results} says. */
  private goodResult(module: ModuleId, style: string | null, image: Uint8Array): Promise<RenderedImage> {
    if (this.options.results === 'echo') return echoResult(image);
    if (this.options.results !== 'render-once') return renderResult(image, module, style);
    const key = `${module}|${style ?? ''}|${createHash('sha256').update(image).digest('hex')}`;
    let made = this.kept.get(key);
    if (!made) {
      made = renderResult(image, module, style);
      // A failed render is not kept: the next job tries again, as with `render`.
      made.catch(() => this.kept.delete(key));
      this.kept.set(key, made);
    }
    return made;
  }

  /**
   * Creates a job and starts rendering its result when it is to succeed. Draws from the PRNG in a
   * fixed order (jitter, then the fail roll, then the stuck roll) so a seed replays the same fates.
   */
  create(module: ModuleId, style: string | null, image: Uint8Array): JobRecord {
    const { now, rng, processingMs, jitterMs, queuedMs } = this.options;
    const at = now();
    const faults = this.options.faults();
    const processing = Math.max(0, processingMs + (rng() * 2 - 1) * jitterMs);
    const fate: JobFate = roll(rng, faults.failRate)
      ? 'fail'
      : roll(rng, faults.stuckRate)
        ? 'stuck'
        : 'succeed';
    const job: JobRecord = {
      id: `job_${randomBytes(12).toString('hex')}`,
      module,
      style,
      createdWall: this.options.wallNow(),
      createdAt: at,
      queuedUntil: at + queuedMs,
      doneAt: at + queuedMs + processing,
      fate,
      rendered: Promise.resolve(),
      tokens: [],
    };
    if (fate === 'succeed') {
      // Drawn only when asked for, so seeds of runs without bad results replay as before.
      if (roll(rng, faults.badResultRate) && faults.badResults.length > 0) {
        job.bad = faults.badResults[Math.floor(rng() * faults.badResults.length)]!;
      }
      // Rendering starts now; a job whose render is still running reads as processing.
      const render = job.bad
        ? badResult(job.bad, image, module, style, rng)
        : this.goodResult(module, style, image);
      job.rendered = render.then(
        (result) => {
          job.result = result;
          job.renderedAt = now();
        },
        (error: unknown) => {
          job.renderError = error instanceof Error ? error.message : String(error);
          job.renderedAt = now();
        },
      );
    }
    this.jobs.set(job.id, job);
    this.evictOldJobs();
    return job;
  }

  /** The job with this id, unless it never existed or was evicted. */
  get(id: string): JobRecord | undefined {
    return this.jobs.get(id);
  }

  /**
   * The job as the spec shows it, at this moment. Not a pure read: a succeeded job whose URL
   * token is missing or expired gets a fresh one, so every poll hands out a working URL.
   * `baseUrl` is the service origin the result URL points at; `moment` (monotonic) is the time to
   * show, now by default: the create answer shows the job at its creation (always `queued`).
   */
  view(job: JobRecord, baseUrl: string, moment: number = this.options.now()): JobView {
    const now = moment;
    const faults = this.options.faults();
    const stamp = (wall: number) => isoWithOffset(new Date(wall + faults.dateSkewMs));
    const at = (monotonic: number) => stamp(job.createdWall + (monotonic - job.createdAt));
    const base = { id: job.id, module: job.module, created_at: stamp(job.createdWall) };
    if (now < job.queuedUntil) return { ...base, status: 'queued', updated_at: base.created_at };
    const rendering = job.fate === 'succeed' && job.renderedAt === undefined;
    if (job.fate === 'stuck' || now < job.doneAt || rendering) {
      return { ...base, status: 'processing', updated_at: at(job.queuedUntil) };
    }
    const finished = Math.max(job.doneAt, job.renderedAt ?? 0);
    if (job.fate === 'fail' || job.renderError !== undefined || !job.result) {
      const error =
        job.fate === 'fail'
          ? { code: faults.failCode, message: faults.failMessage }
          : {
              code: 'invalid_image',
              message: `the image could not be decoded: ${job.renderError ?? 'unknown'}`,
            };
      return { ...base, status: 'failed', updated_at: at(finished), error };
    }
    return {
      ...base,
      status: 'succeeded',
      updated_at: at(finished),
      result: { image_url: `${baseUrl}/storage/${this.currentToken(job)}/${job.id}.${job.result.ext}` },
      processing_time_ms: Math.round(finished - job.queuedUntil),
    };
  }

  /**
   * Resolves the `<token>/<file>` of a storage path. An expired token stays known (it answers
   * 410, not 404) until its job is evicted, while a poll hands out a new one meanwhile.
   */
  lookupResult(token: string, file: string | undefined): ResultLookup {
    const entry = this.tokens.get(token);
    const job = entry ? this.jobs.get(entry.jobId) : undefined;
    const result = job?.result;
    if (!entry || !job || !result || file !== `${job.id}.${result.ext}`) return { kind: 'not-found' };
    const ttl = this.options.faults().resultTtlMs;
    if (ttl !== null && this.options.now() - entry.issuedAt >= ttl) return { kind: 'expired' };
    return { kind: 'ok', job, result };
  }

  /** The job's current URL token; a missing or expired one is replaced first. */
  private currentToken(job: JobRecord): string {
    const now = this.options.now();
    const ttl = this.options.faults().resultTtlMs;
    if (!job.token || (ttl !== null && now - job.token.issuedAt >= ttl)) {
      const value = randomBytes(16).toString('hex');
      job.token = { value, issuedAt: now };
      job.tokens.push(value);
      this.tokens.set(value, { jobId: job.id, issuedAt: now });
    }
    return job.token.value;
  }

  private evictOldJobs(): void {
    while (this.jobs.size > this.options.maxJobs) {
      const oldest = this.jobs.keys().next();
      if (oldest.done) return;
      const job = this.jobs.get(oldest.value);
      for (const token of job?.tokens ?? []) this.tokens.delete(token);
      this.jobs.delete(oldest.value);
    }
  }
}
