/**
 * A batch's finalisation may run again: the runner retries it after a lost answer from the batch
 * host, a release SQS took only in part, a throttled hand-over after the visibility changes; a
 * recovery applies it after `BatchUnfinished`; two recoverers meet at one expired batch. Such a
 * repeat runs after its messages may have been delivered again. Attempts only ever grow (DL-07),
 * and a repeat never changes a message's visibility with a receipt handle older than its last
 * receive. Step by step through the delivery service, against DynamoDB Local and the SQS stand-in.
 */

import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import type { Received } from '../../../lambdas/delivery/registration.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import { attemptsRecord, queueCounts, receiveAsRunner } from './delivery-kit.ts';

interface VisibilityCall {
  at: number;
  handles: string[];
}

describe('DL-07 a repeated finalisation never lowers attempts nor replays a visibility change', () => {
  let d: DeliveryHost;
  /** Every ChangeMessageVisibilityBatch the Host sent, with the handles it named. */
  const calls: VisibilityCall[] = [];
  /** Handles whose change SQS fails on its side (an InternalError per entry) while set. */
  const failing = new Set<string>();

  beforeAll(async () => {
    // No dispatcher: the test is the runner.
    d = await createDeliveryHost({ workerTimeoutMs: 30_000, graceMs: 5_000 });
    d.host.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'ChangeMessageVisibilityBatchCommand') return next(args);
        const input = args.input as { Entries?: { Id?: string; ReceiptHandle?: string }[] };
        const entries = input.Entries ?? [];
        calls.push({ at: Date.now(), handles: entries.map((e) => e.ReceiptHandle as string) });
        const dropped = entries.filter((e) => failing.has(e.ReceiptHandle as string));
        if (dropped.length === 0) return next(args);
        const kept = entries.filter((e) => !failing.has(e.ReceiptHandle as string));
        const out = (
          kept.length > 0
            ? await next({ ...args, input: { ...input, Entries: kept } as never })
            : { output: { Successful: [], $metadata: {} }, response: {} }
        ) as { output: { Failed?: unknown[] } };
        out.output.Failed = [
          ...(out.output.Failed ?? []),
          ...dropped.map((e) => ({ Id: e.Id, SenderFault: false, Code: 'InternalError' })),
        ];
        return out as never;
      },
      { step: 'initialize', name: 'recordVisibility' },
    );
  });
  afterAll(async () => d.close());

  const changedWith = (handle: string, since: number) =>
    calls.filter((c) => c.at >= since && c.handles.includes(handle)).length;

  /** One runner's batch: a slot, what the queue has now (up to `max`), registered. */
  async function deliver(consumerUid: string, queue: Parameters<typeof receiveAsRunner>[1]) {
    const got = await d.host.delivery.acquire(consumerUid, 1);
    if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
    const slot: Slot = got.slot;
    const received: Received[] = await receiveAsRunner(d, queue);
    const reg = await d.host.delivery.register(slot, received);
    const finalize = () =>
      d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'threw', {
        slot,
        ...(reg.manifest ? { manifest: reg.manifest } : {}),
      });
    return { slot, received, reg, attempts: reg.deliver.map((x) => x.attempts), finalize };
  }

  it('DL-07 maxRetries 3: X retries M (attempt 2), Y delivers and retries it (attempt 3), X’s finalisation runs again — M’s record stays at 3, no change uses X’s handle, and M’s fourth delivery is its last', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('repeat', recordingWorker(d.logFile('repeat')), {
      maxBatchSize: 1,
      maxConcurrency: 3,
      maxRetries: 3,
      retryDelaySeconds: 0,
    });
    const [id] = await d.host.producer.sendBatch(queue, [{ body: 'M' }]);
    const w = await deliver(consumerUid, queue);
    expect(w.attempts).toEqual([1]);
    await w.finalize();
    const x = await deliver(consumerUid, queue);
    expect(x.attempts).toEqual([2]);
    await x.finalize();
    const xFinalized = Date.now();
    const y = await deliver(consumerUid, queue);
    expect(y.attempts).toEqual([3]);
    await y.finalize();
    expect((await attemptsRecord(d, queue.queueUid, id as string))?.attempts).toBe(3);

    // X's finalisation again, exactly as the runner retries it after a lost answer.
    await x.finalize();
    expect((await attemptsRecord(d, queue.queueUid, id as string))?.attempts).toBe(3);
    expect(changedWith(x.received[0]?.receiptHandle as string, xFinalized)).toBe(0);

    // Its fourth delivery is its 1 + maxRetries-th: out of retries, it is owed a move.
    const z = await deliver(consumerUid, queue);
    expect(z.attempts).toEqual([4]);
    expect((await z.finalize()).deadLetter).toEqual([id]);
  });

  it('DL-07 a release SQS took in part: the repeat releases only what SQS did not take, never the message received again since with its old handle', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('halfway', recordingWorker(d.logFile('halfway')), {
      maxBatchSize: 2,
      maxConcurrency: 3,
      maxRetries: 3,
      retryDelaySeconds: 0,
    });
    await d.host.producer.sendBatch(queue, [{ body: 'A' }, { body: 'B' }]);
    const x = await deliver(consumerUid, queue);
    expect(x.attempts).toEqual([1, 1]);
    const [a, b] = x.received as [Received, Received];
    // SQS takes A's change and fails B's, through every try.
    failing.add(b.receiptHandle);
    const before = Date.now();
    await expect(x.finalize()).rejects.toThrow(/did not take/);
    failing.clear();
    expect(changedWith(a.receiptHandle, before)).toBe(1);
    // A is back and delivered again (B is still hidden by X).
    const y = await deliver(consumerUid, queue);
    expect(y.received.map((r) => r.envelope.id)).toEqual([a.envelope.id]);
    expect(y.attempts).toEqual([2]);

    const repeated = Date.now();
    await x.finalize();
    expect(changedWith(a.receiptHandle, repeated)).toBe(0);
    expect(changedWith(b.receiptHandle, repeated)).toBe(1);
    // B is back now; A stays with Y.
    expect(await queueCounts(d, queue)).toMatchObject({ visible: 1 });
    const z = await deliver(consumerUid, queue);
    expect(z.received.map((r) => r.envelope.id)).toEqual([b.envelope.id]);
    expect(z.attempts).toEqual([2]);
  });
});
