/**
 * Issue 12: `DynamoDeliveryStore.settleMany` against DynamoDB Local. A group of settle calls gets
 * exactly the answers, and leaves exactly the head, that calling `settle` for each in turn would
 * (DL-03, DL-04, DL-09), with one write for distinct per-message calls, and never takes a failed
 * write as recorded (DL-08).
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoAttachments } from '../../../lambdas/adapters/aws/dynamodb-attachments.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import type { BatchHead } from '../../../lambdas/delivery/delivery-store.ts';
import type { SettleCall } from '../../../lambdas/delivery/settlement-protocol.ts';

const HASH = 'hash-of-the-batch-credential';

describe('issue 12: settleMany in the DynamoDB store', () => {
  let client: DynamoDBClient;
  let table: string;
  /** Every command the store sends, by name; `failAt` makes the n-th UpdateItem throw. */
  let sent: string[] = [];
  let failAt: number | undefined;
  let store: DynamoDeliveryStore;

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
    const counting = {
      send: (command: { constructor: { name: string } }) => {
        const name = command.constructor.name;
        sent.push(name);
        if (name === 'UpdateItemCommand' && sent.filter((n) => n === name).length === failAt) {
          return Promise.reject(Object.assign(new Error('injected'), { name: 'InternalServerError' }));
        }
        return (client.send as (c: unknown) => Promise<unknown>)(command);
      },
    } as unknown as DynamoDBClient;
    store = new DynamoDeliveryStore(counting, table);
  });

  /** An open batch of `size` messages with nothing settled. */
  async function openBatch(size: number): Promise<string> {
    const consumerUid = `c-${randomUUID()}`;
    await store.initSlots(consumerUid);
    // Registration is conditional on the consumer generation being the active one.
    await new DynamoAttachments(client, table).activate({
      consumerUid,
      space: 'default',
      queueName: 'q',
      generation: 1,
      state: 'active',
      spec: {
        queue: { resourceUid: 'q-1' },
        worker: { resourceUid: 'w-1' },
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 0,
        maxConcurrency: 5,
        maxRetries: 3,
        retryDelaySeconds: 0,
      },
    });
    // The slot's batch id names the item it was taken in.
    const slot = await store.takeSlot(consumerUid, `b-${randomUUID()}`, Date.now() + 60_000, {
      max: 5,
      generation: 1,
    });
    expect(slot.taken).toBe(true);
    const batchId = slot.batchId;
    const head: BatchHead = {
      batchId,
      consumerUid,
      queueUid: 'q-1',
      generation: 1,
      credentialHash: HASH,
      size,
      closed: false,
      outcome: undefined,
      applied: false,
      settled: {},
      all: undefined,
      deadline: Date.now() + 60_000,
      invisibleUntil: Date.now() + 90_000,
      doubtful: false,
      pendingDeadLetter: [],
    };
    const entries = Array.from({ length: size }, (_, i) => ({
      id: `m${i}`,
      ts: 1,
      attempts: 1,
      hadRecord: false,
    }));
    expect(await store.createBatch(head, { entries, moves: [] })).toBe(true);
    sent = [];
    failAt = undefined;
    return batchId;
  }

  const updates = () => sent.filter((n) => n === 'UpdateItemCommand').length;
  const settlement = async (batchId: string) => {
    const h = await store.getHead(batchId);
    return { settled: h?.settled, all: h?.all };
  };

  it('DL-03 distinct per-message calls are settled by one conditional write per 50 calls', async () => {
    const batchId = await openBatch(100);
    const calls: SettleCall[] = Array.from({ length: 100 }, (_, i) =>
      i % 3 === 0
        ? { kind: 'retry', index: i, delaySeconds: i }
        : i % 3 === 1
          ? { kind: 'ack', index: i }
          : { kind: 'retry', index: i },
    );
    const results = await store.settleMany(batchId, HASH, calls);
    expect(results).toEqual(calls.map(() => 'ok'));
    expect(updates()).toBe(2);
    const { settled, all } = await settlement(batchId);
    expect(all).toBeUndefined();
    expect(settled).toEqual(
      Object.fromEntries(calls.map((_c, i) => [String(i), i % 3 === 0 ? `r${i}` : i % 3 === 1 ? 'a' : 'r'])),
    );
  });

  it('DL-03 a group meeting an earlier settlement falls back to one write per call: each gets its own answer, first decision wins', async () => {
    const batchId = await openBatch(4);
    expect(await store.settle(batchId, HASH, { kind: 'retry', index: 1 })).toBe('ok');
    sent = [];
    const results = await store.settleMany(batchId, HASH, [
      { kind: 'ack', index: 0 },
      { kind: 'ack', index: 1 },
      { kind: 'ack', index: 2 },
    ]);
    expect(results).toEqual(['ok', 'already_settled', 'ok']);
    // The combined write was refused; then one write per call.
    expect(updates()).toBe(4);
    expect(await settlement(batchId)).toEqual({ settled: { '0': 'a', '1': 'r', '2': 'a' }, all: undefined });
  });

  it('DL-04 duplicates and batch-level calls keep the order of the calls: ack then retry of one message, ackAll after acks covers the rest', async () => {
    const batchId = await openBatch(4);
    const results = await store.settleMany(batchId, HASH, [
      { kind: 'ack', index: 0 },
      { kind: 'retry', index: 0 },
      { kind: 'retry', index: 1, delaySeconds: 5 },
      { kind: 'ackAll' },
      { kind: 'ack', index: 2 },
      { kind: 'retryAll' },
    ]);
    expect(results).toEqual(['ok', 'already_settled', 'ok', 'ok', 'already_settled', 'ok']);
    expect(await settlement(batchId)).toEqual({ settled: { '0': 'a', '1': 'r5' }, all: 'a' });
  });

  it('DL-09 a wrong credential, a closed batch or an unknown batch: every call answers unknown_batch, with one write', async () => {
    const calls: SettleCall[] = [
      { kind: 'ack', index: 0 },
      { kind: 'ack', index: 1 },
    ];
    const batchId = await openBatch(2);
    expect(await store.settleMany(batchId, 'another-hash', calls)).toEqual([
      'unknown_batch',
      'unknown_batch',
    ]);
    expect(updates()).toBe(1);
    expect(await settlement(batchId)).toEqual({ settled: {}, all: undefined });

    await store.closeBatch(batchId, 'returned', { at: Date.now() });
    sent = [];
    expect(await store.settleMany(batchId, HASH, calls)).toEqual(['unknown_batch', 'unknown_batch']);
    expect(updates()).toBe(1);
    expect(await store.settleMany(batchId, HASH, [{ kind: 'ackAll' }, ...calls])).toEqual([
      'unknown_batch',
      'unknown_batch',
      'unknown_batch',
    ]);
    expect(await settlement(batchId)).toEqual({ settled: {}, all: undefined });

    expect(await store.settleMany(`b-${randomUUID()}`, HASH, calls)).toEqual([
      'unknown_batch',
      'unknown_batch',
    ]);
  });

  it('DL-09 an index beyond the batch answers unknown_batch on its own; the other calls take effect', async () => {
    const batchId = await openBatch(2);
    expect(
      await store.settleMany(batchId, HASH, [
        { kind: 'ack', index: 0 },
        { kind: 'ack', index: 7 },
        { kind: 'retry', index: 1 },
      ]),
    ).toEqual(['ok', 'unknown_batch', 'ok']);
    expect(await settlement(batchId)).toEqual({ settled: { '0': 'a', '1': 'r' }, all: undefined });
  });

  it('DL-08 a write that fails: the calls it carried and every later one are write_failed; earlier ones stay recorded', async () => {
    const batchId = await openBatch(60);
    failAt = 2; // the second combined write (calls 50..59)
    const calls: SettleCall[] = Array.from({ length: 60 }, (_, i) => ({ kind: 'ack', index: i }));
    const results = await store.settleMany(batchId, HASH, [...calls, { kind: 'retryAll' }]);
    expect(results.slice(0, 50)).toEqual(calls.slice(0, 50).map(() => 'ok'));
    expect(results.slice(50)).toEqual(Array.from({ length: 11 }, () => 'write_failed'));
    // Nothing after the failed write was tried.
    expect(updates()).toBe(2);
    const { settled, all } = await settlement(batchId);
    expect(Object.keys(settled ?? {})).toHaveLength(50);
    expect(all).toBeUndefined();
  });

  it('DL-03 any group answers and settles exactly as its calls one by one (seeded random groups)', async () => {
    let seed = 12;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const randomCall = (): SettleCall => {
      const r = random();
      const index = Math.floor(random() * 9); // 8 messages: index 8 is out of range
      if (r < 0.4) return { kind: 'ack', index };
      if (r < 0.8)
        return random() < 0.5 ? { kind: 'retry', index } : { kind: 'retry', index, delaySeconds: 3 };
      if (r < 0.9) return { kind: 'ackAll' };
      return { kind: 'retryAll', delaySeconds: 7 };
    };
    for (let round = 0; round < 8; round++) {
      const calls = Array.from({ length: 1 + Math.floor(random() * 20) }, randomCall);
      const grouped = await openBatch(8);
      const oneByOne = await openBatch(8);
      const groupedResults = await store.settleMany(grouped, HASH, calls);
      const sequentialResults: string[] = [];
      for (const call of calls) sequentialResults.push(await store.settle(oneByOne, HASH, call));
      expect(groupedResults, JSON.stringify(calls)).toEqual(sequentialResults);
      expect(await settlement(grouped)).toEqual(await settlement(oneByOne));
    }
  });
});
