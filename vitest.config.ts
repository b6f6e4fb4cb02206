import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, four forks: most test time is spent waiting on servers and child processes. The
    // whole suite (133 files, the CLI from dist/): 1,240 s of test time, 466 s with three forks,
    // 435 s with four. Timing-sensitive tests allow for a loaded machine.
    pool: 'forks',
    maxWorkers: 4,
  },
});
