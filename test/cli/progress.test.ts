import { describe, expect, it } from 'vitest';
import { fitCounts, formatCounts, ProgressPrinter } from '../../src/commands/progress.js';
import type { ProgressCounts } from '../../src/pipeline/events.js';
import { textSink } from '../helpers/cli.js';

const counts = (over: Partial<ProgressCounts> = {}): ProgressCounts => ({
  total: 10,
  pending: 4,
  running: 3,
  downloading: 1,
  succeeded: 2,
  failed: 0,
  rejected: 0,
  incomplete: 8,
  skipped: 0,
  requests: 12,
  rateLimited: 1,
  retries: 2,
  rate: 8,
  elapsedMs: 60_000,
  ...over,
});

describe('progress on stderr', () => {
  it('shows counts by state, jobs/min, 429s and an ETA', () => {
    const line = formatCounts(counts());
    expect(line).toContain('2/10');
    expect(line).toContain('running 3');
    expect(line).toContain('2.0 jobs/min');
    expect(line).toContain('429s 1');
    expect(line).toMatch(/eta 4m00s/);
  });

  it('redraws one line on a terminal, prints a plain line every 30 s for cron, nothing with --no-progress', () => {
    const tty = textSink(true);
    const live = new ProgressPrinter({ stream: tty, mode: 'tty' });
    live.handle({ type: 'progress', counts: counts() });
    live.handle({ type: 'progress', counts: counts({ succeeded: 3 }) });
    live.finish();
    expect(tty.text().split('\r\u001b[2K')).toHaveLength(3); // two redraws of one line
    expect(tty.text().endsWith('\n')).toBe(true);

    const cron = textSink(false);
    const plain = new ProgressPrinter({ stream: cron, mode: 'plain' });
    for (let s = 0; s <= 90; s += 1)
      plain.handle({ type: 'progress', counts: counts({ elapsedMs: s * 1000 }) });
    expect(cron.text().trim().split('\n')).toHaveLength(3); // at 30, 60 and 90 s

    const quiet = textSink(false);
    const off = new ProgressPrinter({ stream: quiet, mode: 'off' });
    off.handle({ type: 'progress', counts: counts() });
    off.handle({ type: 'warning', message: 'heads up' });
    expect(quiet.text()).toBe('warning: heads up\n');
  });

  it('fits the live line to any terminal width, keeping the counts and the ETA longest', () => {
    const c = counts({ total: 123_456, succeeded: 98_765, running: 16, pending: 20_000, rateLimited: 1234 });
    for (let width = 8; width <= 200; width++) {
      const line = fitCounts(c, width);
      expect(line.length, `width ${width}: ${line}`).toBeLessThanOrEqual(width);
      if (width >= 40) expect(line, `width ${width}`).toMatch(/98765\/123456 ok 98765/);
    }
    expect(fitCounts(c, 80)).toMatch(/eta /);
    expect(fitCounts(counts(), 300)).toBe(formatCounts(counts()));
  });

  it('redraws at the new width when the terminal is resized', () => {
    const listeners: Array<() => void> = [];
    const sink = Object.assign(textSink(true), {
      columns: 200,
      on: (_event: 'resize', listener: () => void) => listeners.push(listener),
      off: () => {},
    });
    const live = new ProgressPrinter({ stream: sink, mode: 'tty' });
    live.handle({ type: 'progress', counts: counts() });
    sink.columns = 40;
    for (const listener of listeners) listener();
    const draws = sink.text().split('\r\u001b[2K').filter(Boolean);
    expect(draws).toHaveLength(2);
    expect(draws[1]!.length).toBeLessThanOrEqual(39);
  });
});
