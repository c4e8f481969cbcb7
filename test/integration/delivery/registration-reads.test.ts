/**
 * Issue 13: what a registration reads before it decides is one request — the queue's count of
 * attempts records and the commits of the batch's multi-message sends, in one BatchGetItem — and
 * the answer still decides attempts (DL-07): with records outstanding they are read and counted.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Registration } from '../../../lambdas/delivery/delivery-service.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import { receiveAsRunner } from './delivery-kit.ts';

describe('registration reads (issue 13)', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
  });
  afterAll(async () => d.close());

  /** The DynamoDB commands the Host sends while `fn` runs, by name. */
  async function dynamoCalls(fn: () => Promise<unknown>): Promise<string[]> {
    const names: string[] = [];
    const name = 'countRegistrationReads';
    d.host.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        names.push(context.commandName as string);
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      await fn();
    } finally {
      d.host.dynamodb.middlewareStack.remove(name);
    }
    return names;
  }

  it('DL-07 a batch of one multi-message send: one BatchGetItem answers the commit and the attempts count; once its messages are retried, their records are read and counted (attempts 2)', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('reads', recordingWorker(d.logFile('reads')), {
      maxBatchSize: 10,
      maxRetries: 3,
    });
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 5 }, (_, i) => ({ body: `r${i}` })),
    );
    const take = async () => {
      const a = await d.host.delivery.acquire(consumerUid, 1);
      if (a.status !== 'acquired') throw new Error(`no slot: ${a.status}`);
      return a.slot;
    };

    const first = await take();
    const received = await receiveAsRunner(d, queue);
    expect(received.map((r) => r.envelope.id).sort()).toEqual([...ids].sort());
    let reg: Registration | undefined;
    const calls = await dynamoCalls(async () => {
      reg = await d.host.delivery.register(first, received);
    });
    if (!reg) throw new Error('not registered');
    expect(reg.deliver.map((x) => x.attempts)).toEqual([1, 1, 1, 1, 1]);
    // No GetItem: neither the queue's state nor the slot map (the slot's snapshot is fresh).
    expect(calls.filter((c) => c.endsWith('GetItemCommand'))).toEqual(['BatchGetItemCommand']);

    // The handler throws: every message is retried (delay 0), its attempts record written.
    await d.host.delivery.finalizeAsRunner(first.batchId, reg.credential, 'threw');
    const second = await take();
    const again = await receiveAsRunner(d, queue);
    const calls2 = await dynamoCalls(async () => {
      reg = await d.host.delivery.register(second, again);
    });
    if (!reg) throw new Error('not registered');
    expect(reg.deliver.map((x) => x.attempts)).toEqual([2, 2, 2, 2, 2]);
    // The commit is remembered; the count says records exist, so they are read: two requests.
    expect(calls2.filter((c) => c.endsWith('GetItemCommand'))).toEqual([
      'BatchGetItemCommand',
      'BatchGetItemCommand',
    ]);
    await d.host.delivery.finalizeAsRunner(second.batchId, reg.credential, 'returned');
  });

  it('DL-02 a full batch whose snapshot showed room reads the slot map in the same BatchGetItem: room while slots are free, none once another lane took the last one', async ({
    expect,
  }) => {
    const { queue, consumerUid } = await d.setup('room', recordingWorker(d.logFile('room')), {
      maxBatchSize: 5,
      maxConcurrency: 2,
    });
    const take = async () => {
      const a = await d.host.delivery.acquire(consumerUid, 1);
      if (a.status !== 'acquired') throw new Error(`no slot: ${a.status}`);
      return a.slot;
    };
    const registerFull = async (slot: Awaited<ReturnType<typeof take>>) => {
      await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 5 }, (_, i) => ({ body: `f${i}` })),
      );
      const received = await receiveAsRunner(d, queue);
      expect(received).toHaveLength(5);
      let reg: Registration | undefined;
      const calls = await dynamoCalls(async () => {
        reg = await d.host.delivery.register(slot, received);
      });
      if (!reg) throw new Error('not registered');
      // One read request: no GetItem of the slot map beside it.
      expect(calls.filter((c) => c.endsWith('GetItemCommand'))).toEqual(['BatchGetItemCommand']);
      return reg;
    };

    const a = await take();
    const first = await registerFull(a);
    expect(first.room).toBe(true);
    await d.host.delivery.finalizeAsRunner(a.batchId, first.credential, 'returned');

    // The snapshot of `b` shows one slot of two held; another lane takes the second before `b`
    // registers: the read with the registration sees both held, so no further lane starts.
    const b = await take();
    const c = await take();
    const second = await registerFull(b);
    expect(second.room).toBe(false);
    await d.host.delivery.finalizeAsRunner(b.batchId, second.credential, 'returned');
    await d.host.delivery.register(c, []);
  });
});
