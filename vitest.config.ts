import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: files run in parallel forks, but not so many that timing-sensitive network tests starve.
    pool: 'forks',
    maxWorkers: 2,
  },
});
