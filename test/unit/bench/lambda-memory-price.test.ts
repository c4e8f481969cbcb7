/**
 * The bench bills each Lambda role's time at the memory its function is deployed with (the batch
 * host at 1,024 MB, the others at 512 MB), not at one figure for all: otherwise the batch host,
 * on every batch's path, is priced at half its cost.
 */
import { describe, expect, it } from 'vitest';
import { lambdaUsage, usd } from '../../../bench/pricing.ts';
import type { LambdaTally, Tally } from '../../../bench/support/meter.ts';

const billed = (invocations: number, billedMs: number): LambdaTally => ({
  invocations,
  totalMs: billedMs,
  billedMs,
});
const tally = (lambda: Tally['lambda']): Tally => ({ sdk: {}, lambda, transitions: {}, executions: 0 });

describe('Lambda duration per function', () => {
  it('bills each role at its function memory: GB-seconds and USD', () => {
    const t = tally({
      'step:AcquireSlot': billed(10, 2_000), // 512 MB: 1 GB-s
      'worker:InvokeWorker': billed(10, 4_000), // 512 MB: 2 GB-s
      'batch-host:register': billed(20, 1_000), // 1,024 MB: 1 GB-s
      'batch-host:finalize': billed(20, 3_000), // 1,024 MB: 3 GB-s
      supervisor: billed(1, 500), // 512 MB: 0.25 GB-s
    });
    expect(lambdaUsage(t)).toEqual({ invocations: 61, gbSeconds: 7.25 });
    const b = usd(t, () => true);
    expect(b.lambdaDuration).toBeCloseTo(7.25 * 0.0000133334, 12);
    expect(b.lambdaRequests).toBeCloseTo(61 * 0.0000002, 12);
  });

  it('refuses a role of no known function rather than guess its memory', () => {
    const t = tally({ 'step:AcquireSlot': billed(1, 10), 'task:Mystery': billed(1, 10) });
    expect(() => lambdaUsage(t)).toThrow(/task:Mystery/);
    expect(() => usd(t, () => true)).toThrow(/task:Mystery/);
  });
});
