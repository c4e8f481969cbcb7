/**
 * How lanes end after a burst (issue 13: no idle cycle per lane at the end of a burst). A lane
 * whose batch came back short leaves the idle wait to another lane that is receiving: one 1 s
 * poll, an empty registration, and it ends, instead of every lane waiting idleWaitSeconds for a
 * message (on AWS each such wait is a worker invocation running). Without another lane receiving,
 * the lane waits as before, so a consumer keeps one lane watching its queue.
 */

import type { ReceiveMessageCommandInput } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { LEFT_IDLE_WAIT_SECONDS, leavesIdleWait, runLane } from '../../../lambdas/delivery/batch-runner.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { createDeliveryHost, type DeliveryHost } from '../../support/delivery-harness.ts';
import { queueCounts } from './delivery-kit.ts';

/** The WaitTimeSeconds of every ReceiveMessage the Host's client sends from now on. */
function recordWaits(d: DeliveryHost): number[] {
  const waits: number[] = [];
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'ReceiveMessageCommand') {
        waits.push(Number((args.input as ReceiveMessageCommandInput).WaitTimeSeconds ?? 0));
      }
      return next(args);
    },
    { step: 'initialize', name: `waits-${Math.random()}` },
  );
  return waits;
}

async function consumerWith(d: DeliveryHost, name: string, messages: number) {
  const { queue, consumerUid } = await d.setup(name, 'export default { async queue() {} };', {
    maxBatchSize: 10,
    maxConcurrency: 2,
  });
  await d.host.producer.sendBatch(
    queue,
    Array.from({ length: messages }, (_, i) => ({ body: `${name}${i}` })),
  );
  return { queue, consumerUid };
}

async function slotOf(d: DeliveryHost, consumerUid: string): Promise<Slot> {
  const r = await d.host.delivery.acquire(consumerUid, 1);
  if (r.status !== 'acquired') throw new Error('no slot');
  return r.slot;
}

/** One lane from `slot` with the given idle wait (the local Host defaults to 10 s), the control loop’s lanes off. */
function laneFrom(d: DeliveryHost, slot: Slot, idleWaitSeconds: number) {
  return runLane(
    slot,
    {
      messages: sqsMessageQueue(d.host.sqs),
      host: directBatchHost(d.host.delivery, d.host.loop),
      idleWaitSeconds,
      invoker: { invoke: async () => 'returned' },
    },
    { maxBatches: 100, budgetMs: 60_000 },
  );
}

describe('lanes at the end of a burst', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('DL-01 a lane whose batch came back short ends after one 1 s poll while another lane is receiving', async () => {
    d = await createDeliveryHost();
    const { queue, consumerUid } = await consumerWith(d, 'dry', 5);
    const mine = await slotOf(d, consumerUid);
    // Another lane of the consumer is receiving (its slot taken, nothing registered yet).
    const other = await slotOf(d, consumerUid);
    const waits = recordWaits(d);
    const result = await laneFrom(d, mine, 10);
    expect(result).toEqual({ idle: true, delivered: 5, batches: 2 });
    // The first gathering waited as usual (a long poll, then a short one for the rest of the
    // batch); after the short batch, the next gathering made one 1 s poll, not a 10 s wait.
    expect(waits).toEqual([10, 0, LEFT_IDLE_WAIT_SECONDS]);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    // The lane freed its slot; the other lane's is the only one held.
    expect(Object.keys(await d.host.delivery.slotsOf(consumerUid))).toEqual([other.batchId]);
    await directBatchHost(d.host.delivery, d.host.loop).register(other, []);
  });

  it('DL-01 with no other lane receiving, the lane waits for the next message as before', async () => {
    d = await createDeliveryHost();
    const { queue, consumerUid } = await consumerWith(d, 'watch', 5);
    const mine = await slotOf(d, consumerUid);
    expect(mine.taken?.receiving).toBe(0);
    const waits = recordWaits(d);
    const result = await laneFrom(d, mine, 2);
    expect(result).toEqual({ idle: true, delivered: 5, batches: 2 });
    // The second gathering long-polls for the idle wait, as the first did.
    expect(waits).toEqual([2, 0, 2]);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('leaves the idle wait only after a short batch, with nothing received ahead, and another lane receiving', () => {
    const slot = (receiving?: number) =>
      ({ taken: { at: 0, held: 2, due: {}, ...(receiving !== undefined ? { receiving } : {}) } }) as Slot;
    expect(leavesIdleWait(slot(1), { dry: true })).toBe(true);
    expect(leavesIdleWait(slot(1), {})).toBe(false);
    expect(leavesIdleWait(slot(0), { dry: true })).toBe(false);
    // A slot sealed by an older Host says nothing of the others: wait as before.
    expect(leavesIdleWait(slot(), { dry: true })).toBe(false);
    expect(leavesIdleWait({} as Slot, { dry: true })).toBe(false);
  });
});
