/**
 * A worker invocation whose `register` call to the batch host lost its answer, on the AWS
 * composition over DynamoDB Local and the SQS stand-in. The worker runtime reaches the batch host
 * through a real Lambda client (its retry strategy included) whose requests the batch-host
 * handler answers in process; the answer is lost the way AWS loses one (test/support/
 * lost-answer.ts): the registration commits, the connection drops, the SDK sends it again. With
 * maxRetries 0, a registration counted as a delivery whose handler never ran would drop the
 * message undelivered (DL-07).
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it, vi } from 'vitest';

// Powertools logs of the entries stay quiet here; they are asserted on nowhere.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { lambdaTransport, remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';
import { loseAnswers } from '../../support/lost-answer.ts';

interface Batch {
  messages: readonly { id: string; attempts: number }[];
  acknowledgeAll(): Promise<void>;
}

/**
 * A Lambda client whose requests reach `fn` in this process instead of the Lambda service: the
 * SDK serialises the Invoke, retries it and reads its answer as it would on AWS.
 */
function inProcessLambda(fn: (event: unknown) => Promise<unknown>): LambdaClient {
  const decoder = new TextDecoder();
  return new LambdaClient({
    region: 'us-east-1',
    endpoint: 'http://lambda.in-process.test',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
    requestHandler: {
      handle: async (request: { body?: unknown }) => {
        const body =
          typeof request.body === 'string' ? request.body : decoder.decode(request.body as Uint8Array);
        const result = await fn(JSON.parse(body));
        return {
          response: {
            statusCode: 200,
            headers: { 'x-amz-executed-version': '$LATEST' },
            body: new TextEncoder().encode(JSON.stringify(result)),
          },
        };
      },
    } as never,
  });
}

/** The action of an Invoke request's payload, and whether it carries received messages. */
function invoked(input: Record<string, unknown>): { action?: string; received?: unknown[] } {
  return JSON.parse(new TextDecoder().decode(input.Payload as Uint8Array));
}

const isRegisterOfMessages = (command: string, input: Record<string, unknown>) => {
  if (command !== 'InvokeCommand') return false;
  const call = invoked(input);
  return call.action === 'register' && (call.received?.length ?? 0) > 0;
};

describe('DL-07: a registration whose answer was lost counts nothing that did not run', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost();
  });

  async function acquire(consumerUid: string): Promise<Slot> {
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid, generation: 1 })) as {
      status: string;
      slot: Slot;
    };
    expect(acquired.status).toBe('acquired');
    return acquired.slot;
  }

  /** One worker invocation (a lane) whose every Host call goes through `lambda`. */
  async function runLane(lambda: LambdaClient, slot: Slot, seen: number[]) {
    const handler = createQueueWorkerHandler(
      {
        async queue(batch: Batch) {
          for (const m of batch.messages) seen.push(m.attempts);
          await batch.acknowledgeAll();
        },
      },
      {},
      {
        sqs: t.sqs,
        host: () => remoteBatchHost(lambdaTransport(lambda, 'batch-host')),
        idleWaitSeconds: 1,
      },
    );
    return handler({ kind: 'takoform.queue-batch.v1', slot }, { getRemainingTimeInMillis: () => 120_000 });
  }

  /** The batch-host function behind a Lambda client; `actions` lists every invocation's action. */
  function batchHostFunction() {
    const batchHost = createBatchHostHandler(t.host);
    const actions: string[] = [];
    const lambda = inProcessLambda((event) => {
      actions.push(String((event as { action?: unknown }).action));
      return batchHost(event);
    });
    return { lambda, actions };
  }

  async function expectDeliveredOnce(c: { queue: { sqsUrl: string; queueUid: string } }, id: string) {
    const left = await t.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: c.queue.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
    );
    expect(left.Messages ?? []).toEqual([]);
    expect((await t.host.deliveryStore.getAttempts(c.queue.queueUid, [id])).get(id)).toBeUndefined();
  }

  it('DL-07 RC-04 the SDK sends the register invoke again after its answer was lost: the repeat is recognised, the handler runs the message once as attempt 1, nothing is dropped (maxRetries 0)', async () => {
    const c = await t.setupConsumer('lost-register', { maxRetries: 0, maxConcurrency: 1 });
    const [id] = await t.host.host.producer.sendBatch(c.queue, [{ body: 'once' }]);
    const { lambda, actions } = batchHostFunction();
    const lost = loseAnswers(lambda, isRegisterOfMessages);
    const seen: number[] = [];
    const result = await runLane(lambda, await acquire(c.consumerUid), seen);
    expect(lost.lost()).toBe(1);
    expect(seen).toEqual([1]);
    expect(result).toMatchObject({ delivered: 1 });
    // The batch host ran register twice (the SDK's retry), then the lane went on as usual.
    expect(actions.slice(0, 2)).toEqual(['register', 'register']);
    await expectDeliveredOnce(c, id as string);
  });

  it('DL-07 RC-04 every try of the SDK loses its answer: the runner sends register again itself, and the handler runs the message once as attempt 1', async () => {
    const c = await t.setupConsumer('lost-thrice', { maxRetries: 0, maxConcurrency: 1 });
    const [id] = await t.host.host.producer.sendBatch(c.queue, [{ body: 'once' }]);
    const { lambda, actions } = batchHostFunction();
    // The SDK's three tries all reach the batch host and lose their answers; the SDK gives up.
    const lost = loseAnswers(lambda, isRegisterOfMessages, { times: 3 });
    const seen: number[] = [];
    const result = await runLane(lambda, await acquire(c.consumerUid), seen);
    expect(lost.lost()).toBe(3);
    expect(seen).toEqual([1]);
    expect(result).toMatchObject({ delivered: 1 });
    expect(actions.slice(0, 4)).toEqual(['register', 'register', 'register', 'register']);
    await expectDeliveredOnce(c, id as string);
  });

  it('the in-process Lambda client answers as the Lambda service does', async () => {
    const lambda = inProcessLambda(async (event) => ({ echoed: event }));
    const out = await lambda.send(
      new InvokeCommand({ FunctionName: 'f', Payload: new TextEncoder().encode('{"a":1}') }),
    );
    expect(out.StatusCode).toBe(200);
    expect(JSON.parse(new TextDecoder().decode(out.Payload))).toEqual({ echoed: { a: 1 } });
  });
});
