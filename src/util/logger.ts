import pino, { type Logger } from 'pino';
import { redactUrlsInText } from './redact-url.js';

/** Paths pino censors wherever they appear: the key and any Authorization header. */
export const REDACT_PATHS = [
  'apiKey',
  'api_key',
  'key',
  'authorization',
  'Authorization',
  'headers.authorization',
  'headers.Authorization',
  '*.apiKey',
  '*.api_key',
  '*.authorization',
  '*.Authorization',
  '*.headers.authorization',
  '*.headers.Authorization',
  'options.headers.authorization',
  'req.headers.authorization',
];

/** Options of {@link createRunLogger}. */
export interface RunLoggerOptions {
  /** File to append JSON lines to (`<out>/run.log`). */
  file?: string;
  /** A stream instead of a file (tests inject one). */
  stream?: { write(line: string): unknown };
  /** @default 'info' */
  level?: string;
  /** Extra strings to scrub from every line (the API key), belt and braces behind `redact`. */
  secrets?: string[];
  /** Another logger every line is also given to, at its level (the caller's, or `--verbose`'s). */
  mirror?: Logger | undefined;
}

/**
 * The run log: pino JSON lines with `redact` over the key and Authorization headers, plus a last
 * scrub of the secret's literal value from every line in case it ever reaches a message string,
 * and of the secrets in URLs (a pre-signed URL's signature, docs/contract.md#secrets-in-urls) in
 * any field or message: one pass over the line as written, only for a line that holds a `://`.
 */
export function createRunLogger(options: RunLoggerOptions): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 4);
  const target: { write(line: string): unknown } =
    options.stream ??
    (options.file
      ? pino.destination({ dest: options.file, sync: true, mkdir: true, append: true })
      : pino.destination({ dest: 2, sync: true }));
  const scrubbed: pino.DestinationStream = {
    write(line: string) {
      let out = line;
      for (const secret of secrets) out = out.split(secret).join('[Redacted]');
      // A JSON string ends at `"`, where a URL in text ends too: the line stays valid JSON.
      if (out.includes('://')) out = redactUrlsInText(out);
      try {
        target.write(out);
      } catch {
        // A full or broken disk under run.log must not end the run by itself: the journal and the
        // reports tell their own, clear errors for the same disk. The line is lost.
      }
      if (options.mirror) forward(options.mirror, out);
    },
  };
  return pino(
    {
      level: options.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[Redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    scrubbed,
  );
}

/** Gives a run.log line (JSON, already scrubbed) to another pino logger at the same level. */
function forward(logger: Logger, line: string): void {
  try {
    const {
      level,
      time: _time,
      pid: _pid,
      hostname: _host,
      msg,
      ...fields
    } = JSON.parse(line) as {
      level: number;
      msg?: string;
      [key: string]: unknown;
    };
    const name = pino.levels.labels[level] as pino.Level | undefined;
    if (name) logger[name](fields, msg);
  } catch {
    // A caller's logger that throws is not the run's problem.
  }
}

/** Fields a human line leaves out (they are in every line, or are the line itself). */
const PLAIN_SKIP = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

/**
 * A pino logger that writes human lines (`12:00:01 INFO  job accepted event=accepted item=k1`) to
 * `stream`: what `--verbose` mirrors run.log to on stderr.
 */
export function humanLogger(stream: { write(text: string): unknown }, level = 'info'): Logger {
  return pino(
    { level, base: null, timestamp: pino.stdTimeFunctions.isoTime },
    {
      write(line: string) {
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          const label = (pino.levels.labels[entry.level as number] ?? 'log').toUpperCase().padEnd(5);
          const clock = String(entry.time ?? '').slice(11, 19);
          const fields = Object.entries(entry)
            .filter(([key, value]) => !PLAIN_SKIP.has(key) && value !== undefined)
            .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
          stream.write(
            `${clock} ${label} ${entry.msg ?? ''}${fields.length ? `  ${fields.join(' ')}` : ''}\n`,
          );
        } catch {
          stream.write(line);
        }
      },
    },
  );
}
