/**
 * SQS may fail single entries of a SendMessageBatch on its side (`InternalError`, not a sender
 * fault): those entries were not enqueued, so a dead-letter move sends them again at once instead
 * of postponing the move by hiding the originals (MOVE_RETRY_SECONDS each time the fault struck,
 * which under a steady fault rate held messages back past any bound). Against the SQS stand-in;
 * the entry failures are answered by a middleware, as SQS answers them, without the send.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryHost, type DeliveryHost, waitFor } from '../../support/delivery-harness.ts';
import { alwaysFailingToDeadLetter, queueCounts, waitDrained } from './delivery-kit.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost({ workerTimeoutMs: 10_000 });
});
afterAll(async () => d.close());

describe('DL-07 a dead-letter move whose entries SQS failed on its side', () => {
  it('DL-07 sends them again at once: one copy each, no original hidden for a later move', async () => {
    const { queue, dlq } = await alwaysFailingToDeadLetter(d, 'entry-failures');
    const seen = { failedRequests: 0, sends: 0, hidden: 0 };
    d.host.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as {
          QueueUrl?: string;
          Entries?: { Id?: string; VisibilityTimeout?: number }[];
        };
        const entries = input.Entries ?? [];
        // Hidden after a move began: postponed to be moved when it returns.
        const afterMove = seen.sends > 0 && input.QueueUrl === queue.sqsUrl;
        if (context.commandName === 'ChangeMessageVisibilityBatchCommand' && afterMove)
          seen.hidden += entries.filter((e) => (e.VisibilityTimeout ?? 0) > 0).length;
        if (context.commandName !== 'SendMessageBatchCommand' || input.QueueUrl !== dlq.sqsUrl)
          return next(args);
        seen.sends++;
        if (seen.failedRequests >= 2) return next(args);
        seen.failedRequests++;
        const Failed = entries.map((e) => ({
          Id: e.Id,
          SenderFault: false,
          Code: 'InternalError',
          Message: 'We encountered an internal error. Please try again.',
        }));
        return { output: { Successful: [], Failed, $metadata: {} }, response: {} } as never;
      },
      { step: 'initialize', name: 'failDeadLetterEntries' },
    );
    try {
      await d.host.producer.sendBatch(
        queue,
        ['a', 'b', 'c'].map((body) => ({ body })),
      );
      d.startDispatcher();
      await waitFor(
        'the messages moved',
        async () => ((await queueCounts(d, dlq)).visible >= 3 ? true : undefined),
        40_000,
      );
      await waitDrained(d, queue);
      await d.stopDispatchers();
      expect(seen.failedRequests).toBe(2);
      expect((await queueCounts(d, dlq)).visible).toBe(3);
      // Every entry went on a later try of the same move: no original was hidden to be moved later.
      expect(seen.hidden).toBe(0);
      expect(seen.sends).toBe(seen.failedRequests + 1);
    } finally {
      d.host.sqs.middlewareStack.remove('failDeadLetterEntries');
    }
  });
});
