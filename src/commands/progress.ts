import type { ProgressCounts, RunEvent } from '../pipeline/events.js';
import { redactUrlsInText } from '../util/redact-url.js';

/** Where progress goes and how. */
export interface ProgressOptions {
  stream:
    | NodeJS.WriteStream
    | {
        write(text: string): unknown;
        isTTY?: boolean;
        /** The terminal's width (a TTY stream knows it, and it follows resizes). */
        columns?: number;
        on?(event: 'resize', listener: () => void): unknown;
        off?(event: 'resize', listener: () => void): unknown;
      };
  /** 'tty': a line redrawn in place; 'plain': a line every `intervalMs` (cron); 'off'. */
  mode: 'tty' | 'plain' | 'off';
  /** @default 30_000 for plain */
  intervalMs?: number;
}

/** Renders run events to stderr: a live line on a terminal, a periodic plain line for cron logs. */
export class ProgressPrinter {
  readonly #options: ProgressOptions;
  #lastPlain = 0;
  #lastLine = '';
  #lastCounts: ProgressCounts | null = null;
  #drawn = false;
  readonly #onResize = () => {
    // A narrower terminal re-wraps what is drawn: clear it and draw again at the new width.
    if (!this.#lastCounts) return;
    this.#lastLine = '';
    this.#draw(this.#lastCounts);
  };

  constructor(options: ProgressOptions) {
    this.#options = options;
    if (options.mode === 'tty') options.stream.on?.('resize', this.#onResize);
  }

  /** The `onEvent` callback for runBatch. */
  readonly handle = (event: RunEvent): void => {
    if (event.type === 'warning') {
      this.#clear();
      // A warning may quote a source's URL: its signature is not for the terminal or a cron log.
      this.#options.stream.write(`warning: ${redactUrlsInText(event.message)}\n`);
      return;
    }
    if (event.type !== 'progress' || this.#options.mode === 'off') return;
    if (this.#options.mode === 'tty') {
      this.#draw(event.counts);
      return;
    }
    const line = formatCounts(event.counts);
    const interval = this.#options.intervalMs ?? 30_000;
    if (event.counts.elapsedMs - this.#lastPlain >= interval) {
      this.#lastPlain = event.counts.elapsedMs;
      this.#options.stream.write(`${new Date().toISOString()} ${line}\n`);
    }
  };

  /** Ends the live line so later output starts clean. */
  finish(): void {
    if (this.#drawn) this.#options.stream.write('\n');
    this.#drawn = false;
    this.#options.stream.off?.('resize', this.#onResize);
  }

  /** The live line, cut to the terminal's width (one row: `\r` and erase-line then redraw it whole). */
  #draw(counts: ProgressCounts): void {
    this.#lastCounts = counts;
    const line = fitCounts(counts, (this.#options.stream.columns ?? 80) - 1);
    if (line === this.#lastLine) return;
    this.#lastLine = line;
    this.#options.stream.write(`\r\x1b[2K${line}`);
    this.#drawn = true;
  }

  #clear(): void {
    if (this.#drawn) this.#options.stream.write('\r\x1b[2K');
  }
}

/** One progress line: counts by state, jobs/min, 429s, ETA. */
export function formatCounts(c: ProgressCounts): string {
  const done = c.succeeded + c.failed + c.rejected;
  const minutes = c.elapsedMs / 60_000;
  const finished = c.succeeded + c.failed - c.skipped;
  const perMin = minutes > 0 ? finished / minutes : 0;
  const left = c.total - done;
  const eta = perMin > 0 && left > 0 ? ` eta ${formatEta((left / perMin) * 60_000)}` : '';
  const width = 20;
  const filled = c.total > 0 ? Math.round((done / c.total) * width) : width;
  return (
    `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${c.total}` +
    ` ok ${c.succeeded} failed ${c.failed} rejected ${c.rejected}` +
    ` running ${c.running} downloading ${c.downloading} waiting ${Math.max(0, c.pending)}` +
    ` | ${perMin.toFixed(1)} jobs/min, 429s ${c.rateLimited}, retries ${c.retries}${eta}`
  );
}

/**
 * The live line in at most `width` characters: the full line when it fits, else shorter forms (the
 * bar and the words go first, the counts and the ETA last), cut as a last resort.
 */
export function fitCounts(c: ProgressCounts, width: number): string {
  const done = c.succeeded + c.failed + c.rejected;
  const full = formatCounts(c);
  if (full.length <= width) return full;
  const minutes = c.elapsedMs / 60_000;
  const perMin = minutes > 0 ? (c.succeeded + c.failed - c.skipped) / minutes : 0;
  const left = c.total - done;
  const eta = perMin > 0 && left > 0 ? ` eta ${formatEta((left / perMin) * 60_000)}` : '';
  const bar = (n: number) => {
    const filled = c.total > 0 ? Math.round((done / c.total) * n) : n;
    return `[${'#'.repeat(filled)}${'.'.repeat(n - filled)}] `;
  };
  const counts = `${done}/${c.total} ok ${c.succeeded} fail ${c.failed} rej ${c.rejected} run ${c.running} dl ${c.downloading}`;
  const rate = ` | ${perMin.toFixed(1)}/min 429s ${c.rateLimited}${eta}`;
  const shortRate = ` ${perMin.toFixed(0)}/min${eta}`;
  for (const candidate of [
    `${bar(10)}${counts}${rate}`,
    `${counts}${rate}`,
    `${done}/${c.total} ok ${c.succeeded} fail ${c.failed} run ${c.running}${shortRate}`,
    `${done}/${c.total} ok ${c.succeeded}${eta}`,
  ]) {
    if (candidate.length <= width) return candidate;
  }
  return `${done}/${c.total}`.slice(0, Math.max(1, width));
}

function formatEta(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
