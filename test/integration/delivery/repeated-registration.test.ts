/**
 * A registration whose answer was lost and which is sent again (by the runner, or by the Lambda
 * client under it) with the same slot and the same received messages. Against DynamoDB Local and
 * the SQS stand-in, through the delivery service the batch host calls: the repeat is answered as
 * the first call was, so the handler runs the batch the Host recorded and no attempt is counted
 * for a handler that never ran (DL-07).
 */
import { ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import {
  attemptsRecord,
  batchHead,
  outcomeOf,
  queueCounts,
  receiveAsRunner,
  sleep,
  waitDrained,
} from './delivery-kit.ts';

/** Acquires a slot of `consumerUid` (there must be one free). */
async function slotOf(d: DeliveryHost, consumerUid: string): Promise<Slot> {
  const a = await d.host.attachments.get(consumerUid);
  const got = await d.host.delivery.acquire(consumerUid, a?.generation ?? 1);
  if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
  return got.slot;
}

describe('a registration repeated after its answer was lost (DL-07)', () => {
  let d: DeliveryHost;
  // No dispatcher: the tests act as the runner.
  beforeAll(async () => {
    d = await createDeliveryHost();
  });
  afterAll(async () => d.close());

  it('DL-07 RC-04 the same slot and received messages again: answered as the first call (credential, deliver list, deadline, manifest), the messages held again; finalised with that answer, nothing is counted', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('repeat', recordingWorker(d.logFile('repeat')), {
      maxConcurrency: 1,
      maxRetries: 0,
    });
    const ids = await d.host.producer.sendBatch(queue, [{ body: 'a' }, { body: 'b' }]);
    const slot = await slotOf(d, consumerUid);
    const got = await receiveAsRunner(d, queue);
    expect(got).toHaveLength(2);
    const first = await d.host.delivery.register(slot, got);
    expect(first.deliver.map((x) => x.attempts)).toEqual([1, 1]);
    // The first call ended between its transaction and its hold (its function cut off): the
    // messages are hidden only briefly, as gathering left them.
    await d.host.sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queue.sqsUrl,
        Entries: got.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle, VisibilityTimeout: 1 })),
      }),
    );
    const again = await d.host.delivery.register(slot, got);
    expect(again).toMatchObject({
      credential: first.credential,
      deadline: first.deadline,
      deliver: first.deliver,
      moves: first.moves,
      manifest: first.manifest,
    });
    // Held again until the batch's hold ends, not handed to another receive.
    await sleep(2_000);
    expect(await queueCounts(d, queue)).toMatchObject({ visible: 0, inFlight: 2 });
    // The handler ran on the repeated answer and returned: both acknowledged, none counted.
    const fin = await d.host.delivery.finalizeAsRunner(slot.batchId, again.credential, 'returned', {
      slot,
      ...(again.manifest ? { manifest: again.manifest } : {}),
    });
    expect(fin.deadLetter).toEqual([]);
    await waitDrained(d, queue, 10_000);
    for (const id of ids) expect(await attemptsRecord(d, queue.queueUid, id)).toBeUndefined();
    expect(await batchHead(d, slot.batchId)).toMatchObject({ closed: true, outcome: 'returned' });
  });

  it('DL-09 the same slot with messages of another receive, or with only some of the batch’s, is still refused unknown_batch', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('other', recordingWorker(d.logFile('other')), {
      maxConcurrency: 1,
    });
    await d.host.producer.sendBatch(queue, [{ body: 'a' }, { body: 'b' }]);
    const slot = await slotOf(d, consumerUid);
    const got = await receiveAsRunner(d, queue);
    expect(got).toHaveLength(2);
    const first = await d.host.delivery.register(slot, got);
    await d.host.producer.send(queue, 'later');
    const other = await receiveAsRunner(d, queue);
    expect(other).toHaveLength(1);
    expect(await outcomeOf(d.host.delivery.register(slot, other))).toBe('unknown_batch');
    expect(await outcomeOf(d.host.delivery.register(slot, got.slice(0, 1)))).toBe('unknown_batch');
    // The batch still has its own messages: the full repeat is answered, and they are finalised.
    expect(await d.host.delivery.register(slot, got)).toMatchObject({ credential: first.credential });
    await d.host.delivery.finalizeAsRunner(slot.batchId, first.credential, 'returned');
  });

  it('DL-07 a closed batch is not registered again by a repeat: refused unknown_batch', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('closed', recordingWorker(d.logFile('closed')), {
      maxConcurrency: 1,
    });
    await d.host.producer.send(queue, 'x');
    const slot = await slotOf(d, consumerUid);
    const got = await receiveAsRunner(d, queue);
    const first = await d.host.delivery.register(slot, got);
    await d.host.delivery.finalizeAsRunner(slot.batchId, first.credential, 'returned');
    expect(await outcomeOf(d.host.delivery.register(slot, got))).toBe('unknown_batch');
  });
});
