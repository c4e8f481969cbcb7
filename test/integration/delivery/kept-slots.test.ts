/**
 * A slot kept after a failed invocation is freed as soon as the batch's head shows its handler
 * ended, not at the slot's deadline (the worker timeout, 15 minutes by default). The caller of an
 * invocation can see a failure that says nothing of the runner (`Lambda.ServiceException` while
 * the function goes on, a second runner's own error), so RecoverBatch keeps the slot (DL-02). But
 * the runner closes the batch only after its handler returned or threw: a batch its runner closed
 * and applied, or closed a while ago, has no handler left, and keeping its slot only stalls the
 * consumer — all of it at maxConcurrency 1. Against DynamoDB Local and the SQS stand-in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashCredential } from '../../../lambdas/delivery/delivery-context.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import { attemptsRecord, batchHead, queueCounts, receiveAsRunner, storeOf } from './delivery-kit.ts';

let d: DeliveryHost;
/** Added to the Host's clock: the test moves time on without waiting for it. */
let offsetMs = 0;
beforeAll(async () => {
  // A worker timeout far past the clock moves below: a slot freed here is not one that expired.
  d = await createDeliveryHost({ workerTimeoutMs: 300_000, clock: () => Date.now() + offsetMs });
});
afterAll(async () => d.close());

const serviceException = { Error: 'Lambda.ServiceException', Cause: 'the invocation’s answer was lost' };

async function oneBatch(name: string, settings: Record<string, unknown>) {
  const { queue, dlq, consumerUid } = await d.setup(name, recordingWorker(d.logFile(name)), {
    maxBatchSize: 1,
    maxConcurrency: 1,
    ...settings,
  });
  await d.host.producer.sendBatch(queue, [{ body: 'x' }]);
  const got = await d.host.delivery.acquire(consumerUid, 1);
  if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
  const slot: Slot = got.slot;
  const received = await receiveAsRunner(d, queue);
  const reg = await d.host.delivery.register(slot, received);
  expect(reg.deliver).toHaveLength(1);
  return {
    queue,
    dlq,
    consumerUid,
    slot,
    reg,
    id: (received[0] as { envelope: { id: string } }).envelope.id,
  };
}

/** One batch out of retries whose handler threw, finalised by its runner: a move is owed. */
async function finalizedOwingAMove(name: string) {
  const batch = await oneBatch(name, { maxRetries: 0, deadLetter: true });
  const fin = await d.host.delivery.finalizeAsRunner(batch.slot.batchId, batch.reg.credential, 'threw', {
    slot: batch.slot,
    ...(batch.reg.manifest ? { manifest: batch.reg.manifest } : {}),
  });
  expect(fin.deadLetter).toEqual([batch.id]);
  return batch;
}

/** RecoverBatch as the state machine calls it after the lane's invocation failed. */
const recoverAfterFailure = async (consumerUid: string, batchId: string) =>
  (
    (await d.host.loop.step({ action: 'recover', consumerUid, batchId, failure: serviceException })) as {
      waitSeconds: number;
    }
  ).waitSeconds;

describe('DL-02 a kept slot whose handler has ended is freed before its deadline', () => {
  it('DL-07 DL-02 a dead-letter move under way when the runner’s caller saw a failure stays the runner’s: one copy, nothing returned meanwhile', async () => {
    const { queue, dlq, consumerUid, slot, reg, id } = await finalizedOwingAMove('moving');
    // Its caller sees a lost answer while the runner is still sending the copy (a slow send of
    // ten large bodies); a supervisor round with every slot taken reads the head meanwhile.
    expect(await recoverAfterFailure(consumerUid, slot.batchId)).toBeGreaterThan(0);
    const consumer = { consumerUid, generation: 1, maxBatchSize: 1, maxConcurrency: 1 };
    expect((await d.host.loop.superviseConsumer(consumer, async () => 0)).recovered).toBe(0);
    // Returned now, the message would be received again out of retries and moved a second time.
    expect((await queueCounts(d, queue)).visible).toBe(0);
    await d.host.delivery.deadLetterAsRunner(
      slot.batchId,
      reg.credential,
      [{ id, body: new Uint8Array([120]) }],
      true,
    );
    expect(await storeOf(d).slots(consumerUid)).toEqual({});
    expect(await queueCounts(d, queue)).toMatchObject({ visible: 0, inFlight: 0 });
    expect((await queueCounts(d, dlq as QueueTarget)).visible).toBe(1);
  });

  it('DL-02 DL-08 RecoverBatch 30 s after the runner applied its batch but its dead-letter move failed: the slot is freed and the message returns to be moved', async () => {
    const { queue, consumerUid, slot } = await finalizedOwingAMove('applied');
    // The runner's move fails and so does its invocation, but its caller sees a lost answer, later
    // than any move of the runner's could still be under way.
    offsetMs += 31_000;
    expect(await recoverAfterFailure(consumerUid, slot.batchId)).toBe(0);
    expect(await storeOf(d).slots(consumerUid)).toEqual({});
    // The message is back now (not at the deadline) and is moved when it is received again.
    expect((await queueCounts(d, queue)).visible).toBe(1);
  });

  it('DL-02 the supervisor’s round frees the slot of a batch its runner closed over 30 s ago and never applied', async () => {
    const { queue, consumerUid, slot, reg, id } = await oneBatch('closed', { maxRetries: 2 });
    // The runner closes its batch after the handler threw; every answer after that is lost.
    await storeOf(d).closeBatch(slot.batchId, 'threw', {
      at: Date.now() + offsetMs,
      credentialHash: hashCredential(reg.credential),
    });
    // Its caller saw a failure at once: the runner may still be applying, so the slot is kept.
    const r = await d.host.loop.step({
      action: 'recover',
      consumerUid,
      batchId: slot.batchId,
      failure: serviceException,
    });
    expect((r as { waitSeconds: number }).waitSeconds).toBeGreaterThan(0);
    expect(Object.keys(await storeOf(d).slots(consumerUid))).toEqual([slot.batchId]);
    offsetMs += 31_000;
    const consumer = { consumerUid, generation: 1, maxBatchSize: 1, maxConcurrency: 1 };
    const round = await d.host.loop.superviseConsumer(consumer, async () => 0);
    expect(round.recovered).toBe(1);
    expect(await storeOf(d).slots(consumerUid)).toEqual({});
    expect((await batchHead(d, slot.batchId))?.applied).toBe(true);
    // Unsettled, the message is retried with its attempt counted (its receive's handle is past its
    // visibility on the moved clock, so it returns when that ends).
    expect((await attemptsRecord(d, queue.queueUid, id))?.attempts).toBe(1);
  });

  it('DL-02 a kept slot whose batch is still open stays kept through the round (its handler may run)', async () => {
    const { consumerUid, slot } = await oneBatch('open', { maxRetries: 2 });
    await d.host.loop.step({
      action: 'recover',
      consumerUid,
      batchId: slot.batchId,
      failure: serviceException,
    });
    offsetMs += 31_000;
    const consumer = { consumerUid, generation: 1, maxBatchSize: 1, maxConcurrency: 1 };
    const round = await d.host.loop.superviseConsumer(consumer, async () => 0);
    expect(round.recovered).toBe(0);
    expect(Object.keys(await storeOf(d).slots(consumerUid))).toEqual([slot.batchId]);
  });
});
