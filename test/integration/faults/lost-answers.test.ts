/**
 * `lostAnswer` (lambdas/local/faults/sdk-faults.ts) against the real DynamoDB Local and SQS
 * stand-in: the request reaches the server and takes effect, then the caller's SDK sees a
 * transient error and sends the same request again. These tests show that the injected fault is
 * AWS's — the write is there once, the retry meets what the first try left — so that the
 * delivery tests and the chaos suite that run with it meet the Host's real retry paths.
 */
import { randomUUID } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient, sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { type FaultConfig, parseFaultConfig } from '../../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import { withFaults } from '../../../lambdas/local/faults/sdk-faults.ts';

/** Every fault injected while `fn` runs (calls run one after another, so this is exact). */
async function faultsDuring<T>(
  fn: () => Promise<T>,
): Promise<{ faults: InjectedFault[]; result: PromiseSettledResult<T> }> {
  const faults: InjectedFault[] = [];
  const off = onInjectedFault((f) => faults.push(f));
  try {
    const [result] = await Promise.allSettled([fn()]);
    return { faults, result: result as PromiseSettledResult<T> };
  } finally {
    off();
  }
}

type SdkError = Error & { code?: string; $metadata?: { attempts?: number; httpStatusCode?: number } };
function rejection(r: PromiseSettledResult<unknown>): SdkError {
  if (r.status !== 'rejected') throw new Error('expected a rejection');
  return r.reason as SdkError;
}

describe('lost answers against DynamoDB Local', () => {
  let clean: DynamoDBClient;
  const table = `lost-${randomUUID()}`;
  const key = (id: string) => ({ pk: { S: `L#${id}` }, sk: { S: '_' } });
  const faulty = (dynamodb: FaultConfig['dynamodb'], seed = 5) =>
    withFaults(dynamoDbClient(inject('ddbEndpoint')), 'dynamodb', { config: { seed, dynamodb } });
  /** How many times the counter `n` of the item was incremented (undefined: no item). */
  const count = async (id: string) => {
    const out = await clean.send(
      new GetItemCommand({ TableName: table, Key: key(id), ConsistentRead: true }),
    );
    return out.Item ? Number(out.Item.n?.N ?? 0) : undefined;
  };
  /** Creates the item with n = 1, only if it does not exist: a write that must happen once. */
  const createOnce = (id: string) =>
    new UpdateItemCommand({
      TableName: table,
      Key: key(id),
      UpdateExpression: 'ADD n :one',
      ConditionExpression: 'attribute_not_exists(pk)',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    });
  const transactOnce = (ids: string[], token?: string) =>
    new TransactWriteItemsCommand({
      ...(token ? { ClientRequestToken: token } : {}),
      TransactItems: ids.map((id) => ({
        Update: {
          TableName: table,
          Key: key(id),
          UpdateExpression: 'ADD n :one',
          ConditionExpression: 'attribute_not_exists(pk)',
          ExpressionAttributeValues: { ':one': { N: '1' } },
        },
      })),
    });

  beforeAll(async () => {
    clean = dynamoDbClient(inject('ddbEndpoint'));
    await createHostTable(clean, table);
  });

  it('RC-04 lostAnswer is validated like the other rates, per service and per operation', () => {
    expect(
      parseFaultConfig(
        '{"seed":1,"dynamodb":{"lostAnswer":0.05,"operations":{"UpdateItem":{"lostAnswer":1}}},"sqs":{"lostAnswer":0.1}}',
      ),
    ).toEqual({
      seed: 1,
      dynamodb: { lostAnswer: 0.05, operations: { UpdateItem: { lostAnswer: 1 } } },
      sqs: { lostAnswer: 0.1 },
    });
    expect(() => parseFaultConfig('{"seed":1,"dynamodb":{"lostAnswer":2}}')).toThrow(
      /dynamodb.lostAnswer: must be a number between 0 and 1/,
    );
    expect(() => parseFaultConfig('{"seed":1,"lambda":{"lostAnswer":0.1}}')).toThrow(
      /lambda: Unrecognized key/,
    );
  });

  it('DL-03 a conditional UpdateItem whose answer is lost committed once; the SDK’s retry fails its own condition', async () => {
    const client = faulty({ operations: { UpdateItem: { lostAnswer: 1 } } });
    const { faults, result } = await faultsDuring(() => client.send(createOnce('cond')));
    const err = rejection(result);
    // What AWS does: the first try committed, the caller never heard it, the retry met the write.
    expect(err).toBeInstanceOf(ConditionalCheckFailedException);
    expect(err.$metadata?.attempts).toBe(2);
    expect(faults.map((f) => [f.operation, f.kind])).toEqual([['UpdateItem', 'lostAnswer']]);
    expect(['TimeoutError', 'InternalServerError']).toContain(faults[0]?.error);
    // The debug line names what the write addressed: its key's kind and update expression.
    expect(faults[0]?.target).toBe('L ADD n :one');
    expect(await count('cond')).toBe(1);
  });

  it('RC-04 every attempt that took effect can lose its answer: a plain write is applied each time, the error surfaces after maxAttempts, and both shapes are retried', async () => {
    const names = new Set<string>();
    for (let seed = 1; seed <= 6; seed++) {
      const client = faulty({ lostAnswer: 1 }, seed);
      const id = `plain-${seed}`;
      const { faults, result } = await faultsDuring(() =>
        client.send(
          new UpdateItemCommand({
            TableName: table,
            Key: key(id),
            UpdateExpression: 'ADD n :one',
            ExpressionAttributeValues: { ':one': { N: '1' } },
          }),
        ),
      );
      const err = rejection(result);
      expect(err.$metadata?.attempts).toBe(3); // the client's maxAttempts: retried as transient
      expect(faults.map((f) => f.kind)).toEqual(['lostAnswer', 'lostAnswer', 'lostAnswer']);
      for (const f of faults) names.add(f.error ?? '');
      if (err.name === 'TimeoutError') expect(err.code).toBe('ECONNRESET');
      else expect(err.$metadata?.httpStatusCode).toBe(500);
      expect(await count(id)).toBe(3); // not idempotent: every attempt was applied
    }
    expect([...names].sort()).toEqual(['InternalServerError', 'TimeoutError']);
  });

  it('RC-04 a request the server refused has no answer to lose: nothing is injected and nothing retried', async () => {
    await clean.send(createOnce('refused'));
    const client = faulty({ lostAnswer: 1 });
    const { faults, result } = await faultsDuring(() => client.send(createOnce('refused')));
    const err = rejection(result);
    expect(err).toBeInstanceOf(ConditionalCheckFailedException);
    expect(err.$metadata?.attempts).toBe(1);
    expect(faults).toEqual([]);
  });

  it('DL-03 a TransactWriteItems with a ClientRequestToken whose answer is lost answers success on the retry, written once', async () => {
    const client = faulty({ operations: { TransactWriteItems: { lostAnswer: 0.5 } } }, 21);
    let recognised = 0;
    for (let i = 0; i < 16; i++) {
      const ids = [`tx-${i}-a`, `tx-${i}-b`];
      const { faults, result } = await faultsDuring(() => client.send(transactOnce(ids, randomUUID())));
      if (result.status === 'fulfilled') {
        expect(result.value.$metadata.attempts).toBe(faults.length + 1);
        if (faults.length > 0) recognised++;
      } else {
        // Every answer lost: the retries were recognised too, and the caller saw only errors.
        expect(faults).toHaveLength(3);
        expect(rejection(result).$metadata?.attempts).toBe(3);
      }
      for (const id of ids) expect(await count(id)).toBe(1);
    }
    expect(recognised).toBeGreaterThan(0);
  });

  it('DL-03 without an explicit token the SDK sends one of its own, the same on every retry, so the retry is recognised too', async () => {
    const client = faulty({ operations: { TransactWriteItems: { lostAnswer: 0.5 } } }, 22);
    let recognised = 0;
    for (let i = 0; i < 16; i++) {
      const ids = [`auto-${i}`];
      const { faults, result } = await faultsDuring(() => client.send(transactOnce(ids)));
      if (result.status === 'fulfilled' && faults.length > 0) recognised++;
      expect(await count(ids[0] as string)).toBe(1);
    }
    expect(recognised).toBeGreaterThan(0);
  });
});

describe('lost answers against the SQS stand-in', () => {
  let clean: SQSClient;
  const faulty = (sqs: FaultConfig['sqs'], seed = 4) =>
    withFaults(sqsClient(inject('sqsEndpoint')), 'sqs', { config: { seed, sqs } });
  const newQueue = async () =>
    (await clean.send(new CreateQueueCommand({ QueueName: `lost-${randomUUID()}` }))).QueueUrl as string;
  const depth = async (url: string) => {
    const a = (
      await clean.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      )
    ).Attributes;
    return (
      Number(a?.ApproximateNumberOfMessages ?? 0) + Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  };

  beforeAll(() => {
    clean = sqsClient(inject('sqsEndpoint'));
  });

  it('AQ-04 a SendMessage whose answer is lost was sent, and the SDK’s retry sends a second copy (standard queues are at least once)', async () => {
    const url = await newQueue();
    const client = faulty({ operations: { SendMessage: { lostAnswer: 1 } } });
    const { faults, result } = await faultsDuring(() =>
      client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'twice' })),
    );
    const err = rejection(result);
    expect(err.$metadata?.attempts).toBe(3);
    expect(faults.map((f) => f.kind)).toEqual(['lostAnswer', 'lostAnswer', 'lostAnswer']);
    expect(await depth(url)).toBe(3);
  });

  it('DL-07 a ReceiveMessage whose answer is lost hid what it received: the retry gets the rest, the lost ones return when their visibility ends', async () => {
    const url = await newQueue();
    for (const body of ['m1', 'm2'])
      await clean.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
    // Only the first attempt's answer is lost (seeded), so the retry answers.
    let found: { faults: InjectedFault[]; bodies: string[] } | undefined;
    for (let seed = 1; seed <= 40 && !found; seed++) {
      const client = faulty({ operations: { ReceiveMessage: { lostAnswer: 0.5 } } }, seed);
      const { faults, result } = await faultsDuring(() =>
        client.send(
          new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, VisibilityTimeout: 2 }),
        ),
      );
      if (result.status === 'fulfilled' && faults.length === 1)
        found = { faults, bodies: (result.value.Messages ?? []).map((m) => m.Body as string) };
      else await new Promise((r) => setTimeout(r, 2_200)); // let anything hidden come back
    }
    expect(found?.faults.map((f) => f.kind)).toEqual(['lostAnswer']);
    expect(found?.bodies).toHaveLength(1);
    // The lost receive's message is hidden (not deleted): it comes back when its visibility ends.
    await new Promise((r) => setTimeout(r, 2_200));
    const again = await clean.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 30 }),
    );
    expect((again.Messages ?? []).map((m) => m.Body).sort()).toEqual(['m1', 'm2']);
  });

  it('DL-07 a DeleteMessage whose answer is lost deleted the message; the retry with the same handle answers as SQS does', async () => {
    const url = await newQueue();
    await clean.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'gone' }));
    const got = await clean.send(new ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 30 }));
    const handle = got.Messages?.[0]?.ReceiptHandle as string;
    const client = faulty({ operations: { DeleteMessage: { lostAnswer: 1 } } });
    const { faults, result } = await faultsDuring(() =>
      client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: handle })),
    );
    // SQS takes a repeated delete with the handle of a deleted message: each retry succeeds on
    // the server and loses its answer again, so the caller sees the error after maxAttempts.
    expect(faults.map((f) => f.kind)).toEqual(['lostAnswer', 'lostAnswer', 'lostAnswer']);
    expect(rejection(result).$metadata?.attempts).toBe(3);
    expect(await depth(url)).toBe(0);
  });
});
