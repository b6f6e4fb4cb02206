import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, three forks: most test time is spent waiting on servers and child processes. The
    // whole suite (133 files, the CLI from dist/): 1,240 s of test time, 466 s with three forks,
    // 435 s with four; but with four, a Redis restarted mid-run under that load left one worker
    // item incomplete (once in three CI runs), so no more than three.
    pool: 'forks',
    maxWorkers: 3,
    // Longest files first, also in a clean clone without Vitest's cache (test/sequencer.ts).
    sequence: { sequencer: LongestFirst },
  },
});
