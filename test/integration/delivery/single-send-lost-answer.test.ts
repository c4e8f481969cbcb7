import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { mayHaveTakenEffect } from '../../../lambdas/adapters/aws/sqs-one-copy.ts';
import { QueueProducer } from '../../../lambdas/delivery/producer.ts';
import type { FaultConfig } from '../../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import { withFaults } from '../../../lambdas/local/faults/sdk-faults.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { sqsFaultSeed } from '../../support/sqs-fault-seeds.ts';
import { queueCounts, sleep } from './delivery-kit.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost({ workerTimeoutMs: 10_000 });
});
afterAll(async () => d.close());

async function sendThrough(config: FaultConfig, queue: Parameters<QueueProducer['send']>[0]) {
  const faulty = withFaults(sqsClient(inject('sqsEndpoint')), 'sqs', { config });
  const faults: InjectedFault[] = [];
  const off = onInjectedFault((f) => faults.push(f));
  try {
    const producer = new QueueProducer({ messages: sqsMessageQueue(faulty), commits: d.host.commits });
    const outcome = await producer.send(queue, 'one').then(
      (id) => ({ id }),
      (err: Error) => ({ err }),
    );
    return { outcome, faults: faults.map((f) => [f.operation, f.kind]) };
  } finally {
    off();
    faulty.destroy();
  }
}

describe('DL-07 a one-message send whose answer was lost leaves one copy', () => {
  it('DL-07 AQ-04 the producer hears the outcome is unknown; SQS holds one copy, delivered once as attempt 1', async () => {
    const log = d.logFile('lost-one');
    const { queue } = await d.setup('lost-one', recordingWorker(log), { maxBatchSize: 10, maxRetries: 1 });
    const { outcome, faults } = await sendThrough(
      await sqsFaultSeed('SendMessage', 'lostAnswer', 'lostAnswer'),
      queue,
    );
    expect(faults).toEqual([['SendMessage', 'lostAnswer']]);
    expect('err' in outcome && outcome.err).toMatchObject({
      name: 'backend_unavailable',
      message: expect.stringContaining('may have been enqueued'),
    });
    expect((await queueCounts(d, queue)).visible).toBe(1);
    d.startDispatcher();
    await waitFor('the copy delivered', async () => readEvents(log).some((e) => e.ev === 'end'), 20_000);
    await sleep(1_500);
    const deliveries = readEvents(log).flatMap((e) => (e.ev === 'msg' ? [e.attempts] : []));
    expect(deliveries).toEqual([1]);
    await d.stopDispatchers();
  });

  it('DL-07 a throttled try took no effect and is sent again: the send succeeds with one copy', async () => {
    const { queue } = await d.setup('throttled-one', recordingWorker(d.logFile('throttled-one')));
    const { outcome, faults } = await sendThrough(
      await sqsFaultSeed('SendMessage', 'throttle', 'throttle'),
      queue,
    );
    expect(faults).toEqual([['SendMessage', 'throttle']]);
    expect('id' in outcome).toBe(true);
    expect((await queueCounts(d, queue)).visible).toBe(1);
  });

  it('a try may have taken effect unless SQS refused it (4xx) or no connection was made', () => {
    expect(mayHaveTakenEffect({ $metadata: { httpStatusCode: 500 } })).toBe(true);
    expect(mayHaveTakenEffect({ name: 'TimeoutError', code: 'ECONNRESET' })).toBe(true);
    expect(mayHaveTakenEffect({ $metadata: { httpStatusCode: 400 }, name: 'ThrottlingException' })).toBe(
      false,
    );
    expect(mayHaveTakenEffect({ name: 'Error', code: 'ECONNREFUSED' })).toBe(false);
  });
});
