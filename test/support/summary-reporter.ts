import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints one plain closing line, `Tests: N passed, N failed`, that CI and people can read. A run
 * that is not the overall one (the single-endpoint run before it) names itself through
 * `TAKOFORM_SUMMARY_LABEL`, so the last `Tests:` line stays the overall summary.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++;
    }
    const label = process.env.TAKOFORM_SUMMARY_LABEL;
    const title = label ? `${label} tests` : 'Tests';
    process.stdout.write(`\n${title}: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
