/**
 * Every command of the CLI, declared once (usage, summary, flags with placeholder, help and default,
 * examples), from which parsing (`parse.ts`), `help <command>`, did-you-mean and the README's option
 * tables (`npm run docs:options`) come. It loads nothing heavy: the overview must not pull in BullMQ or sharp.
 */
import {
  CONCURRENCY,
  DEFAULT_MAX_SOURCE_BYTES,
  JOB_TIMEOUT_MS,
  MAX_SIDE,
  WORKER_GRACE_MS,
  WORKER_STALL_MS,
} from '../limits.js';
import { ENDPOINT_FLAGS, METRICS_FLAGS } from '../metrics/flags.js';
import type { OptionLabel } from '../pipeline/option-types.js';
import { DEFAULT_THRESHOLD } from '../review/flags.js';
import { SANDBOX_FLAGS } from '../sandbox/flags.js';
import type { ALLOW_PRIVATE_FLAG } from '../storage/http/guard.js';
import type { FlagTable } from '../util/flags.js';
import { QUEUE_FLAGS, RUN_REDIS } from '../worker/flags.js';

/** One command's page and flags. */
export interface CommandEntry {
  usage: string;
  /** The overview's line. */
  brief: string;
  summary: string;
  flags: FlagTable;
  examples: readonly string[];
}

/** Flags of every service-facing command. */
export const SERVICE_FLAGS = {
  sandbox: { type: 'boolean', help: 'start the built-in emulator and use it (no key or URL needed)' },
  'base-url': {
    type: 'string',
    sets: 'service.baseUrl',
    value: 'URL',
    help: 'the service root (or KITCHEN_API_BASE_URL)',
  },
  'api-key-file': {
    type: 'string',
    value: 'FILE',
    help: 'read the API key from FILE (or KITCHEN_API_KEY; never a plain flag)',
  },
} as const satisfies FlagTable;

const { sandbox, ...KEY_AND_URL } = SERVICE_FLAGS;

/** The address guard's flag as `storage/http/guard.ts` names it in its refusals, without dashes. */
type GuardFlag = typeof ALLOW_PRIVATE_FLAG extends `--${infer N}` ? N : never;

/** Flags of every command that reads remote sources (https, `s3://`): run, plan, enqueue, worker. */
export const SOURCE_FLAGS = {
  'max-source-bytes': {
    type: 'string',
    sets: 'sources.maxBytes',
    value: 'SIZE',
    help: 'a remote source (https, S3) over SIZE is refused unread (rejected/too_large): bytes, or K, M, G (1024-based), e.g. 50M (or KITCHEN_MAX_SOURCE_BYTES)',
    shown: `${DEFAULT_MAX_SOURCE_BYTES / 1024 ** 2}M`,
  },
  ['allow-private-sources' satisfies GuardFlag]: {
    type: 'boolean',
    sets: 'sources.allowPrivate',
    help: 'let sources on loopback and private addresses (10/8, 172.16/12, 192.168/16, fc00::/7) through the address guard, for an internal DAM (or KITCHEN_ALLOW_PRIVATE_SOURCES=1); link-local and metadata addresses stay refused',
  },
} as const satisfies FlagTable;

const CACHE_HELP = `with --out s3://...: the local cache folder (journal copy, run.log, prepared uploads; default ~/.cache/kitchen-batch/out/<hash of the URL>); the run's state is in the bucket`;

/** Flags of `run` and `plan`. */
export const RUN_FLAGS = {
  out: {
    type: 'string',
    sets: 'out',
    value: 'DIR',
    help: 'output folder, or a bucket prefix s3://bucket/prefix/ (results, reports and the run state in object storage)',
    shown: "output/<manifest name>, or output/<manifest file name> when that holds another manifest's run",
  },
  cache: { type: 'string', sets: 'cache', value: 'DIR', help: CACHE_HELP },
  concurrency: {
    type: 'string',
    sets: 'limits.concurrency',
    value: 'N',
    help: 'jobs in flight',
    shown: `${CONCURRENCY.default}`,
  },
  'retry-failed': {
    type: 'boolean',
    sets: 'resume.retryFailed',
    help: 'resubmit items whose job failed in an earlier run',
  },
  'retry-ambiguous': {
    type: 'boolean',
    sets: 'resume.retryAmbiguous',
    help: 'resend submissions whose outcome is unknown (possible duplicate charge)',
  },
  'job-timeout': {
    type: 'string',
    sets: 'limits.jobTimeoutMs',
    value: 'SECONDS',
    help: 'a job not ended by then is incomplete/job_timeout',
    shown: `${JOB_TIMEOUT_MS / 1000}`,
  },
  'max-submissions': {
    type: 'string',
    sets: 'limits.maxSubmissions',
    value: 'N',
    help: 'submit at most N new jobs in this run (cost guard)',
    shown: 'unlimited',
  },
  'max-duration': {
    type: 'string',
    sets: 'limits.maxDurationMs',
    value: 'DURATION',
    help: 'a window (45m, 6h, 1h30m): no new submissions after it, jobs in flight get a grace period (a quarter of it, at most 5 min), the rest is incomplete/max_duration; exit 1, a rerun continues',
    shown: 'unlimited',
  },
  'max-rate': {
    type: 'string',
    sets: 'limits.maxRate',
    value: 'R',
    help: 'at most R service requests per second (to split one key between jobs)',
    shown: 'none',
  },
  shard: {
    type: 'string',
    sets: 'limits.shard',
    value: 'K/N',
    help: 'run only part K of N (1-based) of the items',
    shown: 'all',
  },
  'keep-metadata': {
    type: 'boolean',
    sets: 'preflight.keepMetadata',
    help: 'send images as they are: EXIF/GPS, orientation tag and colour profile kept (default: upright 8-bit sRGB, no metadata)',
  },
  'strip-metadata': {
    type: 'boolean',
    sets: 'preflight.stripMetadata',
    help: '(the default now; accepted for old scripts)',
    shown: 'on',
  },
  'max-side': {
    type: 'string',
    sets: 'preflight.maxSide',
    value: 'PX',
    help: 'longest side of an uploaded image',
    shown: `${MAX_SIDE.default}`,
  },
  verify: {
    type: 'boolean',
    sets: 'resume.verify',
    help: 'hash every finished result on resume (default: size and mtime)',
  },
  'manifest-renamed': {
    type: 'boolean',
    sets: 'resume.manifestRenamed',
    help: "continue the output folder's run with this manifest although its last run was of another manifest file (renamed, moved or converted)",
  },
  'no-review': {
    type: 'boolean',
    sets: 'review.enabled',
    help: 'skip the review of each result against its source (on by default; flags results worth a look)',
  },
  review: { type: 'boolean', help: '(the default; accepted for old scripts)', shown: 'on' },
  'review-threshold': {
    type: 'string',
    sets: 'review.threshold',
    value: 'X',
    help: 'a review signal under X (0..1) flags the result',
    shown: `${DEFAULT_THRESHOLD}`,
  },
  'log-level': {
    type: 'string',
    sets: 'output.logLevel',
    value: 'LEVEL',
    help: 'run.log level: fatal|error|warn|info|debug|trace|silent',
    shown: 'info',
  },
  'no-progress': { type: 'boolean', help: 'no progress display on stderr' },
  ...SOURCE_FLAGS,
  verbose: {
    type: 'boolean',
    short: 'v',
    help: 'also print run.log on stderr as readable lines (the key never appears)',
  },
  json: {
    type: 'boolean',
    help: 'print the final summary as one JSON object on stdout (on a failure: {"exit_code", "error": {"code", "message"}})',
  },
  ...SERVICE_FLAGS,
} as const satisfies FlagTable;

/** Run option paths and the flag that sets each (the `sets` of `run`'s flags). */
const FLAG_OF_OPTION = new Map<string, string>(
  Object.entries(RUN_FLAGS).flatMap(([name, spec]) =>
    'sets' in spec ? [[spec.sets, `--${name}`] as const] : [],
  ),
);

/** Names a run option by the flag that sets it (or by its path when no flag does). */
export const flagLabel: OptionLabel = (optionPath) => FLAG_OF_OPTION.get(optionPath) ?? optionPath;

/** Flags of `report`. */
export const REPORT_FLAGS = {
  merge: { type: 'boolean', help: 'combine several shard folders into one report (needs --out)' },
  out: { type: 'string', value: 'DIR', help: 'where the merged (or --redis) report goes' },
  redis: { type: 'string', value: 'URL', help: "a worker run's reports, from Redis (contract: worker mode)" },
  queue: QUEUE_FLAGS.report,
  'no-html': { type: 'boolean', help: 'skip report.html' },
  cache: RUN_FLAGS.cache,
  json: { type: 'boolean', help: 'print the totals as one JSON object on stdout' },
} as const satisfies FlagTable;

/** Flags of `review`. */
export const REVIEW_FLAGS = {
  'review-threshold': RUN_FLAGS['review-threshold'],
  'no-html': REPORT_FLAGS['no-html'],
  cache: RUN_FLAGS.cache,
  'log-level': { type: 'string', value: 'LEVEL', help: 'run.log level', shown: 'info' },
  json: { type: 'boolean', help: 'print the summary as one JSON object on stdout' },
} as const satisfies FlagTable;

/** Flags of `styles`. */
export const STYLES_FLAGS = {
  json: { type: 'boolean', help: 'print them as JSON' },
  sandbox: { ...sandbox, help: 'ask the built-in emulator' },
  ...KEY_AND_URL,
} as const satisfies FlagTable;

/** Flags of `enqueue`. */
export const ENQUEUE_FLAGS = {
  redis: { type: 'string', value: 'URL', help: 'the Redis to queue in (or KITCHEN_REDIS_URL)' },
  queue: QUEUE_FLAGS.enqueue,
  out: {
    type: 'string',
    value: 'DIR',
    help: 'the shared output folder every worker writes to',
    shown: 'output/<manifest name>',
  },
  'retry-failed': {
    type: 'boolean',
    help: 'put back the items whose job failed at the service: the workers submit them again',
  },
  ...SOURCE_FLAGS,
  json: { type: 'boolean', help: 'print the counts as one JSON object' },
} as const satisfies FlagTable;

/** Flags of `status`. */
export const STATUS_FLAGS = {
  redis: RUN_REDIS,
  queue: QUEUE_FLAGS.status,
  json: { type: 'boolean', help: 'print it as one JSON object' },
} as const satisfies FlagTable;

/** Flags of `worker`: those it shares with `run` take the same values (docs/contract.md#worker-mode). */
export const WORKER_FLAGS = {
  redis: RUN_REDIS,
  queue: QUEUE_FLAGS.worker,
  concurrency: { ...RUN_FLAGS.concurrency, help: 'items this worker holds at once' },
  'until-drained': {
    type: 'boolean',
    help: "exit 0 once nothing is left in the queue, whatever the items' outcomes (a Kubernetes Job); default: wait for more",
  },
  'max-rate': { type: 'string', value: 'R', help: 'cap the shared request rate at R requests per second' },
  'stall-timeout': {
    type: 'string',
    value: 'SECONDS',
    help: 'a silent worker keeps its items this long before others take them',
    shown: `${WORKER_STALL_MS / 1000}`,
  },
  grace: {
    type: 'string',
    value: 'SECONDS',
    help: 'after SIGTERM, time for requests in flight before items are handed back',
    shown: `${WORKER_GRACE_MS / 1000}`,
  },
  'job-timeout': { ...RUN_FLAGS['job-timeout'], help: 'a job not ended by then is retried later' },
  'keep-metadata': { type: 'boolean', help: 'send images as they are (see run)' },
  'max-side': RUN_FLAGS['max-side'],
  'no-review': {
    type: 'boolean',
    help: "skip the review of each result against its source (see run; duplicates are found among this worker's results)",
  },
  'review-threshold': RUN_FLAGS['review-threshold'],
  ...SOURCE_FLAGS,
  'log-level': { ...RUN_FLAGS['log-level'], help: 'level of <out>/workers/<name>.log' },
  name: {
    type: 'string',
    value: 'NAME',
    help: 'the worker in status and its log file name',
    shown: '<hostname>-<pid>',
  },
  json: { type: 'boolean', help: 'print the summary as one JSON object' },
  ...ENDPOINT_FLAGS,
  ...KEY_AND_URL,
} as const satisfies FlagTable;

/** The commands, in the order the overview lists them. */
export const COMMANDS = {
  run: {
    brief: 'plan, preflight, submit, poll, download, report (resumes)',
    usage: 'kitchen-batch run <manifest> [options]',
    summary:
      'Plans, preflights, submits, polls and downloads every item of the manifest, then writes report.json, report.csv and report.html. Rerunning the same command resumes: nothing finished is paid for twice.',
    flags: { ...RUN_FLAGS, ...METRICS_FLAGS, ...ENDPOINT_FLAGS },
    examples: [
      'kitchen-batch run manifests/sample.csv --sandbox',
      'kitchen-batch run catalogue.csv --base-url https://api.example.com --out s3://kitchen-out/nightly/',
      'kitchen-batch run catalogue.csv --max-submissions 100 --json',
    ],
  },
  plan: {
    brief: 'everything up to submission; submits nothing',
    usage: 'kitchen-batch plan <manifest> [options]',
    summary:
      'Everything up to submission (manifest checks, preflight, what a run would do with each item); submits nothing. Exit 1 when items would be rejected.',
    flags: RUN_FLAGS,
    examples: ['kitchen-batch plan catalogue.csv', 'kitchen-batch plan catalogue.csv --json --out /data/out'],
  },
  report: {
    brief: "rebuild report.json/csv/html from a run's journal",
    usage: 'kitchen-batch report <out-dir> | report --merge <out-dir>... --out DIR | report --redis URL',
    summary:
      "Rebuilds report.json, report.csv and report.html from a run's journal, without the network; --merge combines the folders of several shards; --redis rebuilds a worker run's reports from Redis.",
    flags: REPORT_FLAGS,
    examples: [
      'kitchen-batch report output/catalogue',
      'kitchen-batch report --merge out/shard-1 out/shard-2 --out out/all',
      'kitchen-batch report --redis redis://redis:6379/0',
    ],
  },
  review: {
    brief: "review a run's results again (another threshold, older runs)",
    usage: 'kitchen-batch review <out-dir> [--review-threshold X] [--json]',
    summary:
      "Reviews every downloaded result of a run folder against its source again (docs/contract.md#review), journals the new verdicts and rebuilds report.json, report.csv and report.html. Works on runs made without the review too. Holds the folder's lock. Exit 0 when every item succeeded, else 1 (as report).",
    flags: REVIEW_FLAGS,
    examples: [
      'kitchen-batch review output/catalogue',
      'kitchen-batch review output/catalogue --review-threshold 0.35',
    ],
  },
  styles: {
    brief: 'print the valid style keys',
    usage: 'kitchen-batch styles [options]',
    summary: 'Prints the style keys the service offers (GET /v1/styles).',
    flags: STYLES_FLAGS,
    examples: ['kitchen-batch styles --sandbox', 'kitchen-batch styles --json'],
  },
  sandbox: {
    brief: 'run the built-in service emulator in the foreground',
    usage: 'kitchen-batch sandbox [options]',
    summary:
      'Runs the built-in service emulator in the foreground (Ctrl-C stops it); its knobs make the faults of a real service on purpose.',
    flags: SANDBOX_FLAGS,
    examples: [
      'kitchen-batch sandbox --port 8080',
      'KITCHEN_API_KEY=k kitchen-batch sandbox --rate-limit 5 --processing-ms 3000',
    ],
  },
  enqueue: {
    brief: "worker mode: queue the manifest's new items in Redis",
    usage: 'kitchen-batch enqueue <manifest> --redis URL [--queue NAME] [--out DIR] [--retry-failed]',
    summary:
      'Worker mode: plans the manifest once and queues one job per new item in Redis (BullMQ). Enqueueing again adds only what is new and puts back what ended incomplete.',
    flags: ENQUEUE_FLAGS,
    examples: [
      'kitchen-batch enqueue catalogue.csv --redis redis://redis:6379/0 --out /shared/out',
      'kitchen-batch enqueue catalogue.csv --redis redis://redis:6379/0 --retry-failed',
    ],
  },
  status: {
    brief: 'worker mode: items by state, shared rate, workers',
    usage: 'kitchen-batch status --redis URL [--queue NAME] [--json]',
    summary:
      "Worker mode: the queues on the Redis and their counts; with --queue (or one queue), that run's items by state, the shared request rate and the workers connected.",
    flags: STATUS_FLAGS,
    examples: ['kitchen-batch status --redis redis://redis:6379/0'],
  },
  worker: {
    brief: 'worker mode: work on the queued items',
    usage: 'kitchen-batch worker --redis URL [options]',
    summary:
      'Worker mode: works on the queued items beside any number of other workers on any number of machines, with one request rate for the key shared through Redis.',
    flags: WORKER_FLAGS,
    examples: ['kitchen-batch worker --redis redis://redis:6379/0 --until-drained --concurrency 8'],
  },
} as const satisfies Record<string, CommandEntry>;

/** A command's name. */
export type CommandName = keyof typeof COMMANDS;

/** Whether `name` is a command (for words read from the command line). */
export function isCommand(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}
