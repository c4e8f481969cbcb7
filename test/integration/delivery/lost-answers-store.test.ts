/**
 * Conditional writes of the delivery store whose answer is lost, against DynamoDB Local: the write
 * commits, the connection drops, the SDK sends it again, and the second try fails its condition
 * against the first one's change (test/support/lost-answer.ts). Each write must recognise its own
 * first try: a recorded settlement answers `ok`, a taken start lease holds.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoAttachments } from '../../../lambdas/adapters/aws/dynamodb-attachments.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import type { BatchHead } from '../../../lambdas/delivery/delivery-store.ts';
import { loseAnswers } from '../../support/lost-answer.ts';

const HASH = 'hash-of-the-batch-credential';

describe('conditional writes whose answer is lost recognise their own first try', () => {
  let client: DynamoDBClient;
  let table: string;
  let store: DynamoDeliveryStore;
  let injected: { lost: () => number; remove: () => void } | undefined;

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
    store = new DynamoDeliveryStore(client, table);
  });
  afterEach(() => {
    injected?.remove();
    injected = undefined;
  });

  /** Loses the answer of the next UpdateItem whose update expression matches `pattern`. */
  const loseNextUpdate = (pattern: RegExp) => {
    injected = loseAnswers(
      client,
      (command, input) => command === 'UpdateItemCommand' && pattern.test(String(input.UpdateExpression)),
    );
    return injected;
  };

  /** An open batch of `size` messages with nothing settled. */
  async function openBatch(size: number): Promise<string> {
    const consumerUid = `c-${randomUUID()}`;
    await store.initSlots(consumerUid);
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
    return batchId;
  }

  it('DL-03 DL-08 a first settlement whose write committed but whose answer was lost answers ok, not already_settled', async () => {
    const batchId = await openBatch(3);
    const lost = loseNextUpdate(/^SET settled\./);
    expect(await store.settle(batchId, HASH, { kind: 'ack', index: 0 })).toBe('ok');
    expect(lost.lost()).toBe(1);
    lost.remove();
    // The same for a retry with its delay.
    const lostRetry = loseNextUpdate(/^SET settled\./);
    expect(await store.settle(batchId, HASH, { kind: 'retry', index: 1, delaySeconds: 7 })).toBe('ok');
    expect(lostRetry.lost()).toBe(1);
    expect((await store.getHead(batchId))?.settled).toEqual({ '0': 'a', '1': 'r7' });
    // A second settlement of a message is still refused: the token is the call's, not the message's.
    expect(await store.settle(batchId, HASH, { kind: 'ack', index: 0 })).toBe('already_settled');
    expect(await store.settle(batchId, HASH, { kind: 'retry', index: 1 })).toBe('already_settled');
  });

  it('DL-03 DL-08 a group settled in one write whose answer was lost answers ok for every call', async () => {
    const batchId = await openBatch(4);
    // One write for the three (`SET #s.#i0 = …, #s.#i1 = …`), whose answer is lost.
    const lost = loseNextUpdate(/^SET #s\.#i0/);
    const answers = await store.settleMany(batchId, HASH, [
      { kind: 'ack', index: 0 },
      { kind: 'retry', index: 2 },
      { kind: 'ack', index: 3 },
    ]);
    expect(lost.lost()).toBe(1);
    expect(answers).toEqual(['ok', 'ok', 'ok']);
    expect((await store.getHead(batchId))?.settled).toEqual({ '0': 'a', '2': 'r', '3': 'a' });
    lost.remove();
    // A group repeating a settled index still gets already_settled for it.
    expect(
      await store.settleMany(batchId, HASH, [
        { kind: 'ack', index: 1 },
        { kind: 'ack', index: 2 },
      ]),
    ).toEqual(['ok', 'already_settled']);
  });

  it('DL-03 a batch-level settlement whose answer was lost answers ok even if the batch closed before the retry', async () => {
    const batchId = await openBatch(2);
    // The first try commits; the batch is closed (its handler ended) before the SDK's retry.
    injected = loseAnswers(
      client,
      (command, input) => command === 'UpdateItemCommand' && /^SET #all/.test(String(input.UpdateExpression)),
      { between: () => store.closeBatch(batchId, 'returned', { at: Date.now(), credentialHash: HASH }) },
    );
    expect(await store.settle(batchId, HASH, { kind: 'ackAll' })).toBe('ok');
    expect(injected.lost()).toBe(1);
    expect(await store.getHead(batchId)).toMatchObject({ all: 'a', closed: true });
  });

  it('DL-02 a wake’s start lease whose write committed but whose answer was lost is held by that wake', async () => {
    const consumerUid = `c-${randomUUID()}`;
    await store.initSlots(consumerUid);
    const now = Date.now();
    const lost = loseNextUpdate(/^SET starting/);
    expect(await store.claimStart(consumerUid, now, 30_000)).toBe(true);
    expect(lost.lost()).toBe(1);
    lost.remove();
    expect((await store.wake(consumerUid, now)).starting).toBe(now + 30_000);
    // Another wake within the lease still finds it taken.
    expect(await store.claimStart(consumerUid, now + 1, 30_000)).toBe(false);
    // Once it ran out, a wake takes it again.
    expect(await store.claimStart(consumerUid, now + 30_001, 30_000)).toBe(true);
  });

  it('DL-01 the lane a wake started ends the start lease with its take; the lease is never on a slot shard', async () => {
    const consumerUid = `c-${randomUUID()}`;
    await store.initSlots(consumerUid);
    const now = Date.now();
    expect(await store.claimStart(consumerUid, now, 30_000)).toBe(true);
    expect((await store.wake(consumerUid, now)).starting, 'a wake sees the lease').toBe(now + 30_000);
    const taken = await store.takeSlot(consumerUid, `b${randomUUID()}`, now + 60_000, {
      max: 5,
      generation: 1,
    });
    expect(taken.taken).toBe(true);
    // A send now sees the lane's slot, not a lease: once that lane rests, the next send starts one.
    expect((await store.wake(consumerUid, now)).starting, 'the lease after the take').toBeUndefined();
    expect(await store.claimStart(consumerUid, now + 1, 30_000), 'a later wake takes the lease again').toBe(
      true,
    );
    const shard = await store.dispatchState(consumerUid);
    expect(shard.starting, 'the slot map carries no lease').toBeUndefined();
  });
});
