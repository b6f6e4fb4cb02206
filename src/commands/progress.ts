import type { ProgressCounts, RunEvent } from '../pipeline/events.js';

/** Where progress goes and how. */
export interface ProgressOptions {
  stream: NodeJS.WriteStream | { write(text: string): unknown; isTTY?: boolean };
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
  #drawn = false;

  constructor(options: ProgressOptions) {
    this.#options = options;
  }

  /** The `onEvent` callback for runBatch. */
  readonly handle = (event: RunEvent): void => {
    if (event.type === 'warning') {
      this.#clear();
      this.#options.stream.write(`warning: ${event.message}\n`);
      return;
    }
    if (event.type !== 'progress' || this.#options.mode === 'off') return;
    const line = formatCounts(event.counts);
    if (this.#options.mode === 'tty') {
      if (line === this.#lastLine) return;
      this.#lastLine = line;
      this.#options.stream.write(`\r\x1b[2K${line}`);
      this.#drawn = true;
      return;
    }
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

function formatEta(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
