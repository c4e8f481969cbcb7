/**
 * Two runners of one lane side by side: the state machine retries InvokeWorker after
 * `Lambda.ServiceException` while the first invocation still runs, so a second runner starts with
 * the same slot. The second is refused at registration and gives what it received back at once;
 * RecoverBatch, which runs after the second fails, leaves the first runner's live batch alone: its
 * handler settles and finalises as usual, and nothing is counted twice (DL-02, DL-03, DL-07).
 * A second runner that registers nothing (its receive found the messages the first holds, came
 * too late for them, or its manifest could not be written) frees no slot the first runner's batch
 * holds, and closes nothing of that batch.
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
import { attemptsRecord, batchHead, queueCounts, storeOf } from './delivery-kit.ts';

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

/** Runs `fn` while every manifest write is refused, as when throttling outlasts the SDK's retries. */
async function refusingManifests(fn: () => Promise<unknown>): Promise<void> {
  const name = 'refuseManifests';
  d.host.dynamodb.middlewareStack.add(
    (next, context) => async (args) => {
      const item = (args.input as { Item?: { sk?: { S?: string } } }).Item;
      if (context.commandName === 'PutItemCommand' && item?.sk?.S?.startsWith('manifest#')) {
        throw Object.assign(new Error('Throughput exceeds the current capacity'), {
          name: 'ProvisionedThroughputExceededException',
          $metadata: {},
        });
      }
      return next(args);
    },
    { step: 'initialize', name },
  );
  try {
    await fn();
  } finally {
    d.host.dynamodb.middlewareStack.remove(name);
  }
}

describe('a duplicate InvokeWorker that registers nothing beside a running one', () => {
  it('DL-02 RC-04 the second runner’s empty, given-up or unwritten registration leaves the first runner’s batch its slot', async () => {
    const { queue, consumerUid } = await d.setup('empty-twin', recordingWorker(d.logFile('empty-twin')), {
      maxBatchSize: 2,
      maxConcurrency: 1,
      maxRetries: 0,
    });
    await d.host.producer.sendBatch(
      queue,
      ['a', 'b', 'c'].map((body) => ({ body })),
    );
    const got = await d.host.delivery.acquire(consumerUid, 1);
    const slot = (got as { slot: Slot }).slot;
    const first = await receiveExactly(queue, 2);
    const a = await d.host.delivery.register(slot, first);
    expect(a.deliver).toHaveLength(2);
    const store = storeOf(d);
    const held = async () => {
      const state = await store.dispatchState(consumerUid);
      return {
        slot: state.slots[slot.batchId] !== undefined,
        registered: state.registered[slot.batchId] === true,
      };
    };
    // The second runner's receive found nothing (the first holds the messages): an empty registration.
    const empty = await d.host.delivery.register(slot, [], { goOn: true });
    expect(empty.credential).toBe('');
    expect(empty.next).toBeUndefined();
    expect(await held()).toEqual({ slot: true, registered: true });
    // It received the third message, but too late to register it: it gives up, and gives it back.
    const late = await receiveExactly(queue, 1);
    const gaveUp = await d.host.delivery.register(slot, late, { visibleForMs: 0 });
    expect(gaveUp.credential).toBe('');
    expect(await held()).toEqual({ slot: true, registered: true });
    // It received the message once more, and its manifest write failed past the SDK's retries.
    const again = await receiveExactly(queue, 1);
    await refusingManifests(() =>
      expect(d.host.delivery.register(slot, again)).rejects.toMatchObject({ name: 'ManifestNotWritten' }),
    );
    expect(await held()).toEqual({ slot: true, registered: true });
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    // The bound holds while the first runner's handler runs: no other lane gets a slot.
    expect((await d.host.delivery.acquire(consumerUid, 1)).status).toBe('busy');
    // The first runner finishes as usual, and its slot is freed then.
    await d.host.delivery.settle(slot.batchId, a.credential, { kind: 'ack', index: 0 });
    await d.host.delivery.settle(slot.batchId, a.credential, { kind: 'ack', index: 1 });
    await d.host.delivery.finalizeAsRunner(slot.batchId, a.credential, 'returned', { slot });
    expect(await held()).toEqual({ slot: false, registered: false });
    expect((await batchHead(d, slot.batchId))?.closed).toBe(true);
  });
});
