import { describe, expect, it } from 'vitest';
import { stepFunctionsUsd } from '../../../bench/pricing.ts';
import type { Tally } from '../../../bench/support/meter.ts';

const tally = (t: Partial<Tally>): Tally => ({ sdk: {}, lambda: {}, transitions: {}, executions: 0, ...t });

// Lanes on the Express dispatcher are billed per execution and duration, not per transition.
describe('Step Functions pricing', () => {
  it('Standard lanes per transition; Express lanes per request and per 100 ms of 64 MB', () => {
    // 10 transitions in Standard lanes, 5 more in one Express lane that ran 2 s.
    const t = tally({
      transitions: { AcquireSlot: 6, InvokeWorker: 6, Continue: 3 },
      executions: 3,
      express: { executions: 1, transitions: 5, billedMs: 2_000 },
    });
    const standard = 10 * 0.000025;
    const express = 0.000001 + 2 * (64 / 1024) * (0.06 / 3600);
    expect(stepFunctionsUsd(t)).toBeCloseTo(standard + express, 12);
    // Results from before Express lanes have no `express`: every transition is Standard's.
    expect(stepFunctionsUsd(tally({ transitions: { AcquireSlot: 4 } }))).toBeCloseTo(4 * 0.000025, 12);
  });
});
