/** A finished batch as consumer state shows it, from its head and manifest (issue 14, Deliver 2). */
import { describe, expect, it } from 'vitest';
import type { BatchHead, Manifest } from '../../../lambdas/delivery/delivery-store.ts';
import { summarizeBatch } from '../../../lambdas/operator/recent-batches.ts';

const head = (over: Partial<BatchHead>): BatchHead =>
  ({
    batchId: 'b1',
    consumerUid: 'c',
    settled: {},
    outcome: 'returned',
    doubtful: false,
    ...over,
  }) as BatchHead;
const entry = (id: string, attempts: number, receivedAt?: number) => ({
  id,
  ts: 0,
  attempts,
  hadRecord: false,
  receivedAt,
});

describe('summarizeBatch', () => {
  it('counts what finalisation applies: explicit settlements, then the implicit one of the outcome', () => {
    const manifest: Manifest = {
      entries: [entry('m1', 1, 1000), entry('m2', 2, 1100), entry('m3', 4, 1200)],
      moves: [],
    };
    const threw = summarizeBatch(
      head({ outcome: 'threw', settled: { '0': 'a' } }),
      manifest,
      3,
      'live',
      3000,
      {
        name: 'TypeError',
        message: 'x is undefined',
      },
    );
    expect(threw).toEqual({
      batchId: 'b1',
      outcome: 'threw',
      finalizedBy: 'live',
      endedAt: 3000,
      durationMs: 2000,
      messages: 3,
      acknowledged: 1,
      retried: 1,
      exhausted: 1,
      attempts: { min: 1, max: 4 },
      error: { name: 'TypeError', message: 'x is undefined' },
    });
    const returned = summarizeBatch(head({ settled: { '1': 'r30' } }), manifest, 3, 'live', 3000);
    expect(returned).toMatchObject({ acknowledged: 2, retried: 1, exhausted: 0, error: null });
  });

  it('a doubtful batch acknowledges nothing implicitly; recovery of an empty manifest has no duration', () => {
    const manifest: Manifest = { entries: [entry('m1', 1)], moves: [] };
    expect(summarizeBatch(head({ doubtful: true }), manifest, 3, 'live', 5)).toMatchObject({
      acknowledged: 0,
      retried: 1,
      durationMs: null,
    });
    expect(
      summarizeBatch(head({ outcome: undefined }), { entries: [], moves: [] }, 0, 'recovery', 5),
    ).toMatchObject({ outcome: 'abandoned', finalizedBy: 'recovery', messages: 0, attempts: null });
  });
});
