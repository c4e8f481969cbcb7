import { configDefaults, defineConfig } from 'vitest/config';

// The proofs of moto's gaps call moto itself; they run only in `npm run test:moto`.
const motoOnly = ['test/integration/single-endpoint/moto-gaps.test.ts'];
const onMoto = process.env.TAKOFORM_ENDPOINT_EMULATOR === 'moto';

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    // Vitest's default on 2 cores is one file at a time, and most files wait on DynamoDB Local,
    // SQS and timers, not on the CPU: three at once keep both cores busy.
    maxWorkers: 3,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/infra/**/*.test.ts'],
          testTimeout: 60_000,
          // CDK synthesis in beforeAll takes seconds, more on a loaded 2-core machine.
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: onMoto ? configDefaults.exclude : [...configDefaults.exclude, ...motoOnly],
          globalSetup: ['test/support/global-setup.ts'],
          // Skips moto's known gaps in `npm run test:moto`; a no-op otherwise.
          setupFiles: ['test/support/single-endpoint-gaps.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
