/**
 * How lanes end. Sends through the Host count a wake, which starts a lane when none is receiving
 * and keeps a lane whose empty receive it raced: so a lane fed that way polls once (1 s) for a
 * first message and ends, instead of waiting idleWaitSeconds (on AWS each wait is a worker
 * invocation running). A lane whose queue gets messages straight from SQS, which no wake
 * announces, waits for the next one as long as no other lane of its consumer is receiving; a lane
 * inside a due lane's window polls until the window ends.
 */

import type { ReceiveMessageCommandInput } from '@aws-sdk/client-sqs';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import {
  idleWaitFor,
  LEFT_IDLE_WAIT_SECONDS,
  leavesIdleWait,
  runLane,
} from '../../../lambdas/delivery/batch-runner.ts';
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

/** A consumer with `messages` waiting: sent through the Host, or straight to SQS (`direct`). */
async function consumerWith(d: DeliveryHost, name: string, messages: number, direct = false) {
  const { queue, consumerUid } = await d.setup(name, 'export default { async queue() {} };', {
    maxBatchSize: 10,
    maxConcurrency: 2,
  });
  const bodies = Array.from({ length: messages }, (_, i) => `${name}${i}`);
  if (direct) {
    await d.host.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queue.sqsUrl,
        Entries: bodies.map((body, i) => ({ Id: String(i), MessageBody: body })),
      }),
    );
  } else {
    await d.host.producer.sendBatch(
      queue,
      bodies.map((body) => ({ body })),
    );
  }
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

describe('how lanes end', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('DL-01 a lane fed through the Host polls 1 s for a first message and ends, holding no idle wait', async () => {
    d = await createDeliveryHost();
    const { queue, consumerUid } = await consumerWith(d, 'woken', 5);
    const mine = await slotOf(d, consumerUid);
    expect(mine.taken?.receiving).toBe(0);
    const waits = recordWaits(d);
    const result = await laneFrom(d, mine, 10);
    expect(result).toEqual({ idle: true, delivered: 5, batches: 2 });
    // A 1 s long poll found the batch (a short one then for the rest of it); after it, one 1 s
    // poll, then the lane ended: a later send wakes a lane.
    expect(waits).toEqual([LEFT_IDLE_WAIT_SECONDS, 0, LEFT_IDLE_WAIT_SECONDS]);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('DL-01 a lane whose queue gets messages straight from SQS waits for the next one, with no other lane receiving', async () => {
    d = await createDeliveryHost();
    const { queue, consumerUid } = await consumerWith(d, 'watch', 5, true);
    const mine = await slotOf(d, consumerUid);
    const waits = recordWaits(d);
    const result = await laneFrom(d, mine, 2);
    expect(result).toEqual({ idle: true, delivered: 5, batches: 2 });
    // The second gathering long-polls for the idle wait: no wake would start a lane for the next.
    expect(waits).toEqual([LEFT_IDLE_WAIT_SECONDS, 0, 2]);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('DL-01 of lanes fed straight from SQS, one whose batch came back short leaves the wait to another receiving', async () => {
    d = await createDeliveryHost();
    const { queue, consumerUid } = await consumerWith(d, 'dry', 5, true);
    const mine = await slotOf(d, consumerUid);
    // Another lane of the consumer is receiving (its slot taken, nothing registered yet).
    const other = await slotOf(d, consumerUid);
    const waits = recordWaits(d);
    const result = await laneFrom(d, mine, 10);
    expect(result).toEqual({ idle: true, delivered: 5, batches: 2 });
    expect(waits).toEqual([LEFT_IDLE_WAIT_SECONDS, 0, LEFT_IDLE_WAIT_SECONDS]);
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    // The lane freed its slot; the other lane's is the only one held.
    expect(Object.keys(await d.host.delivery.slotsOf(consumerUid))).toEqual([other.batchId]);
    await directBatchHost(d.host.delivery, d.host.loop).register(other, []);
  });

  it('DL-01 DL-06 a lane that polled once and finds a due lane’s claim covering now goes on, polling to the window’s end', async () => {
    // The Host's idle wait (the claim's window) is 4 s; the lane took its slot before the claim,
    // so its gathering polls once (1 s).
    d = await createDeliveryHost({ idleWaitSeconds: 4 });
    const { consumerUid } = await d.setup('covered', 'export default { async queue() {} };', {
      maxBatchSize: 10,
      maxConcurrency: 2,
    });
    const mine = await slotOf(d, consumerUid);
    expect(mine.taken?.watchUntil).toBeUndefined();
    // Messages due next second: the claim refuses other lanes for them within the window, and its
    // own lane may find every slot held (here, the one slot is this lane's).
    await d.host.loop.wakeLater(consumerUid, 1, [1]);
    const waits = recordWaits(d);
    const started = Date.now();
    const result = await laneFrom(d, mine, 10);
    expect(result.idle).toBe(true);
    // One 1 s poll, then the release read the claim and the lane went on: it polled on until the
    // window (the claimed second + 4 s) had passed, instead of ending after its first poll.
    expect(waits[0]).toBe(LEFT_IDLE_WAIT_SECONDS);
    expect(waits.length).toBeGreaterThan(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('waits the idle wait only inside a due lane’s window or for messages sent straight to SQS', () => {
    const now = 1_000_000;
    const slot = (taken: Partial<NonNullable<Slot['taken']>> = {}) =>
      ({ taken: { at: now, held: 1, due: {}, receiving: 0, ...taken } }) as Slot;
    expect(idleWaitFor(slot(), {}, 20, now)).toBe(LEFT_IDLE_WAIT_SECONDS);
    expect(idleWaitFor(slot(), { unannounced: true }, 20, now)).toBe(20);
    // Another lane receiving after a short batch watches instead.
    expect(idleWaitFor(slot({ receiving: 1 }), { unannounced: true, dry: true }, 20, now)).toBe(
      LEFT_IDLE_WAIT_SECONDS,
    );
    // A due lane's window: to its end, never past the idle wait.
    expect(idleWaitFor(slot({ watchUntil: now + 7_500 }), {}, 20, now)).toBe(8);
    expect(idleWaitFor(slot({ watchUntil: now + 60_000 }), {}, 20, now)).toBe(20);
    expect(idleWaitFor(slot({ watchUntil: now - 1 }), {}, 20, now)).toBe(LEFT_IDLE_WAIT_SECONDS);
    // An idle wait of 0 (a setting) is never raised.
    expect(idleWaitFor(slot({ watchUntil: now + 7_500 }), { unannounced: true }, 0, now)).toBe(0);
    // A slot sealed by an older Host says nothing of the others.
    expect(idleWaitFor({} as Slot, {}, 20, now)).toBe(LEFT_IDLE_WAIT_SECONDS);
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
