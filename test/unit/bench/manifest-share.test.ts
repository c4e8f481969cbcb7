import { describe, expect, it } from 'vitest';
import { manifestWruPerBatch } from '../../../bench/part-items.ts';
import type { SdkTally } from '../../../bench/support/meter.ts';

const tally = (wru: number, items: Record<string, number>) => ({
  calls: 1,
  errors: 0,
  rru: 0,
  wru,
  refusedWrites: 0,
  items,
});

/** A cell's part breakdown of two batches with these operations. */
const twoBatches = (ops: Record<string, Record<string, SdkTally>>) => ({
  batches: 2,
  transitions: {},
  lambda: {},
  ops,
});

// latest.md says how much of a cell's writes the manifest (every receipt handle) is.
describe('manifest share of the writes', () => {
  it('counts the writes that name the manifest alone, per batch', () => {
    const b = twoBatches({
      'batch-host:register': {
        'DynamoDB:PutItem': tally(68, { 'BATCH/manifest': 2 }),
        'DynamoDB:TransactWriteItems': tally(8, { 'BATCH/head': 2, DISPATCH: 2, ATTACH: 2 }),
        'DynamoDB:BatchGetItem': tally(0, { QSTATE: 2 }),
      },
      'batch-host:finalize': { 'DynamoDB:UpdateItem': tally(6, { 'BATCH/head': 2, DISPATCH: 2 }) },
    });
    expect(manifestWruPerBatch(b)).toBe(34);
    expect(manifestWruPerBatch({ ...b, ops: {} })).toBe(0);
  });

  it('with heads written by PutItem too: the units the meter counted for manifests alone', () => {
    const b = twoBatches({
      'batch-host:register': {
        'DynamoDB:PutItem': {
          ...tally(70, { 'BATCH/head': 2, 'BATCH/manifest': 2 }),
          wruByItem: { 'BATCH/head': 2, 'BATCH/manifest': 68 },
        },
      },
    });
    expect(manifestWruPerBatch(b)).toBe(34);
  });

  it('in results recorded before the meter counted by item: less a unit for each head', () => {
    const b = {
      batches: 2,
      transitions: {},
      lambda: {},
      ops: {
        'batch-host:register': { 'DynamoDB:PutItem': tally(70, { 'BATCH/head': 2, 'BATCH/manifest': 2 }) },
      },
    };
    expect(manifestWruPerBatch(b)).toBe(34);
  });
});
