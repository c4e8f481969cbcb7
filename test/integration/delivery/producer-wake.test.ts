/**
 * The producer client's wake: code sending straight to SQS with IAM rights tells the Host after
 * each accepted send (`lambdaWake` → the wake function), so its consumer gets a lane at once, as
 * for a send through the Host, rather than at the supervisor's next round. Lambda's asynchronous
 * invoke is the one part without a stand-in: its client here hands the event to the real wake
 * handler, which runs the real control loop over DynamoDB Local and the local lanes.
 */
import type { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { createQueueProducerClient, lambdaWake } from '../../../lambdas/client/index.ts';
import type { WakeRequest } from '../../../lambdas/delivery/wake-request.ts';
import { createWakeHandler } from '../../../lambdas/entries/wake.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { sleep } from './delivery-kit.ts';

/** A Lambda client whose asynchronous invokes run `handle` (after answering, as Lambda does). */
function asyncLambda(handle: (event: unknown) => Promise<unknown>, seen: WakeRequest[]) {
  return {
    send: async (command: InvokeCommand) => {
      expect(command.input.InvocationType).toBe('Event');
      const event = JSON.parse(new TextDecoder().decode(command.input.Payload as Uint8Array));
      seen.push(event);
      void handle(event);
      return { StatusCode: 202 };
    },
  } as unknown as Pick<LambdaClient, 'send'>;
}

describe('the producer client wakes the consumer', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.stopDispatchers();
    await d?.close();
    d = undefined;
  });

  it('DL-01 AQ-04 a send through the client with wake is delivered with the supervisor off; a delayed one when it becomes visible', async () => {
    d = await createDeliveryHost();
    const log = d.logFile('wake');
    const { queue } = await d.setup('wake', recordingWorker(log), { maxBatchSize: 10, maxConcurrency: 2 });
    // The supervisor's round is an hour away: only a wake starts a lane.
    d.startDispatcher({ supervisorMs: 3_600_000 });
    await sleep(300);
    const queueName = queue.sqsUrl.slice(queue.sqsUrl.lastIndexOf('/') + 1);
    const prefix = queueName.slice(0, queueName.length - queue.queueUid.length);
    const seen: WakeRequest[] = [];
    const handler = createWakeHandler({ queueNamePrefix: prefix, loop: d.host.loop });
    const client = createQueueProducerClient({
      sqs: d.host.sqs,
      dynamodb: d.host.dynamodb,
      tableName: d.host.tableName,
      queueUrl: queue.sqsUrl,
      wake: lambdaWake(asyncLambda(handler, seen), 'takoform-wake'),
    });
    const id = await client.send('now');
    const later = await client.send('later', { delaySeconds: 3 });
    expect(seen).toEqual([
      { queue: queueName, now: true, later: [] },
      { queue: queueName, now: false, later: [3] },
    ]);
    const delivered = await waitFor('both messages handled', () => {
      const ids = readEvents(log).flatMap((e) => (e.ev === 'msg' && e.id ? [e.id] : []));
      return ids.includes(id) && ids.includes(later) ? ids : undefined;
    });
    expect(delivered.sort()).toEqual([id, later].sort());
  });

  it('SEC-02 the wake function refuses what is not a wake of a queue of its Host, and never throws', async () => {
    const woken: unknown[][] = [];
    const handler = createWakeHandler({
      queueNamePrefix: 'host_',
      loop: { wake: async (...args: unknown[]) => void woken.push(args) },
    });
    expect(await handler({ queue: 'host_q1', now: true, later: [] })).toEqual({ woken: true });
    expect(await handler({ queue: 'other_q1', now: true, later: [] })).toEqual({ woken: false });
    expect(await handler({ queue: 'host_', now: true, later: [] })).toEqual({ woken: false });
    expect(await handler({ queue: 'host_q1', now: true, later: [901] })).toEqual({ woken: false });
    expect(await handler({ queue: 'host_q1', now: true, later: [], extra: 1 })).toEqual({ woken: false });
    expect(await handler('host_q1')).toEqual({ woken: false });
    expect(woken).toEqual([['q1', [], true]]);
  });
});
