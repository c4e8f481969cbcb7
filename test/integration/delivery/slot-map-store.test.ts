/**
 * DL-02 in the DynamoDB store: taking and handing over slots counts the consumer's slot map with
 * `size(slots)`, also when that map does not exist (yet, or any more). DynamoDB evaluates size()
 * of a missing attribute as false; each condition says `attribute_exists(slots)` first, so every
 * emulator answers the same (moto fails the call otherwise: see moto-gaps.test.ts).
 */
import { randomUUID } from 'node:crypto';
import { DeleteItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { DEFAULT_SLOT_LAYOUT, slotShardKey } from '../../../lambdas/adapters/aws/slot-groups.ts';
import { shardOf } from '../../../lambdas/adapters/aws/slot-shards.ts';

describe('DL-02 slots in the DynamoDB store without a slot map', () => {
  let client: DynamoDBClient;
  let table: string;
  let store: DynamoDeliveryStore;
  const deadline = () => Date.now() + 60_000;

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
    store = new DynamoDeliveryStore(client, table);
  });

  it('DL-02 the first take creates the map; a hand-over keeps the count at the bound, a take beyond it is refused', async () => {
    const c = `c-${randomUUID()}`;
    // Only a wake count: the item exists, its slot map does not.
    await store.wake(c, Date.now());
    expect((await store.takeSlot(c, 'b1', deadline(), { max: 1, generation: 1 })).taken).toBe(true);
    expect(await store.slots(c)).toEqual({ b1: expect.any(Number) });
    expect((await store.takeSlot(c, 'b2', deadline(), { max: 1, generation: 1 })).taken).toBe(false);
    // One held of one: the hand-over frees b1 as it takes b2.
    const swapped = await store.swapSlot(c, 'b1', 'b2', deadline(), { max: 1, generation: 1 });
    expect(swapped.taken).toBe(true);
    expect(Object.keys(swapped.state.slots)).toEqual(['b2']);
    // b3's previous slot is not held: a take like any other, refused at the bound.
    expect((await store.swapSlot(c, 'b1', 'b3', deadline(), { max: 1, generation: 1 })).taken).toBe(false);
    expect(Object.keys(await store.slots(c))).toEqual(['b2']);
  });

  it('DL-02 a hand-over after the slot map was deleted is refused, not an error', async () => {
    const c = `c-${randomUUID()}`;
    const taken = await store.takeSlot(c, 'b1', deadline(), { max: 2, generation: 1 });
    expect(taken.taken).toBe(true);
    // The item the slot lives in (one slot per item: shard 0 or 1).
    const key = slotShardKey(c, shardOf(taken.batchId), DEFAULT_SLOT_LAYOUT);
    await client.send(new DeleteItemCommand({ TableName: table, Key: marshall(key) }));
    const out = await store.swapSlot(c, taken.batchId, 'b2', deadline(), { max: 2, generation: 1 });
    expect(out).toMatchObject({ taken: false, state: { slots: {} } });
    expect(await store.slots(c)).toEqual({});
  });
});
