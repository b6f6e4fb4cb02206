import pino, { type Logger } from 'pino';

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
}

/**
 * The run log: pino JSON lines with `redact` over the key and Authorization headers, plus a last
 * scrub of the secret's literal value from every line in case it ever reaches a message string.
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
      try {
        target.write(out);
      } catch {
        // A full or broken disk under run.log must not end the run by itself: the journal and the
        // reports tell their own, clear errors for the same disk. The line is lost.
      }
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
