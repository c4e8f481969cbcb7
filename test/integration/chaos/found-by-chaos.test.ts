/**
 * Regression tests for what the fault-injection suite (test/chaos) found, each reduced to a
 * deterministic case:
 *
 * 1. The persistent SQS stand-in (fauxqs) lost a message made visible again with
 *    ChangeMessageVisibility 0 — every retry with no delay under `npm start` — until its next
 *    restart.
 * 2. An exhausted message whose removal failed (SQS briefly down) came back with no attempts
 *    record and was delivered again as attempt 1, past `1 + maxRetries` (DL-07).
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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessageQueue } from '../../../lambdas/delivery/ports.ts';
import { startSqsServer } from '../../../lambdas/local/standins/sqs-server.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
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
});
