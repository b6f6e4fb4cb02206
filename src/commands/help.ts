/**
 * What `kitchen-batch help [command]`, `<command> --help` and the CLI's errors print: one page per
 * command (usage, what it does, its options with their value placeholders, examples), the overview,
 * and "did you mean" for a mistyped command or option (docs/contract.md#commands).
 */
import { suggestStyles } from '../manifest/style-check.js';
import { sandboxHelp } from './sandbox.js';

/** One command's page. */
interface CommandPage {
  usage: string;
  /** The overview's line. */
  brief: string;
  summary: string;
  /** `[flag with its placeholder, what it does]`; the flag's name is the first word. */
  options: Array<[string, string]>;
  examples: string[];
}

const SERVICE: Array<[string, string]> = [
  ['--base-url URL', 'the service root (or KITCHEN_API_BASE_URL)'],
  ['--api-key-file FILE', 'read the API key from FILE (or KITCHEN_API_KEY; never a plain flag)'],
];

const RUN_OPTIONS: Array<[string, string]> = [
  [
    '--out DIR',
    "output folder (default output/<manifest name>, or output/<manifest file name> when that holds another manifest's run)",
  ],
  ['--concurrency N', 'jobs in flight (default 8)'],
  ['--retry-failed', 'resubmit items whose job failed in an earlier run'],
  ['--retry-ambiguous', 'resend submissions whose outcome is unknown (possible duplicate charge)'],
  ['--job-timeout SECONDS', 'a job not ended by then is incomplete/job_timeout (default 1800)'],
  ['--max-submissions N', 'submit at most N new jobs in this run (cost guard)'],
  [
    '--max-duration DURATION',
    'a window (45m, 6h, 1h30m): no new submissions after it, jobs in flight get a grace period (a quarter of it, at most 5 min), the rest is incomplete/max_duration; exit 1, a rerun continues',
  ],
  ['--max-rate R', 'at most R service requests per second (to split one key between jobs)'],
  ['--shard K/N', 'run only part K of N (1-based) of the items'],
  [
    '--keep-metadata',
    'send images as they are: EXIF/GPS, orientation tag and colour profile kept (default: upright 8-bit sRGB, no metadata)',
  ],
  ['--strip-metadata', '(the default now; accepted for old scripts)'],
  ['--max-side PX', 'longest side of an uploaded image (default 4096)'],
  ['--verify', 'hash every finished result on resume (default: size and mtime)'],
  [
    '--manifest-renamed',
    "continue the output folder's run with this manifest although its last run was of another manifest file (renamed, moved or converted)",
  ],
  [
    '--no-review',
    'skip the review of each result against its source (on by default; flags results worth a look)',
  ],
  ['--review', '(the default; accepted for old scripts)'],
  ['--review-threshold X', 'a review signal under X (0..1) flags the result (default 0.5)'],
  ['--log-level LEVEL', 'run.log level: fatal|error|warn|info|debug|trace|silent (default info)'],
  ['--no-progress', 'no progress display on stderr'],
  ['--verbose', '(-v) also print run.log on stderr as readable lines (the key never appears)'],
  ['--json', 'print the final summary as one JSON object on stdout'],
  ['--sandbox', 'start the built-in emulator and use it (no key or URL needed)'],
  ...SERVICE,
];

const PAGES: Record<string, CommandPage> = {
  run: {
    brief: 'plan, preflight, submit, poll, download, report (resumes)',
    usage: 'kitchen-batch run <manifest> [options]',
    summary:
      'Plans, preflights, submits, polls and downloads every item of the manifest, then writes report.json, report.csv and report.html. Rerunning the same command resumes: nothing finished is paid for twice.',
    options: RUN_OPTIONS,
    examples: [
      'kitchen-batch run manifests/sample.csv --sandbox',
      'kitchen-batch run catalogue.csv --base-url https://api.example.com --out /data/out',
      'kitchen-batch run catalogue.csv --max-submissions 100 --json',
    ],
  },
  plan: {
    brief: 'everything up to submission; submits nothing',
    usage: 'kitchen-batch plan <manifest> [options]',
    summary:
      'Everything up to submission (manifest checks, preflight, what a run would do with each item); submits nothing. Exit 1 when items would be rejected.',
    options: RUN_OPTIONS,
    examples: ['kitchen-batch plan catalogue.csv', 'kitchen-batch plan catalogue.csv --json --out /data/out'],
  },
  report: {
    brief: "rebuild report.json/csv/html from a run's journal",
    usage: 'kitchen-batch report <out-dir> | report --merge <out-dir>... --out DIR | report --redis URL',
    summary:
      "Rebuilds report.json, report.csv and report.html from a run's journal, without the network; --merge combines the folders of several shards; --redis rebuilds a worker run's reports from Redis.",
    options: [
      ['--merge', 'combine several shard folders into one report (needs --out)'],
      ['--out DIR', 'where the merged (or --redis) report goes'],
      ['--redis URL', "a worker run's reports, from Redis (docs/contract.md#worker-mode)"],
      ['--no-html', 'skip report.html'],
      ['--json', 'print the totals as one JSON object on stdout'],
    ],
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
    options: [
      ['--review-threshold X', 'a review signal under X (0..1) flags the result (default 0.5)'],
      ['--no-html', 'skip report.html'],
      ['--log-level LEVEL', 'run.log level (default info)'],
      ['--json', 'print the summary as one JSON object on stdout'],
    ],
    examples: [
      'kitchen-batch review output/catalogue',
      'kitchen-batch review output/catalogue --review-threshold 0.35',
    ],
  },
  styles: {
    brief: 'print the valid style keys',
    usage: 'kitchen-batch styles [options]',
    summary: 'Prints the style keys the service offers (GET /v1/styles).',
    options: [['--json', 'print them as JSON'], ['--sandbox', 'ask the built-in emulator'], ...SERVICE],
    examples: ['kitchen-batch styles --sandbox', 'kitchen-batch styles --json'],
  },
  sandbox: {
    brief: 'run the built-in service emulator in the foreground',
    usage: 'kitchen-batch sandbox [options]',
    summary:
      'Runs the built-in service emulator in the foreground (Ctrl-C stops it); its knobs make the faults of a real service on purpose.',
    options: [],
    examples: [
      'kitchen-batch sandbox --port 8080',
      'KITCHEN_API_KEY=k kitchen-batch sandbox --rate-limit 5 --processing-ms 3000',
    ],
  },
  enqueue: {
    brief: "worker mode: queue the manifest's new items in Redis",
    usage: 'kitchen-batch enqueue <manifest> --redis URL [--out DIR] [--retry-failed] [--json]',
    summary:
      'Worker mode: plans the manifest once and queues one job per new item in Redis (BullMQ). Enqueueing again adds only what is new and puts back what ended incomplete.',
    options: [
      ['--redis URL', 'the Redis to queue in (or KITCHEN_REDIS_URL)'],
      ['--out DIR', 'the shared output folder every worker writes to (default output/<manifest name>)'],
      ['--retry-failed', 'put back the items whose job failed at the service: the workers submit them again'],
      ['--json', 'print the counts as one JSON object'],
    ],
    examples: [
      'kitchen-batch enqueue catalogue.csv --redis redis://redis:6379/0 --out /shared/out',
      'kitchen-batch enqueue catalogue.csv --redis redis://redis:6379/0 --retry-failed',
    ],
  },
  status: {
    brief: 'worker mode: items by state, shared rate, workers',
    usage: 'kitchen-batch status --redis URL [--json]',
    summary: "Worker mode: the run's items by state, the shared request rate and the workers connected.",
    options: [
      ['--redis URL', 'the Redis of the run (or KITCHEN_REDIS_URL)'],
      ['--json', 'print it as one JSON object'],
    ],
    examples: ['kitchen-batch status --redis redis://redis:6379/0'],
  },
  worker: {
    brief: 'worker mode: work on the queued items',
    usage: 'kitchen-batch worker --redis URL [options]',
    summary:
      'Worker mode: works on the queued items beside any number of other workers on any number of machines, with one request rate for the key shared through Redis.',
    options: [
      ['--redis URL', 'the Redis of the run (or KITCHEN_REDIS_URL)'],
      ['--concurrency N', 'items this worker holds at once (default 8)'],
      [
        '--until-drained',
        "exit 0 once nothing is left in the queue, whatever the items' outcomes (a Kubernetes Job); default: wait for more",
      ],
      ['--max-rate R', 'cap the shared request rate at R requests per second'],
      [
        '--stall-timeout SECONDS',
        'a silent worker keeps its items this long before others take them (default 30)',
      ],
      [
        '--grace SECONDS',
        'after SIGTERM, time for requests in flight before items are handed back (default 10)',
      ],
      ['--job-timeout SECONDS', 'a job not ended by then is retried later (default 1800)'],
      ['--keep-metadata', 'send images as they are (see run)'],
      ['--max-side PX', 'longest side of an uploaded image (default 4096)'],
      [
        '--no-review',
        "skip the review of each result against its source (see run; duplicates are found among this worker's results)",
      ],
      ['--review-threshold X', 'a review signal under X (0..1) flags the result (default 0.5)'],
      ['--log-level LEVEL', 'level of <out>/workers/<name>.log (default info)'],
      ['--name NAME', 'the worker in status and its log file name (default <hostname>-<pid>)'],
      ['--json', 'print the summary as one JSON object'],
      ...SERVICE,
    ],
    examples: ['kitchen-batch worker --redis redis://redis:6379/0 --until-drained --concurrency 8'],
  },
};

/** The commands, in the order the overview lists them. */
export const COMMAND_NAMES = Object.keys(PAGES);

/** The overview `kitchen-batch --help` prints. */
export function globalHelp(): string {
  const width = Math.max(...COMMAND_NAMES.map((n) => n.length));
  const lines = [
    'kitchen-batch: run a manifest of kitchen photos through the kitchen-image generation service.',
    '',
    'Usage: kitchen-batch <command> [options]',
    '',
    'Commands:',
    ...COMMAND_NAMES.map((n) => `  ${n.padEnd(width)}  ${PAGES[n]!.brief}`),
    '',
    "Run 'kitchen-batch help <command>' (or '<command> --help') for its options and examples.",
    "Try it without a key: 'kitchen-batch run manifests/sample.csv --sandbox'.",
    '',
    'Environment: KITCHEN_API_KEY, KITCHEN_API_BASE_URL, KITCHEN_REDIS_URL (worker mode).',
    'Exit codes: 0 all succeeded, 1 some failed/rejected/incomplete, 2 usage/manifest/state error,',
    '3 service refused (401/403) or unreachable, 130 interrupted (a rerun resumes).',
    '-V, --version prints the version.',
    '',
  ];
  return lines.join('\n');
}

/** One command's page, or null for a command that does not exist. */
export function commandHelp(command: string): string | null {
  const page = PAGES[command];
  if (!page) return null;
  const width = Math.max(0, ...page.options.map(([flag]) => flag.length));
  const options =
    command === 'sandbox'
      ? sandboxHelp()
      : page.options.map(([flag, text]) => wrap(text, 4 + width, `  ${flag.padEnd(width)}  `)).join('\n');
  return [
    `Usage: ${page.usage}`,
    '',
    wrap(page.summary, 0, ''),
    '',
    'Options:',
    options,
    '',
    'Examples:',
    ...page.examples.map((e) => `  ${e}`),
    '',
  ].join('\n');
}

/** The option names (`--out`, …) a command's page lists. */
export function optionNames(command: string): string[] {
  return (PAGES[command]?.options ?? []).map(([flag]) => name(flag));
}

/** `did you mean "run"?` for a mistyped command, or ''. */
export function commandSuggestion(typed: string): string {
  const [best] = suggestStyles(typed, COMMAND_NAMES, 1);
  return best ? `; did you mean "${best}"?` : '';
}

/**
 * A parse error of node's `parseArgs` in our words: the option named, the closest real one, and
 * where the command's options are listed.
 */
/** Options a user reaches for on one command that another command takes, and where they go. */
const ELSEWHERE: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  worker: {
    '--retry-failed':
      'in worker mode the failed items are put back in the queue by `kitchen-batch enqueue <manifest> --retry-failed`, and the workers submit them again',
  },
};

export function parseErrorMessage(command: string, error: Error & { code?: string }): string {
  const quoted = /'(-[^' ]+)/.exec(error.message)?.[1];
  const pointer = `(kitchen-batch help ${command} lists its options)`;
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && quoted) {
    const elsewhere = ELSEWHERE[command]?.[quoted];
    if (elsewhere) return `unknown option ${quoted} for ${command}: ${elsewhere}\n${pointer}`;
    const [best] = suggestStyles(
      quoted.replace(/^-+/, ''),
      optionNames(command).map((n) => n.slice(2)),
      1,
    );
    return `unknown option ${quoted} for ${command}${best ? `; did you mean --${best}?` : ''}\n${pointer}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && quoted) {
    return `option ${quoted} ${/argument missing/.test(error.message) ? 'needs a value' : 'takes no value'}\n${pointer}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    return `${command}: unexpected argument ${/'([^']*)'/.exec(error.message)?.[1] ?? ''}\n${pointer}`;
  }
  return `${error.message}\n${pointer}`;
}

function name(flag: string): string {
  return flag.split(' ')[0]!;
}

/** `text` after `lead`, wrapped at 80 columns, continuation lines indented by `indent`. */
function wrap(text: string, indent: number, lead: string): string {
  const lines: string[] = [];
  let line = lead;
  for (const word of text.split(' ')) {
    if (line.trim() !== '' && line.length + 1 + word.length > 80 && line.length > indent) {
      lines.push(line);
      line = ' '.repeat(indent);
    }
    line += line.length === 0 || line.endsWith(' ') ? word : ` ${word}`;
  }
  lines.push(line);
  return lines.join('\n');
}
