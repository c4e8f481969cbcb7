/**
 * Issue 13: which lanes run on Express. A lane runs there only where a whole batch — gathering
 * (idle wait + batch timeout), registration and the handler at the worker's bound — fits the
 * five-minute window with room at both ends.
 */
import { describe, expect, it } from 'vitest';
import {
  batchFits,
  batchSpanMs,
  EXPRESS_MAX_MS,
  expressLaneUntil,
  fitsExpress,
  laneKindFor,
} from '../../../lambdas/delivery/lane-kinds.ts';

const AWS_IDLE_WAIT = 20;

describe('lane kinds', () => {
  it('a worker with the default timeout (3 min) fits Express with every batch timeout (0..60 s)', () => {
    for (let bt = 0; bt <= 60; bt++) {
      expect(laneKindFor({ handlerMs: 180_000, maxBatchTimeoutSeconds: bt }, AWS_IDLE_WAIT)).toBe('express');
    }
  });

  it('4 min fits with a short batch timeout only; 5 min and the local 900 s never fit', () => {
    expect(fitsExpress({ handlerMs: 240_000, maxBatchTimeoutSeconds: 5 }, AWS_IDLE_WAIT)).toBe(true);
    expect(fitsExpress({ handlerMs: 240_000, maxBatchTimeoutSeconds: 30 }, AWS_IDLE_WAIT)).toBe(false);
    for (const handlerMs of [300_000, 840_000, 900_000]) {
      expect(laneKindFor({ handlerMs, maxBatchTimeoutSeconds: 0 }, 0)).toBe('standard');
    }
  });

  it('whatever fits leaves a whole batch inside the window with room at both ends', () => {
    for (const handlerMs of [1_000, 30_000, 120_000, 180_000, 240_000, 250_000, 260_000]) {
      for (const bt of [0, 1, 5, 30, 60]) {
        for (const idle of [0, 1, 10, 20]) {
          const c = { handlerMs, maxBatchTimeoutSeconds: bt };
          if (!fitsExpress(c, idle)) continue;
          // A lane's first AcquireSlot, a few seconds into its execution, may take a slot.
          const start = Date.parse('2026-12-04T12:00:00.000Z');
          const until = expressLaneUntil(new Date(start).toISOString())!;
          expect(batchFits(start + 5_000, until, c, idle)).toBe(true);
          // And that batch ends at least 25 s before Step Functions would end the execution.
          expect(start + 5_000 + batchSpanMs(c, idle)).toBeLessThanOrEqual(start + EXPRESS_MAX_MS - 25_000);
        }
      }
    }
  });

  it('the window is the execution start plus five minutes less the room to hand over; an unreadable start is no window', () => {
    expect(expressLaneUntil('2026-12-04T12:00:00.000Z')).toBe(Date.parse('2026-12-04T12:04:35.000Z'));
    expect(expressLaneUntil('not a time')).toBeUndefined();
    const c = { handlerMs: 10_000, maxBatchTimeoutSeconds: 1 };
    const until = 1_000_000;
    const span = batchSpanMs(c, 1);
    expect(batchFits(until - span, until, c, 1)).toBe(true);
    expect(batchFits(until - span + 1, until, c, 1)).toBe(false);
  });
});
