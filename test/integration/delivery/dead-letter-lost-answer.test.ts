/**
 * A dead-letter move whose SendMessageBatch answer is lost after SQS took it: the SDK must not
 * send the same copies again, or the dead-letter queue holds two messages with one id, each
 * delivered to its consumer as attempt 1 (DL-07). The move is postponed and made again with new
 * ids instead: a duplicate at worst, told apart by its id. Against the SQS stand-in, the answer
 * lost inside the SDK's retry loop as AWS loses it (the request took effect, then a reset).
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import { createDeliveryHost, type DeliveryHost } from '../../support/delivery-harness.ts';
import { alwaysFailingToDeadLetter, waitDrained } from './delivery-kit.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost({ workerTimeoutMs: 10_000 });
});
afterAll(async () => d.close());

describe('DL-07 a dead-letter move whose answer was lost', () => {
  it('DL-07 never leaves two dead-letter copies with one id', async () => {
    const { queue, dlq } = await alwaysFailingToDeadLetter(d, 'lost-move');
    let lost = 0;
    const loseFirst =
      (next: (a: unknown) => Promise<unknown>, context: { commandName?: string }) =>
      async (args: unknown) => {
        const out = await next(args);
        const url = (args as { input?: { QueueUrl?: string } }).input?.QueueUrl;
        if (context.commandName === 'SendMessageBatchCommand' && url === dlq.sqsUrl && lost === 0) {
          lost++;
          throw Object.assign(new Error('read ECONNRESET (test)'), {
            name: 'TimeoutError',
            code: 'ECONNRESET',
          });
        }
        return out;
      };
    d.host.sqs.middlewareStack.addRelativeTo(loseFirst as never, {
      name: 'loseFirstDeadLetterAnswer',
      relation: 'after',
      toMiddleware: 'retryMiddleware',
    });
    await d.host.producer.sendBatch(
      queue,
      ['a', 'b', 'c'].map((body) => ({ body })),
    );
    d.startDispatcher();
    await waitDrained(d, queue, 40_000);
    await d.stopDispatchers();
    expect(lost).toBe(1);
    const ids: string[] = [];
    const bodies: string[] = [];
    for (let i = 0; i < 5; i++) {
      const out = await d.host.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dlq.sqsUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 60 }),
      );
      for (const m of out.Messages ?? []) {
        const env = decodeEnvelope(m.Body);
        if (!env) continue;
        ids.push(env.id);
        bodies.push(new TextDecoder().decode(env.body));
      }
    }
    // Every message reached the dead-letter queue; no id is there twice.
    expect(new Set(bodies)).toEqual(new Set(['a', 'b', 'c']));
    expect(new Set(ids).size).toBe(ids.length);
  });
});
