/**
 * Whether a queue may hold attempts records is one time on `QSTATE#<queue>` (`recordsUntil`),
 * raised before a record that would outlive it and never lowered: a registration looks records
 * up only while it lies ahead, and it runs out by itself when every record could have expired
 * (an expired or purged record no longer keeps the queue paying lookups). A queue an earlier
 * Host counted records for keeps its count honoured until the time is set. Against DynamoDB
 * Local, through the store the Host uses.
 */
import { randomUUID } from 'node:crypto';
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { recordExpiry } from '../../../lambdas/delivery/limits.ts';
import { createDeliveryHost, type DeliveryHost, waitFor } from '../../support/delivery-harness.ts';

let d: DeliveryHost;
beforeAll(async () => {
  d = await createDeliveryHost();
});
afterAll(async () => d.close());

const state = async (queueUid: string) => {
  const out = await d.host.dynamodb.send(
    new GetItemCommand({
      TableName: d.host.tableName,
      Key: marshall({ pk: `QSTATE#${queueUid}`, sk: '_' }),
      ConsistentRead: true,
    }),
  );
  return out.Item ? unmarshall(out.Item) : undefined;
};

describe('DL-07 the queue’s records time', () => {
  it('DL-07 a record raises it before it is written (an hour to spare), a second record writes nothing, clearing lowers nothing', async () => {
    const store = new DynamoDeliveryStore(d.host.dynamodb, d.host.tableName);
    const q = `q-${randomUUID()}`;
    expect((await store.registrationReads(q, [])).outstanding).toBe(0);
    const expires = recordExpiry(Date.now());
    await store.putAttempts(q, { id: 'm1', attempts: 1 }, expires);
    expect((await state(q))?.recordsUntil).toBe(expires + 3_600);
    expect((await store.registrationReads(q, [])).outstanding).toBeGreaterThan(0);
    await store.putAttempts(q, { id: 'm2', attempts: 1 }, expires + 60);
    expect((await state(q))?.recordsUntil).toBe(expires + 3_600);
    await store.clearAttempts(q, 'm1');
    await store.clearAttempts(q, 'm2');
    // Records may still exist elsewhere (expired or purged ones are never cleared): the time
    // stands until it runs out.
    expect((await store.registrationReads(q, [])).outstanding).toBeGreaterThan(0);
    expect((await store.getAttempts(q, ['m1', 'm2'])).size).toBe(0);
  });

  it('DL-07 a time that has run out says no record can exist: nothing is looked up', async () => {
    const store = new DynamoDeliveryStore(d.host.dynamodb, d.host.tableName);
    const q = `q-${randomUUID()}`;
    await d.host.dynamodb.send(
      new PutItemCommand({
        TableName: d.host.tableName,
        Item: marshall({ pk: `QSTATE#${q}`, sk: '_', recordsUntil: Math.floor(Date.now() / 1000) - 1 }),
      }),
    );
    expect((await store.registrationReads(q, [])).outstanding).toBe(0);
  });

  it('DL-07 a count an earlier Host left is honoured, and a time covering its records is set', async () => {
    const store = new DynamoDeliveryStore(d.host.dynamodb, d.host.tableName);
    const q = `q-${randomUUID()}`;
    await d.host.dynamodb.send(
      new PutItemCommand({
        TableName: d.host.tableName,
        Item: marshall({ pk: `QSTATE#${q}`, sk: '_', outstanding: 2 }),
      }),
    );
    const before = recordExpiry(Date.now());
    expect((await store.registrationReads(q, [])).outstanding).toBeGreaterThan(0);
    const set = await waitFor(
      'the time set',
      async () => (await state(q))?.recordsUntil as number | undefined,
    );
    expect(set).toBeGreaterThanOrEqual(before);
    expect((await store.registrationReads(q, [])).outstanding).toBeGreaterThan(0);
  });
});
