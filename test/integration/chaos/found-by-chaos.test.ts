/**
 * Regression tests for what the fault-injection suite (test/chaos) found, each reduced to a
 * deterministic case:
 *
 * 1. The persistent SQS stand-in (fauxqs) lost a message made visible again with
 *    ChangeMessageVisibility 0 — every retry with no delay under `npm start` — until its next
 *    restart.
 * 2. An exhausted message whose removal failed (SQS briefly down) came back with no attempts
 *    record and was delivered again as attempt 1, past `1 + maxRetries` (DL-07).
 * 3. A multi-message send whose SendMessageBatch answer was lost, so that the SDK sent it again,
 *    left two SQS copies of each Host message; each was delivered, both as attempt 1, in batches
 *    running side by side (DL-07).
 * 4. A slot whose lane was gone before it registered (its registration and its release failed
 *    while DynamoDB restarted) looked like a lane receiving until its deadline, so neither a
 *    send's wake nor the supervisor started a lane: visible messages waited about two minutes.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import type { MessageQueue } from '../../../lambdas/delivery/ports.ts';
import { QueueProducer } from '../../../lambdas/delivery/producer.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import { withFaults } from '../../../lambdas/local/faults/sdk-faults.ts';
import { startSqsServer } from '../../../lambdas/local/standins/sqs-server.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { sqsFaultSeed } from '../../support/sqs-fault-seeds.ts';
import { queueCounts, sleep } from '../delivery/delivery-kit.ts';

describe('found by the chaos suite', () => {
  it('RC-01 the persistent SQS stand-in keeps a message made visible again (visibility 0)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tf-sqs-'));
    const server = await startSqsServer({ dataDir: dir });
    const sqs = new SQSClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      useQueueUrlAsEndpoint: false,
    });
    try {
      const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'visibility-zero' }));
      await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: 'kept' }));
      const first = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl, VisibilityTimeout: 60, WaitTimeSeconds: 1 }),
      );
      const handle = first.Messages?.[0]?.ReceiptHandle;
      expect(handle).toBeDefined();
      await sqs.send(
        new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: handle, VisibilityTimeout: 0 }),
      );
      const again = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 2 }));
      expect(again.Messages?.map((m) => m.Body)).toEqual(['kept']);
    } finally {
      sqs.destroy();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('DL-07 an exhausted message whose removal failed', () => {
    let d: DeliveryHost;
    beforeAll(async () => {
      d = await createDeliveryHost({ workerTimeoutMs: 2_000, graceMs: 500 });
      // The slot margin is shortened (as the chaos suite does), so the undeleted copy returns in seconds.
      (d.host.delivery as unknown as { c: { o: { slotMarginMs: number } } }).c.o.slotMarginMs = 1_000;
    });
    afterAll(async () => d.close());

    it('DL-07 is not delivered again once SQS is back (no dead-letter queue: dropped once)', async () => {
      const log = d.logFile('exhausted-undeleted');
      const { queue } = await d.setup(
        'exhausted-undeleted',
        recordingWorker(log, `throw new Error('fails');`),
        {
          maxBatchSize: 1,
          maxConcurrency: 1,
          maxRetries: 0,
        },
      );
      // The first DeleteMessageBatch of the delivery service fails, as when the SQS stand-in is down.
      const o = (d.host.delivery as unknown as { c: { o: { messages: MessageQueue } } }).c.o;
      const real = o.messages;
      let failures = 0;
      o.messages = {
        ...real,
        deleteBatch: (url, handles) => {
          if (failures === 0) {
            failures++;
            return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
          }
          return real.deleteBatch(url, handles);
        },
      };
      try {
        const [id] = await d.host.producer.sendBatch(queue, [{ body: 'exhausted' }]);
        d.startDispatcher();
        await waitFor('the one delivery and the failed removal', () => failures === 1);
        // The copy that stayed becomes visible after deadline + grace, and must be removed unseen.
        await waitFor(
          'the undeleted copy removed',
          async () => {
            const c = await queueCounts(d, queue);
            return c.visible + c.inFlight + c.delayed === 0;
          },
          30_000,
        );
        await sleep(1_500);
        const deliveries = readEvents(log).filter((e) => e.ev === 'msg');
        expect(deliveries.map((e) => [e.id, e.attempts])).toEqual([[id, 1]]);
      } finally {
        o.messages = real;
      }
    });
  });

  describe('DL-07 a multi-message send whose SendMessageBatch answer was lost', () => {
    let d: DeliveryHost;
    beforeAll(async () => {
      d = await createDeliveryHost({ workerTimeoutMs: 10_000 });
    });
    afterAll(async () => d.close());

    it('DL-07 each Host message is delivered once, as attempt 1; the copy the lost answer left is removed unseen', async () => {
      const log = d.logFile('lost-send-answer');
      const { queue } = await d.setup(
        'lost-send-answer',
        recordingWorker(log, `await new Promise((r) => setTimeout(r, 1500));`),
        { maxBatchSize: 1, maxConcurrency: 4, maxRetries: 1 },
      );
      const faulty = withFaults(sqsClient(inject('sqsEndpoint')), 'sqs', {
        config: await sqsFaultSeed('SendMessageBatch', 'lostAnswer', 'lostAnswer'),
      });
      const faults: InjectedFault[] = [];
      const off = onInjectedFault((f) => faults.push(f));
      let ids: string[];
      try {
        // The Host's producer rules over a client whose SendMessageBatch answer is lost once: SQS
        // took the request, the SDK sent it again, and SQS took it again.
        const producer = new QueueProducer({ messages: sqsMessageQueue(faulty), commits: d.host.commits });
        ids = await producer.sendBatch(queue, [{ body: 'a' }, { body: 'b' }, { body: 'c' }]);
      } finally {
        off();
        faulty.destroy();
      }
      expect(faults.map((f) => [f.operation, f.kind])).toEqual([['SendMessageBatch', 'lostAnswer']]);
      d.startDispatcher();
      await waitFor(
        'every copy gone from the queue',
        async () => {
          const c = await queueCounts(d, queue);
          const delivered = new Set(readEvents(log).flatMap((e) => (e.ev === 'msg' ? [e.id] : [])));
          return ids.every((id) => delivered.has(id)) && c.visible + c.inFlight + c.delayed === 0;
        },
        30_000,
      );
      await sleep(2_000);
      const deliveries = readEvents(log)
        .filter((e) => e.ev === 'msg')
        .map((e) => [e.id, e.attempts])
        .sort();
      expect(deliveries).toEqual(ids.map((id) => [id, 1]).sort());
    });
  });

  describe('RC-04 a slot whose lane is gone before it registered', () => {
    let d: DeliveryHost;
    beforeAll(async () => {
      d = await createDeliveryHost({ idleWaitSeconds: 1 });
    });
    afterAll(async () => d.close());

    it('RC-04 covers no backlog once its receive window has passed: a send is delivered within seconds, not at the slot’s deadline', async () => {
      const log = d.logFile('gone-lane');
      const { queue, consumerUid } = await d.setup('gone-lane', recordingWorker(log), {
        maxBatchSize: 1,
        maxConcurrency: 2,
      });
      d.startDispatcher();
      // An AcquireSlot step took a slot while its caller saw Lambda.ServiceException, and no
      // worker ever ran for it: nothing frees the slot before its gathering deadline (a minute on).
      const lost = await d.host.delivery.acquire(consumerUid, 1);
      expect(lost.status).toBe('acquired');
      // Past the lane's receive window (idle wait 1 s), the slot receives nothing any more.
      await sleep(2_500);
      const [id] = await d.host.producer.sendBatch(queue, [{ body: 'waits for no one' }]);
      const delivered = await waitFor(
        'the message delivered',
        () => readEvents(log).find((e) => e.ev === 'msg' && e.id === id),
        15_000,
      ).catch(() => undefined);
      expect(delivered, 'not delivered within 15 s of its send').toBeDefined();
    });
  });
});
