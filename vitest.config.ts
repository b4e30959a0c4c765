import { defineConfig } from 'vitest/config';

// One root config: unit tests live beside the code (scripts/ included), cross-package and
// multi-process tests under tests/. Timeouts are generous because CI has two
// cores; speed is measured in bench/, never asserted here.
export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'tests/**/*.test.ts', 'scripts/**/*.test.ts', 'bench/lib/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
  },
});
