import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, three forks: most test time is spent waiting on servers and child processes (a run
    // of the whole suite: 978 s of test time, 530 s with two forks, 429 s with three), and no more
    // so that timing-sensitive network tests do not starve.
    pool: 'forks',
    maxWorkers: 3,
  },
});
