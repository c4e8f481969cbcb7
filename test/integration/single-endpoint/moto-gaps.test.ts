/**
 * The proofs of moto's gaps (runs only in `npm run test:moto`): each test makes the smallest
 * direct SDK call that shows moto_server answering otherwise than AWS documents, or lacking what
 * a skipped test needs. A proof that stops holding (a newer moto fixed the gap) fails here, and
 * its entry in test/support/moto-known-gaps.json must go. The last test checks the list itself.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  BatchWriteItemCommand,
  CreateTableCommand,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  ChangeMessageVisibilityBatchCommand,
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { describe, expect, inject, it } from 'vitest';
import { dynamoDbClient, sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { OLDEST_AGE_PATH } from '../../../lambdas/local/standins/sqs-queue-age.ts';
import { loadMotoKnownGaps } from '../../support/single-endpoint-gaps.ts';

const unique = () => `gap-${randomBytes(4).toString('hex')}`;

/** A fresh table keyed by `pk` on the emulator. */
async function newTable() {
  const ddb = dynamoDbClient(inject('ddbEndpoint'));
  const table = unique();
  await ddb.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    }),
  );
  return { ddb, table };
}

describe('moto gaps', () => {
  it('moto fails a ConditionExpression with size() of a missing attribute (HTTP 500) instead of evaluating it false', async () => {
    // AWS: a function of an attribute that does not exist makes its comparison false, so the
    // update is refused with ConditionalCheckFailedException (DynamoDB Local answers the same).
    const { ddb, table } = await newTable();
    const err = await ddb
      .send(
        new UpdateItemCommand({
          TableName: table,
          Key: { pk: { S: 'a' } },
          UpdateExpression: 'SET n = :one',
          ConditionExpression: 'size(m) < :max',
          ExpressionAttributeValues: { ':one': { N: '1' }, ':max': { N: '2' } },
        }),
      )
      .catch((e: unknown) => e as { name: string; $response?: { statusCode?: number } });
    expect(err).toBeDefined();
    expect((err as { name: string }).name).not.toBe('ConditionalCheckFailedException');
    expect((err as { $response?: { statusCode?: number } }).$response?.statusCode).toBe(500);
  });

  it('moto does not isolate concurrent TransactWriteItems: a cancelled one restores a copy of the whole table, undoing others, or fails with HTTP 500', async () => {
    // AWS: transactions are serializable against each other; a cancelled one changes nothing,
    // and every transaction that succeeded stays written. moto copies the table before each
    // transaction and puts the copy back when one is cancelled, with no lock between requests.
    const { ddb, table } = await newTable();
    await ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'taken' } } }));
    // A table of some size: moto's copy then takes long enough for the requests to overlap. With
    // 100 items a quiet machine needed 27–46 rounds of 20 to show it; with 1,500 and rounds of
    // 50, one or two.
    for (let i = 0; i < 1_500; i += 25) {
      const puts = Array.from({ length: 25 }, (_, j) => ({
        PutRequest: { Item: { pk: { S: `filler-${i + j}` } } },
      }));
      await ddb.send(new BatchWriteItemCommand({ RequestItems: { [table]: puts } }));
    }
    const put = (pk: string, condition?: string) => ({
      Put: {
        TableName: table,
        Item: { pk: { S: pk } },
        ...(condition ? { ConditionExpression: condition } : {}),
      },
    });
    let anomalies = 0;
    // The loop stops once one is seen, so a pass costs only what it needs.
    for (let round = 0; round < 30 && anomalies === 0; round++) {
      const written = Array.from({ length: 50 }, (_, i) => `r${round}-ok-${i}`);
      const outcomes = await Promise.allSettled([
        ...written.map((pk) => ddb.send(new TransactWriteItemsCommand({ TransactItems: [put(pk)] }))),
        ...written.map((_, i) =>
          ddb.send(
            new TransactWriteItemsCommand({
              TransactItems: [put(`r${round}-no-${i}`), put('taken', 'attribute_not_exists(pk)')],
            }),
          ),
        ),
      ]);
      const served = outcomes.slice(0, written.length);
      for (const [i, o] of served.entries()) {
        if (o.status === 'rejected') anomalies++;
        else if (
          !(
            await ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: written[i] as string } } }))
          ).Item
        )
          anomalies++; // acknowledged, then undone
      }
      for (const o of outcomes.slice(written.length))
        if (
          o.status === 'rejected' &&
          (o.reason as { name?: string }).name !== 'TransactionCanceledException'
        )
          anomalies++;
    }
    expect(anomalies).toBeGreaterThan(0);
  });

  it('moto does not make a conditional UpdateItem atomic: concurrent updates under one condition can all pass it', async () => {
    // AWS: a conditional write is atomic on its item; of concurrent updates that each require
    // `owner` to be absent, exactly one succeeds and the rest fail their condition. moto reads the
    // item, evaluates the condition and then applies the update, with no lock between requests:
    // an update of several attributes (as an Operation's claim is) gives the others time to pass.
    const { ddb, table } = await newTable();
    const counters = Array.from({ length: 10 }, (_, j) => `a${j} = if_not_exists(a${j}, :zero) + :one`);
    let doubleOwners = 0;
    // The race needs moto's threads to interleave; on a machine busy with other test files that
    // takes more rounds (each stops the loop once seen, so a pass costs only what it needs).
    for (let round = 0; round < 60 && doubleOwners === 0; round++) {
      const pk = `item-${round}`;
      await ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: pk } } }));
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          ddb.send(
            new UpdateItemCommand({
              TableName: table,
              Key: { pk: { S: pk } },
              UpdateExpression: `SET ${[...counters, '#owner = :me'].join(', ')}`,
              ConditionExpression: 'attribute_not_exists(#owner)',
              ExpressionAttributeNames: { '#owner': 'owner' },
              ExpressionAttributeValues: {
                ':me': { S: `claimant-${i}` },
                ':zero': { N: '0' },
                ':one': { N: '1' },
              },
            }),
          ),
        ),
      );
      for (const o of outcomes)
        if (o.status === 'rejected')
          expect((o.reason as { name?: string }).name).toBe('ConditionalCheckFailedException');
      if (outcomes.filter((o) => o.status === 'fulfilled').length > 1) doubleOwners++;
    }
    expect(doubleOwners).toBeGreaterThan(0);
  });

  it('moto copies the whole table for each item of a TransactWriteItems: its latency grows with the table’s size', async () => {
    // AWS: DynamoDB answers in single-digit milliseconds at any scale (Developer Guide, "What is
    // Amazon DynamoDB?"); a transaction's cost depends on its items, not on the table's size.
    // moto deep-copies every table a transaction names, once per item, before it writes: on a
    // table of thousands of items each transaction takes hundreds of milliseconds (and copies
    // racing concurrent writes fail with HTTP 500, as in the proof above).
    const empty = await newTable();
    const { ddb, table } = await newTable();
    const transact = async (name: string, tag: string) => {
      const started = performance.now();
      await ddb.send(
        new TransactWriteItemsCommand({
          TransactItems: Array.from({ length: 4 }, (_, i) => ({
            Put: { TableName: name, Item: { pk: { S: `${tag}-${i}` } } },
          })),
        }),
      );
      return performance.now() - started;
    };
    for (let n = 0; n < 2_000; n += 25)
      await ddb.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [table]: Array.from({ length: 25 }, (_, i) => ({
              PutRequest: { Item: { pk: { S: `filler-${n + i}` }, v: { S: 'x'.repeat(200) } } },
            })),
          },
        }),
      );
    // Alternating between the two tables, so load from other test files on moto falls on both.
    const small: number[] = [];
    const large: number[] = [];
    for (let i = 0; i < 7; i++) {
      small.push(await transact(empty.table, `small-${i}`));
      large.push(await transact(table, `large-${i}`));
    }
    const median = (ms: number[]) => ms.sort((x, y) => x - y)[3] as number;
    // Measured on moto 5.2.1: 13 ms on an empty table, 330 ms at 2000 items (870 ms at 4000).
    expect(
      median(large),
      `${median(small).toFixed(0)} ms empty, ${median(large).toFixed(0)} ms at 2000 items`,
    ).toBeGreaterThan(3 * median(small));
  });

  it('moto counts a message’s 12-hour visibility limit from its send, not its receive, and fails the whole batch call', async () => {
    // AWS: a message's visibility timeout starts when a receive returns it and may total at most
    // 12 hours from then (ChangeMessageVisibility: "15 seconds have elapsed since you received the
    // message"…; beyond the maximum time left the change is refused, in a batch as that entry's
    // failure). moto measures the 12 hours from the message's SentTimestamp, so the time it waited
    // in the queue counts, and raises InvalidParameterValue for the whole batch call.
    const sqs = sqsClient(inject('sqsEndpoint'));
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: unique() }));
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: 'waits 3 s before its receive' }));
    await new Promise((r) => setTimeout(r, 3_000));
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 1 }));
    const handle = Messages?.[0]?.ReceiptHandle as string;
    expect(handle).toBeDefined();
    // Received a moment ago: 43199 s is within 12 hours of the receive.
    const err = await sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl,
          Entries: [{ Id: '0', ReceiptHandle: handle, VisibilityTimeout: 43_199 }],
        }),
      )
      .then(
        () => undefined,
        (e: unknown) => e as { name?: string; message?: string },
      );
    expect(err?.name).toBe('InvalidParameterValue');
    expect(err?.message).toContain('beyond the limit [43200 seconds]');
    await sqs.send(new DeleteQueueCommand({ QueueUrl }));
  });

  it('moto returns a queue Policy re-serialized (with spaces), not the string that was set', async () => {
    const sqs = sqsClient(inject('sqsEndpoint'));
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: unique() }));
    const policy = JSON.stringify({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Deny', Principal: '*', Action: 'sqs:*', Resource: '*' }],
    });
    await sqs.send(new SetQueueAttributesCommand({ QueueUrl, Attributes: { Policy: policy } }));
    const got = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['Policy'] }));
    const returned = got.Attributes?.Policy ?? '';
    expect(JSON.parse(returned)).toEqual(JSON.parse(policy));
    expect(returned).not.toBe(policy);
    await sqs.send(new DeleteQueueCommand({ QueueUrl }));
  });

  it('moto allows a second PurgeQueue of a queue within 60 seconds', async () => {
    // AWS: one PurgeQueue per queue every 60 s; another fails with PurgeQueueInProgress.
    const sqs = sqsClient(inject('sqsEndpoint'));
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: unique() }));
    await sqs.send(new PurgeQueueCommand({ QueueUrl }));
    await expect(sqs.send(new PurgeQueueCommand({ QueueUrl }))).resolves.toBeDefined();
    await sqs.send(new DeleteQueueCommand({ QueueUrl }));
  });

  it('moto has no oldest-message-age path: that is the SQS stand-in’s own, CloudWatch’s stand-in', async () => {
    const res = await fetch(`${inject('sqsEndpoint')}${OLDEST_AGE_PATH}?queue=x`);
    expect(res.ok).toBe(false);
  });

  it('every known gap names a test of its file and a proof above', () => {
    const proofs = new Set(
      [...readFileSync(new URL(import.meta.url), 'utf8').matchAll(/^ {2}it\('([^']+)'/gm)].map((m) => m[1]),
    );
    for (const gap of loadMotoKnownGaps()) {
      expect(proofs, gap.test).toContain(gap.proof);
      const own = gap.test.split(' > ').at(-1) as string;
      const source = readFileSync(gap.file, 'utf8');
      // A title written as a template literal (`… ${n} …`) matches with any value in its place.
      const templates = [...source.matchAll(/it\(`([^`]+)`/g)].map(
        (m) =>
          new RegExp(
            `^${(m[1] as string)
              .split(/\$\{[^}]+\}/)
              .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
              .join('.+')}$`,
          ),
      );
      expect(source.includes(own) || templates.some((t) => t.test(own)), `${gap.file}: ${own}`).toBe(true);
    }
  });
});
