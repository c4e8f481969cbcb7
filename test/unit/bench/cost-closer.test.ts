import { describe, expect, it } from 'vitest';
import { costCloser } from '../../../bench/cost-closer.ts';
import type { CellCounts } from '../../../bench/summary-model.ts';

const one = (median: number) => ({ median, min: median, max: median, runs: 1 });
const tally = (wru: number, items: Record<string, number>) => ({
  calls: 1,
  errors: 0,
  rru: 0,
  wru,
  refusedWrites: 0,
  items,
});

// 10 batches of 100 messages, 2 lanes, 8 transitions; 34 WRU of manifest and 9 WRU of other writes per batch.
const counts = {
  kind: 'drain',
  label: 'drain, batch 100 / concurrency 2',
  id: '100x2',
  batchSize: 100,
  concurrency: 2,
  messagesPerBatch: one(100),
  perBatch: { wru: one(43), transitions: one(0.8) },
  breakdown: {
    batches: 10,
    transitions: { Start: 2, AcquireSlot: 2, SlotTaken: 2, InvokeWorker: 2 },
    lambda: { 'step:AcquireSlot': 2 },
    ops: {
      'batch-host:register': {
        'DynamoDB:PutItem': tally(340, { 'BATCH/manifest': 10 }),
        'DynamoDB:TransactWriteItems': tally(60, { 'BATCH/head': 10, DISPATCH: 10, ATTACH: 10 }),
      },
      'batch-host:finalize': { 'DynamoDB:UpdateItem': tally(30, { 'BATCH/head': 10, DISPATCH: 10 }) },
    },
  },
} as unknown as CellCounts;

// latest.md says, per missed cost cell, what it would cost without its two design parts.
describe('what would close a cost miss', () => {
  it('prices the manifest and the lanes from the counts, and the write budget the target leaves', () => {
    // Per million messages: writes 43 WRU / 100 msgs × $0.625 = $0.26875 (+ the producer's 2 WRU per 100).
    const breakdown = {
      sqs: 0.16,
      dynamoWrites: 0.28125,
      dynamoReads: 0.002,
      stepFunctions: 0.2, // 8 transitions per 1,000 messages
      lambdaRequests: 0.004,
      lambdaDuration: 0.002,
      cloudwatch: 0,
      logs: 0,
      total: 0.64925,
    };
    const k = costCloser(breakdown, counts, 0.3, 2, 1.5);
    expect(k.handlesUsd).toBeCloseTo(0.2125, 6); // 34 WRU per 100 messages
    expect(k.stepFunctionsUsd).toBe(0.2);
    expect(k.withoutBoth).toBeCloseTo(0.23675, 6);
    // SQS's floor (0.3 requests per message: $0.12) + the manifest ($0.2125) + the producer ($0.0125).
    expect(k.floorUsd).toBeCloseTo(0.345, 6);
    // $0.30 less SQS, reads, Lambda and the producer's writes ($0.0125) leaves $0.1195: 19.12 WRU per 100 messages.
    expect(k.wruBudgetPerBatch).toBeCloseTo(19.12, 6);
    expect(k.manifestWruPerBatch).toBe(34);
    expect(k.lanes).toBe(2);
    expect(k.batchesPerLane).toBe(5);
    // Per lane: the drain's 8 transitions over 2 lanes, and 1.5 each after the last message.
    expect(k.transitionsPerLane).toBeCloseTo(5.5, 9);
  });
});
