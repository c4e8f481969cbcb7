/**
 * The bench prices DynamoDB by the units a call consumes. DynamoDB Local reports none for a
 * transaction's ConditionCheck, which AWS bills as a transactional write (2 WRU up to 1 KB): the
 * meter adds them, so the registration is not priced below AWS (issue 13's cost figures).
 */
import { DynamoDBClient, PutItemCommand, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { Meter } from '../../../bench/support/meter.ts';

/** A client that answers every command with what DynamoDB Local reports, without a server. */
function answering(units: number) {
  const client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
  client.middlewareStack.add(
    () => async () => ({
      output: { $metadata: {}, ConsumedCapacity: [{ TableName: 't', CapacityUnits: units }] },
      response: {},
    }),
    { step: 'build', name: 'answerLocally' },
  );
  return client;
}

const key = (pk: string) => ({ pk: { S: pk }, sk: { S: '_' } });

describe('bench meter: request units as AWS bills them', () => {
  it('adds 2 WRU per ConditionCheck of a transaction to what DynamoDB Local reports', async () => {
    const meter = new Meter();
    const client = meter.instrumentDynamoDb(answering(4));
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: 't', Item: key('BATCH#b1') } },
          {
            ConditionCheck: {
              TableName: 't',
              Key: key('ATTACH#c1'),
              ConditionExpression: 'attribute_exists(pk)',
            },
          },
          { Update: { TableName: 't', Key: key('DISPATCH#c1'), UpdateExpression: 'SET x = :x' } },
        ],
      }),
    );
    await client.send(new PutItemCommand({ TableName: 't', Item: key('RES#r1') }));
    const byOp = meter.snapshot().sdk.unattributed ?? {};
    expect(byOp['DynamoDB:TransactWriteItems']?.wru).toBe(6);
    expect(byOp['DynamoDB:PutItem']?.wru).toBe(4);
  });
});
