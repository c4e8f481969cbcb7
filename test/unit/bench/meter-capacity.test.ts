/**
 * The bench prices DynamoDB by the units a call consumes. For a transaction DynamoDB Local reports
 * less than AWS bills (2 WRU per started KB of every item written or checked, a ConditionCheck
 * included): the meter prices transactions item by item from the sizes it has seen, so the
 * registration is not priced below AWS (the bench's cost figures).
 */
import {
  type AttributeValue,
  DynamoDBClient,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { itemSize, updateGrowth } from '../../../bench/support/item-size.ts';
import { Meter } from '../../../bench/support/meter.ts';

/**
 * A client that answers every command with what DynamoDB Local reports, without a server;
 * `attributes` is what an UpdateItem returns.
 */
function answering(units: number, attributes?: Record<string, AttributeValue>) {
  const client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
  client.middlewareStack.add(
    () => async () => ({
      output: {
        $metadata: {},
        ConsumedCapacity: [{ TableName: 't', CapacityUnits: units }],
        ...(attributes ? { Attributes: attributes } : {}),
      },
      response: {},
    }),
    { step: 'build', name: 'answerLocally' },
  );
  return client;
}

const key = (pk: string) => ({ pk: { S: pk }, sk: { S: '_' } });

describe('bench meter: request units as AWS bills them', () => {
  it('prices each item of a transaction, a ConditionCheck included, above what DynamoDB Local reports', async () => {
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
    // A single-item write is counted by its item's kind as well; a transaction's items are not.
    expect(byOp['DynamoDB:PutItem']?.wruByItem).toEqual({ RES: 4 });
    expect(byOp['DynamoDB:TransactWriteItems']?.wruByItem).toBeUndefined();
  });

  it('prices an update in a transaction by the size of the item it was last seen at, plus what it writes', async () => {
    // The slot map as a hand-over's ALL_NEW returned it: 1,000 bytes and more.
    const slots: Record<string, AttributeValue> = {};
    for (let i = 0; i < 17; i++)
      slots[`r01JDXXXXXXXXXXXXXXXXXXXXXX-g1-w${i}.abcdefghijkl`] = { N: '1764770000123' };
    const slotMap = { ...key('DISPATCH#c1'), slots: { M: slots }, registered: { M: {} } };
    const meter = new Meter();
    const client = meter.instrumentDynamoDb(answering(2, slotMap));
    await client.send(
      new UpdateItemCommand({
        TableName: 't',
        Key: key('DISPATCH#c1'),
        UpdateExpression: 'SET slots.#b = :d',
        ExpressionAttributeNames: { '#b': 'x' },
        ExpressionAttributeValues: { ':d': { N: '1' } },
        ReturnValues: 'ALL_NEW',
      }),
    );
    const size = itemSize(slotMap);
    const mark = {
      UpdateExpression: 'SET registered.#b = :true, slots.#b = :deadline',
      ConditionExpression: 'attribute_exists(slots.#b) AND size(slots) < :max',
      ExpressionAttributeNames: { '#b': 'r01JDXXXXXXXXXXXXXXXXXXXXXX-g1-w9.abcdefghijkl' },
      ExpressionAttributeValues: {
        ':true': { BOOL: true },
        ':deadline': { N: '1764770000999' },
        ':max': { N: '10' },
      },
    };
    // The registered mark takes the map past 1 KB: 4 WRU on AWS, where it was under it before.
    expect(size).toBeLessThan(1024);
    expect(size + updateGrowth(mark)).toBeGreaterThan(1024);
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: 't', Item: key('BATCH#b1') } },
          { Update: { TableName: 't', Key: key('DISPATCH#c1'), ...mark } },
          {
            ConditionCheck: {
              TableName: 't',
              Key: key('ATTACH#c1'),
              ConditionExpression: 'attribute_exists(pk)',
            },
          },
        ],
      }),
    );
    const tx = meter.snapshot().sdk.unattributed?.['DynamoDB:TransactWriteItems'];
    expect(tx?.wru).toBe(2 + 4 + 2);
  });

  it('counts only what SET and ADD write as growth, not REMOVE paths or condition operands', () => {
    const names = { '#b': 'b'.repeat(40), '#p': 'p'.repeat(40) };
    const values = { ':d': { N: '12' }, ':max': { N: '10' } };
    const growth = updateGrowth({
      UpdateExpression: 'REMOVE slots.#p SET slots.#b = :d',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
    // `slots` is not a placeholder; #b (40 bytes + 1 for its map entry) and :d (2 bytes).
    expect(growth).toBe(41 + 2);
  });

  it('sizes items as AWS does: names and values in UTF-8 bytes, numbers by significant digits', () => {
    expect(itemSize({ pk: { S: 'ab' } })).toBe(4);
    expect(itemSize({ n: { N: '1764770000000' } })).toBe(1 + 4); // 176477: 6 digits, 3 + 1 bytes
    expect(itemSize({ m: { M: { k: { BOOL: true } } } })).toBe(1 + 3 + 1 + 1 + 1);
    expect(itemSize({ b: { B: new Uint8Array(300) } })).toBe(301);
    expect(itemSize({ s: { S: 'é' } })).toBe(3);
  });
});
