import { describe, expect, it } from 'vitest';
import { kindsOf, kindsRead, readAndWritten, wruPerWriteRequest } from '../../../bench/part-items.ts';

const tally = (calls: number, wru: number, items: Record<string, number>, refusedWrites = 0) => ({
  calls,
  errors: 0,
  rru: 0,
  wru,
  refusedWrites,
  items,
});

// Two batches: registration reads the attachment and the head it then writes; finalisation writes the head again.
const breakdown = {
  batches: 2,
  transitions: {},
  lambda: {},
  ops: {
    'batch-host:register': {
      'DynamoDB:BatchGetItem': tally(2, 0, { ATTACH: 2, 'BATCH/head': 2 }),
      'DynamoDB:TransactWriteItems': tally(2, 8, { 'BATCH/head': 2, DISPATCH: 2 }, 1),
      'SQS:ChangeMessageVisibilityBatch': tally(2, 0, {}),
    },
    'batch-host:finalize': {
      'DynamoDB:GetItem': tally(2, 0, { ATTACH: 2 }),
      'DynamoDB:UpdateItem': tally(2, 3, { 'BATCH/head': 2 }),
    },
  },
};

describe('item kinds by part', () => {
  it("splits a part's DynamoDB items into reads and writes, ignoring other services", () => {
    expect(kindsOf(breakdown, 'batch-host:register', true)).toEqual({ ATTACH: 2, 'BATCH/head': 2 });
    expect(kindsOf(breakdown, 'batch-host:register', false)).toEqual({ 'BATCH/head': 2, DISPATCH: 2 });
    expect(kindsOf(breakdown, 'no-such-part', true)).toEqual({});
  });

  it('sums the reads of every part', () => {
    expect(kindsRead(breakdown)).toEqual({ ATTACH: 4, 'BATCH/head': 2 });
  });

  it('finds the reads of kinds the same path writes, per batch', () => {
    expect(readAndWritten(breakdown)).toEqual({ kinds: ['BATCH/head'], readsPerBatch: 1 });
  });

  it('prices a write request with its refused writes, averaged over write requests', () => {
    // (8 + 1 refused + 3) WRU over 4 write requests.
    expect(wruPerWriteRequest(breakdown)).toBe(3);
    expect(wruPerWriteRequest({ ...breakdown, ops: {} })).toBe(0);
  });
});
