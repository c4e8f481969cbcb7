/**
 * Long delays out of SQS's in-flight count (deferrals.ts). SQS counts a message hidden by a
 * visibility timeout as in flight, and past about 120,000 in flight a standard queue's receives
 * come back empty. A retried message due a minute or more later is therefore hidden for at most a
 * minute; when it returns before it is due, its receive sends it again as a delayed copy (same
 * Host id, timestamp and notBefore) and deletes it: delayed, not in flight. DL-06 still holds (it
 * is delivered only once due) and DL-07 (its next delivery is attempt 2, exactly once).
 */
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueueInvoker } from '../../../lambdas/delivery/batch-runner.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import { createQueueBatch } from '../../../lambdas/worker-runtime/queue-batch.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { attemptsRecord, consumerOn, queueCounts, runOneBatch } from './delivery-kit.ts';

/** Sends of the Host to a queue, with their delays: deferrals are sends to the message's own queue. */
function recordSends(d: DeliveryHost) {
  const sends: { url: string; delays: number[]; bodies: string[] }[] = [];
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'SendMessageBatchCommand') {
        const input = args.input as {
          QueueUrl: string;
          Entries: { DelaySeconds?: number; MessageBody: string }[];
        };
        sends.push({
          url: input.QueueUrl,
          delays: input.Entries.map((e) => e.DelaySeconds ?? 0),
          bodies: input.Entries.map((e) => e.MessageBody),
        });
      }
      return next(args);
    },
    { step: 'initialize', name: 'recordSends' },
  );
  return sends;
}

describe('DL-06 a one-hour retry delay at the default settings, with an injected clock', () => {
  let offset = 0;
  const clock = () => Date.now() + offset;
  let d: DeliveryHost;
  let sends: ReturnType<typeof recordSends>;
  const hides: { handle: string; seconds: number }[] = [];
  beforeAll(async () => {
    // No dispatcher: this test runs its batches itself.
    d = await createDeliveryHost({ clock });
    sends = recordSends(d);
    d.host.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'ChangeMessageVisibilityBatchCommand')
          for (const e of (args.input as { Entries: { ReceiptHandle: string; VisibilityTimeout: number }[] })
            .Entries)
            hides.push({ handle: e.ReceiptHandle, seconds: e.VisibilityTimeout });
        return next(args);
      },
      { step: 'initialize', name: 'recordHides' },
    );
  });
  afterAll(async () => d.close());

  it('hides the retried message a minute at most, then defers it: delayed in the queue, nothing in flight', async () => {
    const { queue, consumerUid } = await d.setup('hour', recordingWorker(d.logFile('hour')), {
      maxRetries: 3,
    });
    const generation = (await d.host.attachments.get(consumerUid))?.generation as number;
    const id = await d.host.producer.send(queue, 'in an hour');
    const seen: number[] = [];
    const invoker: QueueInvoker = {
      invoke: async (delivery, settle) => {
        hides.length = 0;
        seen.push(...delivery.messages.map((m) => m.attempts));
        const batch = createQueueBatch(delivery, { settle: (call) => settle(call) });
        for (const m of batch.messages) await batch.retry(m.id, 3_600);
        return 'returned';
      },
    };
    const runOnce = () => runOneBatch(d, { consumerUid, generation }, invoker, clock);

    const t0 = clock();
    expect((await runOnce()).delivered).toBe(1);
    const record = await attemptsRecord(d, queue.queueUid, id);
    expect(record).toMatchObject({ attempts: 1 });
    expect(record?.notBefore).toBeGreaterThanOrEqual(t0 + 3_600_000);
    // Hidden for the deferral bound (60 s), not the hour.
    expect(hides.map((h) => h.seconds)).toEqual([60]);
    const hidden = hides[0]?.handle as string;
    expect(await queueCounts(d, queue)).toEqual({ visible: 0, inFlight: 1, delayed: 0 });

    // A minute later for both (SQS's stand-in is made to see it by a visibility change): it
    // returns, and the receive finds it due in 59 minutes.
    offset += 61_000;
    await d.host.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queue.sqsUrl,
        ReceiptHandle: hidden,
        VisibilityTimeout: 0,
      }),
    );
    hides.length = 0;
    const before = sends.length;
    expect(await runOnce()).toMatchObject({ delivered: 0 });
    expect(seen).toEqual([1]);
    // One delayed copy to its own queue, for SQS's longest delay, carrying the Host's id and notBefore.
    const copies = sends.slice(before).filter((s) => s.url === queue.sqsUrl);
    expect(copies.map((s) => s.delays)).toEqual([[900]]);
    const copy = decodeEnvelope(copies[0]?.bodies[0]);
    expect(copy).toMatchObject({ id, notBefore: record?.notBefore });
    expect(copy?.commit).toBeUndefined();
    expect(hides).toEqual([]);
    await waitFor('the original deleted, the copy delayed', async () => {
      const c = await queueCounts(d, queue);
      return c.inFlight === 0 && c.visible === 0 && c.delayed === 1;
    });
    // Its attempts are the record's: unchanged until it is delivered again.
    expect(await attemptsRecord(d, queue.queueUid, id)).toMatchObject({ attempts: 1 });
  });
});

describe('DL-09 a deferral is bounded by what the Host sealed and the Form allows', () => {
  let d: DeliveryHost;
  let sends: ReturnType<typeof recordSends>;
  beforeAll(async () => {
    d = await createDeliveryHost();
    sends = recordSends(d);
  });
  afterAll(async () => d.close());

  it('refuses a slot without the Host’s seal and items due past the longest delay; sends nothing', async () => {
    const { queue, consumerUid } = await d.setup('bounds', recordingWorker(d.logFile('bounds')));
    const generation = (await d.host.attachments.get(consumerUid))?.generation as number;
    const acquired = await d.host.delivery.acquire(consumerUid, generation);
    if (acquired.status !== 'acquired') throw new Error(`no slot: ${acquired.status}`);
    const now = Date.now();
    const item = (notBefore: number) => ({
      receiptHandles: ['h'],
      id: 'm1',
      ts: now,
      notBefore,
      body: new Uint8Array([1]),
    });
    const elsewhere = { ...acquired.slot, sqsUrl: `${queue.sqsUrl}-other` };
    await expect(d.host.delivery.deferAsRunner(elsewhere, [item(now + 3_600_000)])).rejects.toMatchObject({
      name: 'unknown_batch',
    });
    await expect(
      d.host.delivery.deferAsRunner(acquired.slot, [item(now + 43_200_000 + 120_000)]),
    ).rejects.toMatchObject({ name: 'unknown_message' });
    // Due by now (a slow call): left to return and be delivered, never sent again.
    await expect(d.host.delivery.deferAsRunner(acquired.slot, [item(now - 1)])).resolves.toEqual({
      deferred: 0,
    });
    expect(sends).toEqual([]);
  });
});

describe('DL-06 DL-07 deferral end to end (deferral after 1 s, a 4 s retry delay)', () => {
  let d: DeliveryHost;
  let sends: ReturnType<typeof recordSends>;
  beforeAll(async () => {
    d = await createDeliveryHost({ deferAfterMs: 1_000 });
    sends = recordSends(d);
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('delivers the retried message once more, as attempt 2, no sooner than its delay', async () => {
    const queue = await d.createQueue('team', 'defer-q');
    const log = d.logFile('defer');
    await consumerOn(
      d,
      'defer',
      queue,
      recordingWorker(log, "if (batch.messages.some((m) => m.attempts === 1)) throw new Error('later');"),
      { maxBatchSize: 1, maxConcurrency: 1, maxRetries: 2, retryDelaySeconds: 4 },
    );
    const ids = await d.host.producer.sendBatch(queue, [{ body: 'a' }, { body: 'b' }]);
    const deliveries = () => readEvents(log).filter((e) => e.ev === 'msg');
    await waitFor('both delivered twice', () => deliveries().length >= 4, 60_000);
    await new Promise((r) => setTimeout(r, 2_000));
    const all = deliveries();
    for (const id of ids) {
      const mine = all.filter((e) => e.id === id);
      expect(mine.map((e) => e.attempts)).toEqual([1, 2]);
      const [first, second] = mine as { t: number }[];
      expect((second?.t ?? 0) - (first?.t ?? 0)).toBeGreaterThanOrEqual(4_000 - 50);
    }
    // Each was sent again to its own queue as a delayed copy, not hidden until due.
    const copies = sends
      .filter((s) => s.url === queue.sqsUrl)
      .flatMap((s) => s.bodies.map((b, i) => ({ id: decodeEnvelope(b)?.id, delay: s.delays[i] })))
      .filter((c) => c.delay !== undefined && c.delay > 0);
    expect(copies.map((c) => c.id).sort()).toEqual([...ids].sort());
  });
});
