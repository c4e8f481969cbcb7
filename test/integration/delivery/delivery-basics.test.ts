import {
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import {
  BACKLOG_WAIT_MS,
  nextParallel,
  receiveSizes,
  runBatch,
  runLane,
} from '../../../lambdas/delivery/batch-runner.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  peakConcurrency,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { sleep } from './delivery-kit.ts';

describe('delivery through the production dispatcher definition', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('MW-03 DL-05 delivers every message once to a returning handler and acknowledges it', async () => {
    const log = d.logFile('basic');
    const { queue } = await d.setup('basic', recordingWorker(log), { maxBatchSize: 10, maxConcurrency: 2 });
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 25 }, (_, i) => ({ body: `m${i}` })),
    );
    const events = await waitFor('25 deliveries', () => {
      const e = readEvents(log);
      return e.filter((x) => x.ev === 'msg').length >= 25 &&
        e.filter((x) => x.ev === 'end').length === e.filter((x) => x.ev === 'start').length
        ? e
        : undefined;
    });
    const delivered = events.filter((e) => e.ev === 'msg');
    expect(new Set(delivered.map((e) => e.id))).toEqual(new Set(ids));
    expect(delivered.every((e) => e.attempts === 1)).toBe(true);
    expect(
      events.filter((e) => e.ev === 'start').every((e) => e.queue === 'basic-q' && (e.size ?? 0) <= 10),
    ).toBe(true);
    expect(peakConcurrency(events)).toBeLessThanOrEqual(2);
    // Acknowledged means gone from SQS once the batches were finalised.
    await waitFor('queue drained', async () => {
      const out = await d.host.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.sqsUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 0,
        }),
      );
      return (out.Messages ?? []).length === 0;
    });
  });

  it('DL-07 dead-letters after exactly 1 + maxRetries deliveries as a new message', async () => {
    const log = d.logFile('dlq');
    const { queue, dlq } = await d.setup('dlq', recordingWorker(log, `throw new Error('always fails');`), {
      maxRetries: 3,
      deadLetter: true,
    });
    const [id] = await d.host.producer.sendBatch(queue, [{ body: 'poison' }]);
    const moved = await waitFor('a dead-lettered copy', async () => {
      const out = await d.host.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dlq!.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      return out.Messages?.length ? out.Messages : undefined;
    });
    const attempts = readEvents(log)
      .filter((e) => e.ev === 'msg' && e.id === id)
      .map((e) => e.attempts);
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(moved).toHaveLength(1);
    const env = decodeEnvelope(moved[0]?.Body);
    expect(env?.id).not.toBe(id);
    expect(Buffer.from(env?.body ?? []).toString()).toBe('poison');
  });
});

describe('lanes run several batches per invocation', () => {
  it('DL-02 one runLane call drains a backlog in several batches, each in its own slot, never above maxConcurrency', async () => {
    const d = await createDeliveryHost();
    try {
      const { queue, consumerUid } = await d.setup('lane', recordingWorker(d.logFile('lane')), {
        maxBatchSize: 5,
        maxConcurrency: 1,
      });
      await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 20 }, (_, i) => ({ body: `l${i}` })),
      );
      const first = await d.host.delivery.acquire(consumerUid, 1);
      if (first.status !== 'acquired') throw new Error('no slot');
      const batchIds = new Set<string>();
      const slotsSeen: number[] = [];
      const result = await runLane(
        first.slot,
        {
          messages: sqsMessageQueue(d.host.sqs),
          host: directBatchHost(d.host.delivery, d.host.loop),
          idleWaitSeconds: 1,
          invoker: {
            invoke: async (delivery, settle, slot) => {
              batchIds.add(slot.batchId);
              slotsSeen.push(Object.keys(await d.host.delivery.slotsOf(consumerUid)).length);
              await settle({ kind: 'ackAll' });
              return 'returned';
            },
          },
        },
        { maxBatches: 100, budgetMs: 30_000 },
      );
      expect(result.delivered).toBe(20);
      expect(result.batches).toBeGreaterThanOrEqual(4);
      expect(batchIds.size).toBe(4);
      // With maxConcurrency 1 the lane holds exactly one slot while each batch runs.
      expect(slotsSeen.every((n) => n === 1)).toBe(true);
      expect(result).not.toHaveProperty('credential');
    } finally {
      await d.close();
    }
  });
});

describe('a lane waits out its idle wait', () => {
  it('DL-02 a long poll answered empty before its wait is out (one message wakes every waiter) does not make a lane idle: two lanes waiting on an empty queue each get one of two messages sent a second apart', async () => {
    // Lanes hold the idle wait for messages no wake announces: these lanes have run such
    // messages before (`unannounced`), and these two come straight to SQS.
    const d = await createDeliveryHost();
    try {
      const { queue, consumerUid } = await d.setup('waits', recordingWorker(d.logFile('waits')), {
        maxBatchSize: 1,
        maxConcurrency: 2,
      });
      const slots = [
        await d.host.delivery.acquire(consumerUid, 1),
        await d.host.delivery.acquire(consumerUid, 1),
      ];
      const got: string[][] = [[], []];
      const runs = slots.map((a, lane) => {
        if (a.status !== 'acquired') throw new Error('no slot');
        return runBatch(
          a.slot,
          {
            messages: sqsMessageQueue(d.host.sqs),
            host: directBatchHost(d.host.delivery, d.host.loop),
            idleWaitSeconds: 4,
            invoker: {
              invoke: async (delivery, settle) => {
                got[lane]?.push(...delivery.messages.map((m) => new TextDecoder().decode(m.body)));
                await settle({ kind: 'ackAll' });
                return 'returned';
              },
            },
          },
          () => false,
          { unannounced: true },
        );
      });
      // Both lanes are long-polling when the first message arrives; the SQS stand-in then answers
      // the one that does not get it at once, empty, as AWS never does before the wait is out.
      const send = (body: string) =>
        d.host.sqs.send(new SendMessageCommand({ QueueUrl: queue.sqsUrl, MessageBody: body }));
      await sleep(500);
      await send('first');
      await sleep(1_000);
      await send('second');
      const results = await Promise.all(runs);
      expect(results.map((r) => r.delivered)).toEqual([1, 1]);
      expect(results.every((r) => !r.idle)).toBe(true);
      expect(got.flat().sort()).toEqual(['first', 'second']);
    } finally {
      await d.close();
    }
  });
});

describe('a lane whose queue is gone', () => {
  it('DL-02 ends quietly and frees its slot: a queue is deleted only once no consumer names it, so its lane has nothing to warn about', async () => {
    const d = await createDeliveryHost();
    try {
      const { queue, consumerUid } = await d.setup('gone', recordingWorker(d.logFile('gone')), {
        maxBatchSize: 1,
        maxConcurrency: 1,
      });
      const a = await d.host.delivery.acquire(consumerUid, 1);
      if (a.status !== 'acquired') throw new Error('no slot');
      const logged: string[] = [];
      const run = runBatch(a.slot, {
        messages: sqsMessageQueue(d.host.sqs),
        host: directBatchHost(d.host.delivery, d.host.loop),
        idleWaitSeconds: 3,
        log: (message) => logged.push(message),
        invoker: { invoke: async () => 'returned' },
      });
      // The lane is long-polling when its queue goes (the stand-in answers the poll, or the next
      // one, with QueueDoesNotExist, as SQS does).
      await sleep(300);
      await d.host.sqs.send(new DeleteQueueCommand({ QueueUrl: queue.sqsUrl }));
      const result = await run;
      expect(result).toMatchObject({ idle: true, delivered: 0 });
      expect(logged).toEqual([]);
      // The slot was freed by the empty registration: the consumer's only slot can be taken again.
      expect((await d.host.delivery.acquire(consumerUid, 1)).status).toBe('acquired');
    } finally {
      await d.close();
    }
  });
});

describe('a batch from a backlog is gathered with receives in parallel', () => {
  /** Counts ReceiveMessage calls and how many were in flight at once; `fail(n)` rejects the n-th. */
  function watchedReceives(sqs: SQSClient, fail: (n: number) => boolean = () => false) {
    const seen = { calls: 0, inFlight: 0, peak: 0, rounds: 0 };
    const send = async (command: unknown, options?: unknown) => {
      if (!(command instanceof ReceiveMessageCommand)) return sqs.send(command as never, options as never);
      seen.calls += 1;
      if (seen.inFlight === 0) seen.rounds += 1;
      seen.inFlight += 1;
      seen.peak = Math.max(seen.peak, seen.inFlight);
      try {
        if (fail(seen.calls)) throw Object.assign(new Error('injected'), { name: 'ServiceUnavailable' });
        return await sqs.send(command, options as never);
      } finally {
        seen.inFlight -= 1;
      }
    };
    return { seen, sqs: { send } as unknown as SQSClient };
  }

  /** A consumer of batch 100 with 100 messages queued, and one batch run by hand that acks all. */
  async function backlogOf100(d: DeliveryHost, name: string) {
    const { queue, consumerUid } = await d.setup(name, recordingWorker(d.logFile(name)), {
      maxBatchSize: 100,
      maxBatchTimeoutSeconds: 2,
      maxConcurrency: 1,
    });
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 100 }, (_, i) => ({ body: `${name}${i}` })),
    );
    // A backlog is messages that waited (BACKLOG_WAIT_MS) before they were received.
    await new Promise((r) => setTimeout(r, BACKLOG_WAIT_MS + 50));
    const bodies: string[] = [];
    const logged: string[] = [];
    const run = async (sqs: SQSClient) => {
      const a = await d.host.delivery.acquire(consumerUid, 1);
      if (a.status !== 'acquired') throw new Error('no slot');
      return runBatch(a.slot, {
        messages: sqsMessageQueue(sqs),
        host: directBatchHost(d.host.delivery, d.host.loop),
        idleWaitSeconds: 1,
        log: (message) => logged.push(message),
        invoker: {
          invoke: async (delivery, settle) => {
            bodies.push(...delivery.messages.map((m) => new TextDecoder().decode(m.body)));
            await settle({ kind: 'ackAll' });
            return 'returned';
          },
        },
      });
    };
    return { bodies, logged, run };
  }

  it('DL-01 receives go one at a time until one comes back full of messages that waited, then double while every one does', () => {
    expect(receiveSizes(100)).toEqual([10]);
    expect(receiveSizes(7)).toEqual([7]);
    expect(receiveSizes(90, 2)).toEqual([10, 10]);
    expect(receiveSizes(25, 8)).toEqual([10, 10, 5]);
    expect(receiveSizes(3, 4)).toEqual([3]);
    const waited = BACKLOG_WAIT_MS;
    // A full round of waiting messages doubles, bounded by what is still wanted.
    expect(nextParallel([10], [10], 90, waited)).toBe(2);
    expect(nextParallel([10, 10], [10, 10], 70, waited)).toBe(4);
    expect(nextParallel([10, 10, 10, 10], [10, 10, 10, 10], 30, waited)).toBe(3);
    expect(nextParallel([5], [5], 0, waited)).toBe(1);
    // Any short answer, or messages that had only just been sent (a stream the consumer keeps up
    // with), fall back to one receive.
    expect(nextParallel([10, 10], [10, 9], 71, waited)).toBe(1);
    expect(nextParallel([10], [0], 100, waited)).toBe(1);
    expect(nextParallel([10], [10], 90, waited - 1)).toBe(1);
    expect(nextParallel([10], [10], 90, Number.NEGATIVE_INFINITY)).toBe(1);
  });

  it('DL-01 a batch of 100 from a queue with a backlog takes four rounds of receives (1, 2, 4, 3), and holds every message once', async () => {
    const d = await createDeliveryHost();
    try {
      const { bodies, run } = await backlogOf100(d, 'fanout');
      const watched = watchedReceives(d.host.sqs);
      const result = await run(watched.sqs);
      expect(result.delivered).toBe(100);
      expect(new Set(bodies).size).toBe(100);
      // One receive of 10 finds the backlog; then 2, 4 and the last 3 at once.
      expect(watched.seen.calls).toBe(10);
      expect(watched.seen.rounds).toBe(4);
      expect(watched.seen.peak).toBe(4);
    } finally {
      await d.close();
    }
  });

  it('DL-01 one failed receive among parallel ones keeps what the others received; the rest stays in the queue', async () => {
    const d = await createDeliveryHost();
    try {
      const { bodies, logged, run } = await backlogOf100(d, 'fanfail');
      // The third receive (the second of the first parallel round) fails past the SDK's retries.
      const first = await run(watchedReceives(d.host.sqs, (n) => n === 3).sqs);
      expect(first.delivered).toBe(20);
      expect(logged).toEqual(['receive failed; the batch is formed from what arrived']);
      const second = await run(d.host.sqs);
      expect(second.delivered).toBe(80);
      expect(new Set(bodies).size).toBe(100);
      expect(bodies.length).toBe(100);
    } finally {
      await d.close();
    }
  });
});
