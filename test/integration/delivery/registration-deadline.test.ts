/**
 * A registration has a deadline: its messages' visibility. Once a message is visible again
 * another lane may receive and register it with the same attempt number, so a registration that
 * cannot be done before then registers nothing and counts no attempt (DL-07).
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
import { batchHead, storeOf } from './delivery-kit.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost();
});
afterAll(async () => d.close());

async function receive(queue: QueueTarget, visibilitySeconds: number): Promise<Received[]> {
  const out = await d.host.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.sqsUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: visibilitySeconds,
    }),
  );
  return (out.Messages ?? []).map((m) => {
    const { body: _b, ...envelope } = decodeEnvelope(m.Body) as NonNullable<
      ReturnType<typeof decodeEnvelope>
    >;
    return { receiptHandle: m.ReceiptHandle as string, receivedAt: Date.now(), envelope };
  });
}

async function slotOf(consumerUid: string): Promise<Slot> {
  const got = await d.host.delivery.acquire(consumerUid, 1);
  if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
  return got.slot;
}

describe('a registration’s deadline', () => {
  it('DL-07 a registration that outlives its messages’ visibility is taken back: the lane that received them again delivers attempt 1, alone', async () => {
    const { queue, consumerUid } = await d.setup('late', recordingWorker(d.logFile('late')), {
      maxConcurrency: 2,
      maxRetries: 3,
    });
    await d.host.producer.send(queue, 'once');
    const a = await slotOf(consumerUid);
    const first = await waitFor('the message', async () => {
      const r = await receive(queue, 6);
      return r.length > 0 ? r : undefined;
    });
    const receivedAt = Date.now();
    // The registration's transaction is slow (throttled, retried): meanwhile the message's 6 s
    // visibility ends, and another lane receives and registers it.
    const store = storeOf(d);
    const createBatch = store.createBatch.bind(store);
    let b: Awaited<ReturnType<typeof d.host.delivery.register>> | undefined;
    let delayed = false;
    store.createBatch = async (head, manifest) => {
      if (!delayed) {
        delayed = true;
        const again = await waitFor('the message visible again', async () => {
          const r = await receive(queue, 30);
          return r.length > 0 ? r : undefined;
        });
        b = await d.host.delivery.register(await slotOf(consumerUid), again);
      }
      return createBatch(head, manifest);
    };
    let late: Awaited<ReturnType<typeof d.host.delivery.register>>;
    try {
      late = await d.host.delivery.register(a, first, { visibleForMs: 6_000 - (Date.now() - receivedAt) });
    } finally {
      store.createBatch = createBatch;
    }
    expect(b?.deliver.map((x) => x.attempts)).toEqual([1]);
    // The late one registers nothing: no credential, no batch, no slot.
    expect(late.credential).toBe('');
    expect(late.deliver).toEqual([]);
    expect(await batchHead(d, a.batchId)).toBeUndefined();
    expect(Object.keys(await d.host.delivery.slotsOf(consumerUid))).not.toContain(a.batchId);
  });

  it('DL-07 a registration with time left registers as before', async () => {
    const { queue, consumerUid } = await d.setup('on-time', recordingWorker(d.logFile('on-time')));
    await d.host.producer.send(queue, 'x');
    const a = await slotOf(consumerUid);
    const got = await waitFor('the message', async () => {
      const r = await receive(queue, 30);
      return r.length > 0 ? r : undefined;
    });
    const reg = await d.host.delivery.register(a, got, { visibleForMs: 29_000 });
    expect(reg.deliver.map((x) => x.attempts)).toEqual([1]);
    await d.host.delivery.finalizeAsRunner(a.batchId, reg.credential, 'returned');
  });
});
