/**
 * The run's Prometheus metrics, fed from the run's event stream (`pipeline/events.ts`) so that no
 * stage has to know about them. A registry of our own (never prom-client's global one), so an
 * embedding program's metrics and ours never mix. Labels come from a fixed vocabulary (outcome, an
 * error code), never from data: no item id, no URL, no key.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { RunEvent } from '../pipeline/events.js';
import type { StoreOp } from '../storage/counted.js';

/** Outcomes an item can end with in this run, as `kitchen_batch_items_total{outcome}` labels. */
const FINAL = new Set(['succeeded', 'failed', 'rejected', 'incomplete', 'skipped']);

/** The metrics of one run and the handler that keeps them current. */
export class RunMetrics {
  /** The registry to expose, push or write; holds the process metrics too. */
  readonly registry = new Registry();
  private readonly items: Counter<'outcome' | 'code'>;
  private readonly submissions: Counter;
  private readonly requests: Counter<'endpoint' | 'status'>;
  private readonly rateLimited: Counter;
  private readonly retries: Counter;
  private readonly warnings: Counter;
  private readonly rate: Gauge;
  private readonly rateUsed: Gauge;
  private readonly inFlight: Gauge;
  private readonly jobSeconds: Histogram;
  private readonly lastSuccess: Gauge;
  private readonly needsReview: Gauge;
  private readonly storeOps: Counter<'store' | 'kind' | 'op'>;
  private readonly storeErrors: Counter<'store' | 'kind' | 'op'>;
  /** Submission times by item id, to time jobs; ids never become labels. */
  private readonly submittedAt = new Map<string, number>();
  /** The last cumulative counts seen in a progress event, to turn them into counter increments. */
  private seen = { requests: 0, rateLimited: 0, retries: 0 };

  constructor(version: string, now: () => number = Date.now) {
    this.now = now;
    const registers = [this.registry];
    // Prefixed: node_exporter's textfile collector merges this into its own output, which has
    // process_* series of its own.
    collectDefaultMetrics({ register: this.registry, prefix: 'kitchen_batch_' });
    // prom-client names these gauges `_total`, which `promtool check metrics` refuses.
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
      this.registry.removeSingleMetric(`kitchen_batch_nodejs_${name}`);
    }
    new Gauge({
      name: 'kitchen_batch_build_info',
      help: 'Always 1; the version of kitchen-batch that ran, as a label.',
      labelNames: ['version'],
      registers,
    }).set({ version }, 1);
    this.items = new Counter({
      name: 'kitchen_batch_items_total',
      help: 'Items ended in this run by outcome and error code (code "" when it succeeded).',
      labelNames: ['outcome', 'code'],
      registers,
    });
    this.submissions = new Counter({
      name: 'kitchen_batch_submissions_total',
      help: 'Jobs submitted and accepted (202) in this run: the paid submissions.',
      registers,
    });
    this.requests = new Counter({
      name: 'kitchen_batch_api_requests_total',
      help: 'Requests to the service in this run by endpoint (styles, submit, poll, download) and answer (2xx, 4xx, 5xx, network).',
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'kitchen_batch_api_rate_limited_total',
      help: 'Service answers 429 (rate limited) in this run.',
      registers,
    });
    this.retries = new Counter({
      name: 'kitchen_batch_api_retries_total',
      help: 'Service requests retried in this run.',
      registers,
    });
    this.warnings = new Counter({
      name: 'kitchen_batch_warnings_total',
      help: 'Warnings the run reported.',
      registers,
    });
    this.rate = new Gauge({
      name: 'kitchen_batch_request_rate_allowed_per_second',
      help: 'The request rate the governor allows now (learnt from 429s), per second.',
      registers,
    });
    this.rateUsed = new Gauge({
      name: 'kitchen_batch_request_rate_used_per_second',
      help: 'Requests per second the run has made on average so far.',
      registers,
    });
    this.inFlight = new Gauge({
      name: 'kitchen_batch_jobs_in_flight',
      help: 'Jobs submitted and not yet ended.',
      registers,
    });
    this.jobSeconds = new Histogram({
      name: 'kitchen_batch_job_duration_seconds',
      help: 'Time from a submission to the end of its item, in seconds.',
      buckets: [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers,
    });
    this.needsReview = new Gauge({
      name: 'kitchen_batch_review_flagged_items',
      help: "Results the review flagged as worth a look (report.json's totals.needs_review), set when the run ends.",
      registers,
    });
    this.storeOps = new Counter({
      name: 'kitchen_batch_store_requests_total',
      help: 'Operations on the stores: store source or output, kind file, http or s3, op the operation (open, put, get...).',
      labelNames: ['store', 'kind', 'op'],
      registers,
    });
    this.storeErrors = new Counter({
      name: 'kitchen_batch_store_errors_total',
      help: 'Store operations that failed (a missing source included), by store, kind and op.',
      labelNames: ['store', 'kind', 'op'],
      registers,
    });
    this.lastSuccess = new Gauge({
      name: 'kitchen_batch_last_success_timestamp_seconds',
      help: 'When a run last ended with exit 0 (Unix seconds).',
      registers: [],
    });
  }

  private readonly now: () => number;

  /** Feeds one run event into the metrics; pass it as (part of) the run's `onEvent`. */
  readonly handle = (event: RunEvent): void => {
    switch (event.type) {
      case 'item':
        this.item(event.id, event.status, event.error?.code);
        break;
      case 'progress': {
        const { requests, rateLimited, retries, rate, elapsedMs } = event.counts;
        // 429s and retries come as running totals; requests come one by one ('request' events).
        this.rateLimited.inc(Math.max(0, rateLimited - this.seen.rateLimited));
        this.retries.inc(Math.max(0, retries - this.seen.retries));
        this.seen = { requests, rateLimited, retries };
        this.rate.set(rate);
        if (elapsedMs > 0) this.rateUsed.set(requests / (elapsedMs / 1000));
        break;
      }
      case 'request':
        this.requests.inc({ endpoint: event.endpoint, status: event.status });
        break;
      case 'rate':
        this.rate.set(event.rate);
        break;
      case 'warning':
        this.warnings.inc();
        break;
      default:
        break;
    }
  };

  private item(id: string, status: string, code: string | undefined): void {
    if (status === 'submitted') {
      this.submissions.inc();
      this.submittedAt.set(id, this.now());
      this.inFlight.set(this.submittedAt.size);
      return;
    }
    if (!FINAL.has(status)) return;
    this.items.inc({ outcome: status, code: code ?? '' });
    const at = this.submittedAt.get(id);
    if (at !== undefined) {
      this.jobSeconds.observe((this.now() - at) / 1000);
      this.submittedAt.delete(id);
      this.inFlight.set(this.submittedAt.size);
    }
  }

  /** Counts one store operation; pass it as the sources' `onStoreOp`. Labels are a fixed vocabulary. */
  readonly store = (op: StoreOp): void => {
    const labels = { store: op.store, kind: op.kind, op: op.op };
    this.storeOps.inc(labels);
    if (!op.ok) this.storeErrors.inc(labels);
  };

  /** The run's final totals: what only the report knows (the review's flags). */
  finished(totals: { needs_review: number }): void {
    this.needsReview.set(totals.needs_review);
  }

  /** The whole set in Prometheus text format. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * The success timestamp alone, in text format: sent only after exit 0 and never part of
   * {@link text}, so a failed run has nothing that could overwrite it.
   */
  async successText(atMs: number = this.now()): Promise<string> {
    const only = new Registry();
    only.registerMetric(this.lastSuccess);
    this.lastSuccess.set(Math.floor(atMs / 1000));
    return only.metrics();
  }
}
