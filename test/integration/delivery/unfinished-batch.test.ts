/**
 * A short outage of the Host's table after a handler ended must not stall its consumer for the
 * batch's deadline (15 minutes at the default worker timeout). Found by chaos seeds 30 and 47: a
 * DynamoDB stand-in restart while a runner finalised kept both slots of the consumer, and every
 * message behind them, until the deadline. Runs at the default worker timeout, through the real
 * dispatcher definition under the local Step Functions stand-in.
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { records, sleep, waitDrained } from './delivery-kit.ts';

const DEFAULT_WORKER_TIMEOUT_MS = 900_000;

/**
 * Every DynamoDB request of the Host's client fails (connection refused) from `begin(ms)` for
 * that long, as when DynamoDB Local restarts; `watch` sees each request first and may begin it.
 */
function tableOutage(d: DeliveryHost, watch?: (command: string, input: unknown) => void) {
  let until = 0;
  let refused = 0;
  const name = `tableOutage-${Math.random()}`;
  d.host.dynamodb.middlewareStack.add(
    (next, context) => async (args) => {
      watch?.(context.commandName as string, args.input);
      if (Date.now() < until) {
        refused++;
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1'), {
          code: 'ECONNREFUSED',
          $metadata: {},
        });
      }
      return next(args);
    },
    { step: 'deserialize', name },
  );
  return {
    begin: (ms: number) => {
      until = Date.now() + ms;
    },
    refused: () => refused,
    end: () => d.host.dynamodb.middlewareStack.remove(name),
  };
}

describe('issue 12: a runner that cannot finalise after its handler ended (RC-04, DL-05)', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost({ workerTimeoutMs: DEFAULT_WORKER_TIMEOUT_MS });
  });
  afterAll(async () => {
    await d.close();
  });

  it('RC-04 DL-05 the batch is applied with the handler’s outcome as soon as the table is back, not at its deadline', async ({
    expect,
  }) => {
    const log = d.logFile('unfinished');
    // The handler returns 300 ms after it saw its message: the outage starts in between.
    const { queue, consumerUid } = await d.setup(
      'unfinished',
      recordingWorker(log, 'await new Promise((r) => setTimeout(r, 300));'),
      { maxBatchSize: 1, maxConcurrency: 1, maxRetries: 3 },
    );
    // Every DynamoDB request fails while the outage lasts, as when DynamoDB Local restarts:
    // longer than the runner's own finalisation retries, shorter than RecoverBatch's.
    const outage = tableOutage(d);
    try {
      const lanes = d.startDispatcher({ supervisorMs: 3_600_000 });
      await d.host.producer.send(queue, 'once');
      await waitFor('the delivery', () => records(log).some((e) => e.ev === 'msg'), 30_000);
      outage.begin(5_000);
      const sentAt = Date.now();
      // Acknowledged by the handler's return (its outcome), long before the 900 s deadline.
      await waitDrained(d, queue, 60_000);
      expect(outage.refused()).toBeGreaterThan(0);
      expect(Date.now() - sentAt).toBeLessThan(60_000);
      await waitFor(
        'the slot freed',
        async () => Object.keys(await d.host.delivery.slotsOf(consumerUid)).length === 0,
      );
      await sleep(2_000);
      const msgs = records(log).filter((e) => e.ev === 'msg');
      expect(msgs.map((e) => e.attempts)).toEqual([1]);
      await waitFor('the lane ended', () => lanes.running().length === 0, 30_000);
    } finally {
      outage.end();
    }
  });

  it('RC-04 DL-07 a dead-letter move that fails after the handler ended returns its message at once, not at the deadline', async ({
    expect,
  }) => {
    const log = d.logFile('unfinished-move');
    const { queue, dlq } = await d.setup(
      'unfinished-move',
      recordingWorker(log, 'throw new Error("out of luck");'),
      { maxBatchSize: 1, maxConcurrency: 1, maxRetries: 0, deadLetter: true },
    );
    // The runner's dead-letter call reads the batch's manifest (finalize used the runner's sealed
    // copy, so this is the first read): from then on, for 5 s, every DynamoDB request fails, as
    // when DynamoDB Local restarts.
    let manifestReads = 0;
    const outage = tableOutage(d, (command, input) => {
      const key = (input as { Key?: { sk?: { S?: string } } }).Key;
      if (command === 'GetItemCommand' && key?.sk?.S?.startsWith('manifest') && ++manifestReads === 1)
        outage.begin(5_000);
    });
    try {
      const lanes = d.startDispatcher({ supervisorMs: 3_600_000 });
      await d.host.producer.send(queue, 'doomed');
      // Moved once the table is back (on the message's return), long before the 900 s deadline.
      await waitDrained(d, queue, 60_000);
      expect(outage.refused()).toBeGreaterThan(0);
      const dead = await d.host.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dlq?.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      expect(dead.Messages?.length).toBe(1);
      // One delivery: the move charged no other attempt.
      expect(
        records(log)
          .filter((e) => e.ev === 'msg')
          .map((e) => e.attempts),
      ).toEqual([1]);
      await waitFor('the lane ended', () => lanes.running().length === 0, 30_000);
    } finally {
      outage.end();
    }
  });
});
