/**
 * Two runners of one lane side by side: the state machine retries InvokeWorker after
 * `Lambda.ServiceException` while the first invocation still runs, so a second runner starts with
 * the same slot. The second is refused at registration and gives what it received back at once;
 * RecoverBatch, which runs after the second fails, leaves the first runner's live batch alone: its
 * handler settles and finalises as usual, and nothing is counted twice (DL-02, DL-03, DL-07).
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Received, Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { attemptsRecord, batchHead, queueCounts } from './delivery-kit.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost();
});
afterAll(async () => d.close());

/** One receive of at most `max` messages, as a runner's (30 s visibility). */
async function receive(queue: QueueTarget, max: number): Promise<Received[]> {
  const out = await d.host.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.sqsUrl,
      MaxNumberOfMessages: max,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 30,
      MessageSystemAttributeNames: ['SentTimestamp'],
    }),
  );
  return (out.Messages ?? []).map((m) => {
    const { body: _b, ...envelope } = decodeEnvelope(m.Body) as NonNullable<
      ReturnType<typeof decodeEnvelope>
    >;
    return { receiptHandle: m.ReceiptHandle as string, receivedAt: Date.now(), envelope };
  });
}

async function receiveExactly(queue: QueueTarget, n: number): Promise<Received[]> {
  const got: Received[] = [];
  await waitFor(`${n} messages`, async () => {
    got.push(...(await receive(queue, n - got.length)));
    return got.length >= n;
  });
  return got;
}

describe('a duplicate InvokeWorker beside a running one', () => {
  it('DL-02 DL-03 DL-07 the second runner is refused and gives its messages back at once; RecoverBatch leaves the live batch to its runner', async () => {
    const { queue, consumerUid } = await d.setup('twins', recordingWorker(d.logFile('twins')), {
      maxBatchSize: 2,
      maxConcurrency: 1,
      maxRetries: 0,
    });
    await d.host.producer.sendBatch(
      queue,
      ['a', 'b', 'c', 'd'].map((body) => ({ body })),
    );
    const got = await d.host.delivery.acquire(consumerUid, 1);
    const slot = (got as { slot: Slot }).slot;
    // The first runner registers its two messages; its handler runs.
    const first = await receiveExactly(queue, 2);
    const a = await d.host.delivery.register(slot, first);
    expect(a.deliver).toHaveLength(2);
    // The second runner, with the same slot, receives the other two and is refused.
    const second = await receiveExactly(queue, 2);
    await expect(d.host.delivery.register(slot, second)).rejects.toMatchObject({ name: 'unknown_batch' });
    // What it received is back now, not when its 30 s visibility ends.
    await waitFor(
      'the second runner’s messages visible again',
      async () => (await queueCounts(d, queue)).visible === 2,
      5_000,
    );
    // The second runner's failure sends the lane to RecoverBatch: the live batch keeps its slot.
    const recovered = await d.host.loop.step({ action: 'recover', consumerUid, batchId: slot.batchId });
    expect((recovered as { waitSeconds?: number }).waitSeconds).toBeGreaterThan(0);
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    // The first runner's handler goes on: its settlements count, and its batch finalises as usual.
    await d.host.delivery.settle(slot.batchId, a.credential, { kind: 'ack', index: 0 });
    await d.host.delivery.settle(slot.batchId, a.credential, { kind: 'ack', index: 1 });
    await d.host.delivery.finalizeAsRunner(slot.batchId, a.credential, 'returned', { slot });
    for (const r of first) expect(await attemptsRecord(d, queue.queueUid, r.envelope.id)).toBeUndefined();
    // The given-back messages are delivered later as their first attempt (maxRetries 0: once).
    const next = await d.host.delivery.acquire(consumerUid, 1);
    const again = await receiveExactly(queue, 2);
    const b = await d.host.delivery.register((next as { slot: Slot }).slot, again);
    expect(b.deliver.map((x) => x.attempts)).toEqual([1, 1]);
    expect(new Set(again.map((r) => r.envelope.id))).toEqual(new Set(second.map((r) => r.envelope.id)));
  });
});
