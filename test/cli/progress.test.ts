import { describe, expect, it } from 'vitest';
import { formatCounts, ProgressPrinter } from '../../src/commands/progress.js';
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
});
