/**
 * A lane whose queue is empty ends, unless a send through the Host came after its slot was taken
 * (that send saw the lane receiving, so it started no lane of its own, and the lane's receive may
 * have missed it). Every take reads the wake count beside its write, so only a send after the
 * take keeps the lane; a slot sealed without a count (by an older Host) compares the last wake's
 * time with the take's instead, allowing for clock skew. A woken release takes the lane's next
 * slot in the same call, with the count it read, so the lane receives again in the same
 * invocation and is woken again only by a later send.
 */

import type { ReceiveMessageCommandInput } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { shardOf } from '../../../lambdas/adapters/aws/slot-shards.ts';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { runLane } from '../../../lambdas/delivery/batch-runner.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { createDeliveryHost, type DeliveryHost } from '../../support/delivery-harness.ts';

/** Calls `onReceive(n)` before the n-th ReceiveMessage (from 1) the Host's client sends from now on. */
function onReceives(
  d: DeliveryHost,
  onReceive: (n: number, input: ReceiveMessageCommandInput) => Promise<void>,
) {
  let n = 0;
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'ReceiveMessageCommand') {
        await onReceive(++n, args.input as ReceiveMessageCommandInput);
      }
      return next(args);
    },
    { step: 'initialize', name: `receives-${Math.random()}` },
  );
  return () => n;
}

/** A consumer with one slot per shard and an empty queue, and a slot of it outside shard 0. */
async function slotOutsideShardZero(d: DeliveryHost, name: string, sendsBefore = 0) {
  const { consumerUid } = await d.setup(name, 'export default { async queue() {} };', {
    maxBatchSize: 10,
    maxConcurrency: 3,
  });
  for (let i = 0; i < sendsBefore; i++) await d.host.delivery.countWake(consumerUid);
  const taken: Slot[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await d.host.delivery.acquire(consumerUid, 1);
    if (r.status === 'acquired') taken.push(r.slot);
  }
  const slot = taken.find((s) => shardOf(s.batchId) > 0);
  if (!slot) throw new Error('no slot outside shard 0');
  // The others are freed: only this lane holds a slot.
  for (const s of taken) if (s !== slot) await d.host.delivery.register(s, []);
  // The take read the wake count beside its write, in any shard.
  expect(slot.wakeSeq).toBe(sendsBefore);
  return { consumerUid, slot };
}

const lane = (d: DeliveryHost, slot: Slot, maxBatches = 10) =>
  runLane(
    slot,
    {
      messages: sqsMessageQueue(d.host.sqs),
      host: directBatchHost(d.host.delivery, d.host.loop),
      idleWaitSeconds: 1,
      invoker: { invoke: async () => 'returned' },
    },
    { maxBatches, budgetMs: 60_000 },
  );

describe('a lane woken on an empty queue', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('DL-01 outside shard 0, a send just before the take does not keep the lane: one receive, then it ends', async () => {
    d = await createDeliveryHost({ slotsPerShard: 1 });
    // A send through the Host counted just before the take: the take learns the count with it.
    const { slot } = await slotOutsideShardZero(d, 'sentbefore', 1);
    const receives = onReceives(d, async () => {});
    const result = await lane(d, slot);
    expect(result).toEqual({ idle: true, delivered: 0, batches: 1 });
    expect(receives()).toBe(1);
  });

  it('DL-01 outside shard 0, a send during the receive wakes the lane once: it receives again in the same invocation, then ends', async () => {
    d = await createDeliveryHost({ slotsPerShard: 1 });
    const { consumerUid, slot } = await slotOutsideShardZero(d, 'wokenonce');
    // A send through the Host while the lane's first receive waits.
    const receives = onReceives(d, async (n) => {
      if (n === 1) await d?.host.delivery.countWake(consumerUid);
    });
    const result = await lane(d, slot);
    // Woken once (one more receive, one more slot, no round of the state machine), then idle.
    expect(result).toEqual({ idle: true, delivered: 0, batches: 2 });
    expect(receives()).toBe(2);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('DL-01 a send after the successor slot was taken wakes the lane again; none after it, and it ends', async () => {
    d = await createDeliveryHost({ slotsPerShard: 1 });
    const { consumerUid, slot } = await slotOutsideShardZero(d, 'wokentwice');
    // A send while each of the lane's first two receives waits (the second slot was taken after
    // the first wake).
    const receives = onReceives(d, async (n) => {
      if (n <= 2) await d?.host.delivery.countWake(consumerUid);
    });
    const result = await lane(d, slot);
    expect(result).toEqual({ idle: true, delivered: 0, batches: 3 });
    expect(receives()).toBe(3);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('DL-02 a take whose wake-count read fails still answers its slot, and its idle release frees it: nothing is held unused', async () => {
    d = await createDeliveryHost({ slotsPerShard: 1 });
    const { consumerUid } = await d.setup('wakeread', 'export default { async queue() {} };', {
      maxBatchSize: 10,
      maxConcurrency: 1,
    });
    let refused = 0;
    d.host.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        const key = (args.input as { Key?: { pk?: { S?: string } } }).Key;
        if (context.commandName === 'GetItemCommand' && key?.pk?.S?.startsWith('WAKE#')) {
          refused++;
          throw Object.assign(new Error('Internal server error (test)'), { name: 'InternalServerError' });
        }
        return next(args);
      },
      { step: 'initialize', name: 'failWakeReads' },
    );
    const got = await d.host.delivery.acquire(consumerUid, 1);
    expect(got.status).toBe('acquired');
    if (got.status !== 'acquired') return;
    expect(got.slot.wakeSeq).toBeUndefined();
    expect(Object.keys(await d.host.delivery.slotsOf(consumerUid))).toEqual([got.slot.batchId]);
    const reg = await d.host.delivery.register(got.slot, []);
    expect(reg.deliver).toEqual([]);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
    // The take's read and the release's read were both refused.
    expect(refused).toBeGreaterThanOrEqual(2);
  });

  it('DL-01 a woken lane that does not go on takes no slot: it ends, and its next round is the state machine’s', async () => {
    d = await createDeliveryHost({ slotsPerShard: 1 });
    const { consumerUid, slot } = await slotOutsideShardZero(d, 'wokenlimit');
    onReceives(d, async (n) => {
      if (n === 1) await d?.host.delivery.countWake(consumerUid);
    });
    const result = await lane(d, slot, 1);
    expect(result).toEqual({ idle: false, delivered: 0, batches: 1 });
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });
});
