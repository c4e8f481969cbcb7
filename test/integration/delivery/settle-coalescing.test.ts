/**
 * Issue 12: settlement that scales. The runner groups a batch's settle calls (one Host call in
 * flight per batch), so a handler's hundred `ack()`s cost a few Host calls, each Promise still
 * resolving only once its own decision is durable (DL-03) and a failed group never being taken
 * as acknowledged (DL-08). Against DynamoDB Local and the SQS stand-in.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { type BatchHostPort, type QueueInvoker, runBatch } from '../../../lambdas/delivery/batch-runner.ts';
import type { DeliveryService, Slot } from '../../../lambdas/delivery/delivery-service.ts';
import type { DeliveryStore } from '../../../lambdas/delivery/delivery-store.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { NamedError } from '../../../lambdas/delivery/limits.ts';
import { createQueueBatch } from '../../../lambdas/worker-runtime/queue-batch.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import {
  allEnded,
  attemptsById,
  attemptsRecord,
  batchHead,
  outcomeOf,
  queueCounts,
  records,
  serial,
  storeOf,
  waitDrained,
} from './delivery-kit.ts';

/** Acquires a slot of `consumerUid` (there must be one free). */
async function slotOf(d: DeliveryHost, consumerUid: string): Promise<Slot> {
  const a = await d.host.attachments.get(consumerUid);
  const got = await d.host.delivery.acquire(consumerUid, a?.generation ?? 1);
  if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
  return got.slot;
}

/** The Host as the runner reaches it locally, counting the settlement calls that reach it. */
function countingHost(base: BatchHostPort) {
  const counts = { settle: 0, settleMany: 0, calls: 0 };
  const host: BatchHostPort = {
    ...base,
    settle: (batchId, credential, call) => {
      counts.settle++;
      counts.calls++;
      return base.settle(batchId, credential, call);
    },
    settleMany: (batchId, credential, calls) => {
      counts.settleMany++;
      counts.calls += calls.length;
      return base.settleMany(batchId, credential, calls);
    },
  };
  return { host, counts };
}

describe('issue 12: a batch’s settle calls are coalesced by the runner', () => {
  let d: DeliveryHost;
  // No dispatcher: each test drives its batch itself, in this process.
  beforeAll(async () => {
    d = await createDeliveryHost();
  });
  afterAll(async () => d.close());

  /** A consumer with `n` messages waiting, and the slot of its next batch. */
  async function waiting(name: string, n: number) {
    const { queue, consumerUid } = await serial(() =>
      d.setup(name, recordingWorker(d.logFile(name)), {
        maxBatchSize: 100,
        maxBatchTimeoutSeconds: 2,
        maxConcurrency: 1,
        maxRetries: 3,
        retryDelaySeconds: 0,
      }),
    );
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: n }, (_, i) => ({ body: `${name}-${i}` })),
    );
    return { queue, ids, slot: await slotOf(d, consumerUid) };
  }

  /** An invoker running `handler` on the batch object, as the runtimes build it. */
  const invokerOf = (
    handler: (batch: ReturnType<typeof createQueueBatch>) => Promise<void>,
    seen: { batchId?: string; size?: number },
  ): QueueInvoker => ({
    invoke: async (delivery, settle) => {
      seen.batchId = delivery.batchId;
      seen.size = delivery.messages.length;
      await handler(createQueueBatch(delivery, { settle }));
      return 'returned';
    },
  });

  it('DL-03 100 concurrent acknowledge() calls cost a few Host calls; every Promise resolves once durable and all 100 are acknowledged', async () => {
    const { queue, slot } = await waiting('hundred', 100);
    const { host, counts } = countingHost(directBatchHost(d.host.delivery, d.host.loop));
    const seen: { batchId?: string; size?: number } = {};
    let answers: string[] = [];
    let headWhenResolved: Awaited<ReturnType<typeof batchHead>>;
    const invoker = invokerOf(async (batch) => {
      answers = await Promise.all(batch.messages.map((m) => outcomeOf(batch.acknowledge(m.id))));
      // Before the handler returns (nothing finalised yet), every resolved ack is recorded.
      headWhenResolved = await batchHead(d, batch.batchId);
    }, seen);
    await runBatch(slot, { messages: sqsMessageQueue(d.host.sqs), host, invoker, idleWaitSeconds: 1 });
    expect(seen.size).toBe(100);
    expect(answers).toEqual(Array.from({ length: 100 }, () => 'resolved'));
    expect(counts.calls).toBe(100);
    expect(counts.settle + counts.settleMany).toBeLessThanOrEqual(3);
    expect(headWhenResolved?.closed).toBe(false);
    expect(Object.keys(headWhenResolved?.settled ?? {})).toHaveLength(100);
    expect(Object.values(headWhenResolved?.settled ?? {}).every((c) => c === 'a')).toBe(true);
    const head = await batchHead(d, seen.batchId as string);
    expect(head?.outcome).toBe('returned');
    expect(head?.doubtful).toBe(false);
    await waitDrained(d, queue, 10_000);
  });

  it('DL-03 one group holding ack(m) and retry(m): the retry rejects already_settled, the first decision wins', async () => {
    const { queue, ids, slot } = await waiting('mixed', 3);
    const { host, counts } = countingHost(directBatchHost(d.host.delivery, d.host.loop));
    const seen: { batchId?: string } = {};
    let answers: string[] = [];
    const invoker = invokerOf(async (batch) => {
      const [a, b] = batch.messages;
      // All made in the same turn: they travel together.
      answers = await Promise.all([
        outcomeOf(batch.acknowledge(a?.id as string)),
        outcomeOf(batch.retry(a?.id as string)),
        outcomeOf(batch.retry(b?.id as string, 0)),
        outcomeOf(batch.acknowledge(b?.id as string)),
        outcomeOf(batch.retryAll()),
      ]);
    }, seen);
    await runBatch(slot, { messages: sqsMessageQueue(d.host.sqs), host, invoker, idleWaitSeconds: 1 });
    expect(answers).toEqual(['resolved', 'already_settled', 'resolved', 'already_settled', 'resolved']);
    expect(counts).toEqual({ settle: 0, settleMany: 1, calls: 5 });
    const head = await batchHead(d, seen.batchId as string);
    expect(head?.settled).toEqual({ '0': 'a', '1': 'r0' });
    expect(head?.all).toBe('r');
    // The acknowledged one is gone; the two retried are back (retryDelaySeconds 0).
    await waitFor('the retried messages are back', async () => (await queueCounts(d, queue)).visible === 2);
    expect(await attemptsRecord(d, queue.queueUid, ids[0] as string)).toBeUndefined();
  });

  it('DL-08 a group lost on the way: every Promise in it rejects backend_unavailable, and the returning handler acknowledges nothing', async () => {
    const { queue, ids, slot } = await waiting('lost-group', 4);
    const base = directBatchHost(d.host.delivery, d.host.loop);
    const { host, counts } = countingHost({
      ...base,
      // The AWS transport's answer when the invoke failed (remoteBatchHost).
      settleMany: async () => {
        throw new NamedError('backend_unavailable', 'the settlement could not be recorded');
      },
    });
    const seen: { batchId?: string } = {};
    let answers: string[] = [];
    const invoker = invokerOf(async (batch) => {
      answers = await Promise.all(batch.messages.map((m) => outcomeOf(batch.acknowledge(m.id))));
    }, seen);
    await runBatch(slot, { messages: sqsMessageQueue(d.host.sqs), host, invoker, idleWaitSeconds: 1 });
    expect(counts.settleMany).toBe(1);
    expect(answers).toEqual([
      'backend_unavailable',
      'backend_unavailable',
      'backend_unavailable',
      'backend_unavailable',
    ]);
    const head = await batchHead(d, seen.batchId as string);
    // Finalised as after a throw: nothing recorded, so every message is retried.
    expect(head?.outcome).toBe('threw');
    expect(head?.settled).toEqual({});
    await waitFor('all four are back', async () => (await queueCounts(d, queue)).visible === 4);
    for (const id of ids) expect((await attemptsRecord(d, queue.queueUid, id))?.attempts).toBe(1);
  });

  it('DL-08 a group the store cannot write: every Promise rejects backend_unavailable and the batch is marked doubtful, never acknowledged', async () => {
    const { queue, slot } = await waiting('store-down', 3);
    const store = storeOf(d);
    (store as { settleMany: DeliveryStore['settleMany'] }).settleMany = async () => {
      throw new Error('injected: the table is unavailable');
    };
    const seen: { batchId?: string } = {};
    let answers: string[] = [];
    try {
      const invoker = invokerOf(async (batch) => {
        answers = await Promise.all(batch.messages.map((m) => outcomeOf(batch.retry(m.id, 0))));
      }, seen);
      await runBatch(slot, {
        messages: sqsMessageQueue(d.host.sqs),
        host: directBatchHost(d.host.delivery, d.host.loop),
        invoker,
        idleWaitSeconds: 1,
      });
    } finally {
      delete (store as { settleMany?: unknown }).settleMany;
    }
    expect(answers).toEqual(['backend_unavailable', 'backend_unavailable', 'backend_unavailable']);
    const head = await batchHead(d, seen.batchId as string);
    expect(head?.doubtful).toBe(true);
    expect(head?.outcome).toBe('threw');
    expect(head?.settled).toEqual({});
    await waitFor('all three are back', async () => (await queueCounts(d, queue)).visible === 3);
  });
});

describe('issue 12: coalescing in the local Host (worker threads, the dispatcher)', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('DL-03 a worker acknowledging 100 messages at once reaches the delivery service in a few calls, one at a time; all are acknowledged exactly once', async () => {
    const service = d.host.delivery as DeliveryService & Record<string, unknown>;
    const log = d.logFile('threads');
    const counts = { settle: 0, settleMany: 0, inFlight: 0, mostInFlight: 0 };
    // Each batch's first call is held until its handler has made all its calls: how the calls
    // group then depends on the coalescer alone, not on how fast this machine runs the worker
    // thread beside the Host (on a loaded machine they otherwise trickle in over several calls).
    const handlerAsked = (batchId: string) =>
      waitFor(`the handler of ${batchId} to make its calls`, () =>
        records(log).some((e) => e.ev === 'asked' && e.batch === batchId),
      ).then(() => new Promise((r) => setImmediate(r)));
    const counted =
      <A extends [string, ...unknown[]], R>(
        name: 'settle' | 'settleMany',
        call: (...args: A) => Promise<R>,
      ) =>
      async (...args: A): Promise<R> => {
        counts[name]++;
        counts.mostInFlight = Math.max(counts.mostInFlight, ++counts.inFlight);
        try {
          await handlerAsked(args[0]);
          return await call(...args);
        } finally {
          counts.inFlight--;
        }
      };
    service.settle = counted('settle', service.settle.bind(service));
    service.settleMany = counted('settleMany', service.settleMany.bind(service));
    try {
      const { queue } = await d.setup(
        'threads',
        recordingWorker(
          log,
          `const pending = batch.messages.map((m) => batch.acknowledge(m.id).then(() => 'resolved', (e) => e.name));
          rec({ ev: 'asked', batch: batch.batchId });
          rec({ ev: 'answers', answers: await Promise.all(pending) });`,
        ),
        { maxBatchSize: 100, maxBatchTimeoutSeconds: 2, maxConcurrency: 1 },
      );
      const ids = await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 100 }, (_, i) => ({ body: `t${i}` })),
      );
      await waitDrained(d, queue, 60_000);
      const events = await waitFor('handlers ended', () => {
        const e = records(log);
        return allEnded(e) ? e : undefined;
      });
      const byId = attemptsById(events);
      for (const id of ids) expect(byId.get(id)).toEqual([1]);
      const answers = events.filter((e) => e.ev === 'answers').flatMap((e) => e.answers as string[]);
      expect(answers).toEqual(Array.from({ length: 100 }, () => 'resolved'));
      const batches = events.filter((e) => e.ev === 'start').length;
      // One batch at a time (maxConcurrency 1), and one call of it in flight at a time.
      expect(counts.mostInFlight).toBe(1);
      // Far fewer than one call per message: the first call, then the rest together.
      expect(counts.settle + counts.settleMany).toBeLessThanOrEqual(2 * batches);
    } finally {
      delete (service as { settle?: unknown }).settle;
      delete (service as { settleMany?: unknown }).settleMany;
    }
  });
});
