/**
 * The SDK call recorder: nothing is added to a client unless a recorder is installed; with one,
 * every call is reported before it is sent, with the function whose entry made it (also for
 * calls a function leaves running in the background).
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import {
  asFunction,
  type RecordedCall,
  recordAwsCalls,
  withCallRecorder,
} from '../../../lambdas/adapters/aws/call-recorder.ts';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';

/** A client whose last middleware answers without a network. */
function offline<C extends { middlewareStack: unknown }>(client: C): C {
  (client.middlewareStack as { add(m: unknown, o: unknown): void }).add(
    () => async () => ({ output: { $metadata: {} }, response: {} }),
    {
      step: 'initialize',
      priority: 'low',
      name: 'offline',
    },
  );
  return client;
}

const credentials = { accessKeyId: 'x', secretAccessKey: 'x' };

describe('the AWS call recorder', () => {
  it('adds nothing to a client while no recorder is installed', () => {
    const plain = new SQSClient({ region: 'us-east-1', credentials });
    const before = plain.middlewareStack.identify();
    expect(withCallRecorder(plain, 'sqs')).toBe(plain);
    expect(plain.middlewareStack.identify()).toEqual(before);
  });

  it('reports each call with its service, operation, input and function, until uninstalled', async () => {
    const calls: RecordedCall[] = [];
    const stop = recordAwsCalls((c) => calls.push(c));
    const sqs = offline(withCallRecorder(new SQSClient({ region: 'us-east-1', credentials }), 'sqs'));
    const send = new GetQueueUrlCommand({ QueueName: 'p-r1' });
    try {
      expect(() => recordAwsCalls(() => {})).toThrow(/already installed/);
      const ddb = offline(dynamoDbClient('http://127.0.0.1:9'));
      let background: Promise<unknown> = Promise.resolve();
      await asFunction('api', async () => {
        await sqs.send(send);
        // Left running after the entry's own work: still the API's call.
        background = new Promise((r) => setTimeout(r, 5)).then(() =>
          ddb.send(new GetItemCommand({ TableName: 't', Key: { pk: { S: 'a' } } })),
        );
      });
      await asFunction('executor', () => background);
      await sqs.send(send);
      expect(calls.map((c) => [c.fn, c.service, c.operation])).toEqual([
        ['api', 'sqs', 'GetQueueUrl'],
        ['api', 'dynamodb', 'GetItem'],
        [undefined, 'sqs', 'GetQueueUrl'],
      ]);
      expect(calls[0]?.input).toEqual({ QueueName: 'p-r1' });
    } finally {
      stop();
    }
    // Uninstalled: a client built while it was installed reports nothing more.
    await sqs.send(send);
    expect(calls).toHaveLength(3);
  });
});
