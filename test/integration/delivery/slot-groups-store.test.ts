/**
 * DL-02 and QC-08 in the DynamoDB store's default slot layout: one slot per item, items in groups
 * under their own partition keys (`slot-groups.ts`). The bound holds across groups, every read of
 * the slots sees every group, a stop fences every group, and a slot map written by the earlier
 * layout (ten slots per item, its generation in `gen`) counts against the bound until its slots end.
 */
import { randomUUID } from 'node:crypto';
import { type DynamoDBClient, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { shardOf, takeOrder } from '../../../lambdas/adapters/aws/slot-shards.ts';
import type { BatchHead, DispatchState } from '../../../lambdas/delivery/delivery-store.ts';

describe('DL-02 slot items in groups of partition keys (DynamoDB store)', () => {
  let client: DynamoDBClient;
  let table: string;
  const deadline = () => Date.now() + 60_000;
  const g = (max: number, generation = 1) => ({ max, generation });

  /** The sort keys stored under one partition key. */
  async function sortKeysUnder(pk: string): Promise<string[]> {
    const out = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: marshall({ ':pk': pk }),
        ConsistentRead: true,
      }),
    );
    return (out.Items ?? []).map((i) => String(unmarshall(i).sk)).sort();
  }

  const head = (batchId: string, consumerUid: string, generation: number): BatchHead => ({
    batchId,
    consumerUid,
    queueUid: 'q-1',
    generation,
    credentialHash: 'h',
    size: 1,
    closed: false,
    outcome: undefined,
    applied: false,
    settled: {},
    all: undefined,
    deadline: deadline(),
    invisibleUntil: deadline() + 30_000,
    doubtful: false,
    pendingDeadLetter: [],
  });
  const oneEntry = { entries: [{ id: 'm0', ts: 1, attempts: 1, hadRecord: false }], moves: [] };

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
  });

  it('DL-02 forty concurrent takes for maxConcurrency 30: thirty taken, one per item, 25 items under the consumer’s key and 5 under its second', async () => {
    const store = new DynamoDeliveryStore(client, table);
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 40 }, (_, i) => store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g(30))),
    );
    const taken = outs.filter((o) => o.taken);
    expect(taken).toHaveLength(30);
    expect(new Set(taken.map((o) => shardOf(o.batchId))).size).toBe(30);
    expect(await sortKeysUnder(`DISPATCH#${c}`)).toHaveLength(25);
    expect(await sortKeysUnder(`DISPATCH#${c}#1`)).toHaveLength(5);
    // Another process that has seen nothing of the consumer reads all thirty, as does a
    // registration's read.
    const fresh = new DynamoDeliveryStore(dynamoDbClient(inject('ddbEndpoint')), table);
    expect(Object.keys(await fresh.slots(c)).sort()).toEqual(taken.map((o) => o.batchId).sort());
    const read = await new DynamoDeliveryStore(client, table).registrationReads('q-x', [], {
      consumerUid: c,
      maxConcurrency: 2,
    });
    expect(read.held).toBe(30);
    expect(await fresh.consumersWithSlots()).toContain(c);
    expect((await fresh.consumersWithSlots()).filter((u) => u === c)).toHaveLength(1);
  });

  it('a send’s read of the slots stops at the first group that shows a lane receiving: one Query, not one per group', async () => {
    const store = new DynamoDeliveryStore(client, table);
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 60 }, (_, i) => store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g(60))),
    );
    const ids = outs.map((o) => o.batchId);
    expect(new Set(ids).size).toBe(60);
    const receivingIn = (group: number) => ids.find((id) => Math.floor(shardOf(id) / 25) === group) as string;
    // Every lane holds a batch but one in the first group, which is receiving.
    for (const id of ids) if (id !== receivingIn(0)) expect(await store.markRegistered(c, id)).toBe(true);
    const counted = dynamoDbClient(inject('ddbEndpoint'));
    const queries: string[] = [];
    counted.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'QueryCommand') queries.push(String(context.commandName));
        return next(args);
      },
      { step: 'initialize', name: 'countQueries' },
    );
    const reader = new DynamoDeliveryStore(counted, table);
    const receiving = (s: DispatchState) => Object.keys(s.slots).some((id) => !s.registered[id]);
    const early = await reader.dispatchState(c, receiving);
    expect(queries).toHaveLength(1);
    expect(early.partial).toBe(true);
    expect(receiving(early)).toBe(true);
    // Only a lane in the last group receives: every group is read, and the state is whole.
    expect(await store.markRegistered(c, receivingIn(0))).toBe(true);
    await store.releaseSlot(c, receivingIn(2));
    await store.takeSlot(c, `late-${randomUUID()}`, deadline(), g(60));
    queries.length = 0;
    const whole = await reader.dispatchState(c, receiving);
    expect(queries).toHaveLength(3);
    expect(whole.partial).toBeUndefined();
    expect(Object.keys(whole.slots)).toHaveLength(60);
    expect(receiving(whole)).toBe(true);
  });

  it('DL-02 a take whose guessed item is in another lane’s transaction reads every shard and takes elsewhere at once, not after waiting that item out', async () => {
    const store = new DynamoDeliveryStore(client, table);
    const c = `c-${randomUUID()}`;
    const held = await Promise.all(
      [0, 1].map((i) => store.takeSlot(c, `h${i}-${randomUUID()}`, deadline(), g(3))),
    );
    const heldShards = held.map((o) => shardOf(o.batchId));
    // A batch id whose first guess (its hash order; nothing seen yet) is a held shard other than
    // shard 0, whose item the take also writes to count a new shard.
    const guessed = heldShards.find((shard) => shard !== 0) as number;
    let id = '';
    do id = `n-${randomUUID()}`;
    while (takeOrder(id, 3)[0] !== guessed);
    const busyKey = `DISPATCH#${c}|shard#${guessed}`;
    const busyTries: number[] = [];
    const busy = dynamoDbClient(inject('ddbEndpoint'));
    // The held lane is registering: every write of its item meets its transaction.
    busy.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { Key?: Record<string, { S?: string }> };
        const key = `${input.Key?.pk?.S}|${input.Key?.sk?.S}`;
        if (context.commandName === 'UpdateItemCommand' && key === busyKey) {
          busyTries.push(1);
          throw Object.assign(new Error('Transaction is ongoing for the item'), {
            name: 'TransactionConflictException',
            $metadata: {},
          });
        }
        return next(args);
      },
      { step: 'initialize', name: 'busyItem' },
    );
    const out = await new DynamoDeliveryStore(busy, table).takeSlot(c, id, deadline(), g(3));
    expect(out.taken).toBe(true);
    expect(heldShards).not.toContain(shardOf(out.batchId));
    expect(busyTries).toHaveLength(1);
  });

  it('DL-02 one item per partition key: thirty concurrent takes for maxConcurrency 7 hold seven, over seven keys', async () => {
    const store = new DynamoDeliveryStore(client, table, { shardsPerGroup: 1 });
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g(7))),
    );
    const taken = outs.filter((o) => o.taken);
    expect(taken).toHaveLength(7);
    for (let group = 1; group < 7; group++)
      expect(await sortKeysUnder(`DISPATCH#${c}#${group}`)).toHaveLength(1);
    expect(Object.keys(await store.slots(c))).toHaveLength(7);
    for (const o of taken) await store.releaseSlot(c, o.batchId);
    expect(await store.slots(c)).toEqual({});
  });

  it('QC-08 a stop fences every group: a slot taken before it in the second group registers no batch', async () => {
    const store = new DynamoDeliveryStore(client, table, { shardsPerGroup: 2 });
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g(6))),
    );
    expect(outs.every((o) => o.taken)).toBe(true);
    const far = outs.find((o) => shardOf(o.batchId) >= 2) as { batchId: string };
    const near = outs.find((o) => shardOf(o.batchId) < 2) as { batchId: string };
    await store.fenceGenerations(c, 2, 6);
    expect(await store.createBatch(head(far.batchId, c, 1), oneEntry)).toBe(false);
    expect(await store.createBatch(head(near.batchId, c, 1), oneEntry)).toBe(false);
    // The generation at the fence still registers.
    const next = await store.takeSlot(c, `n-${randomUUID()}`, deadline(), g(8, 2));
    expect(next.taken).toBe(true);
  });

  it('DL-02 a slot map of the earlier layout (ten slots in one item) counts against the bound until its slots end; an adoption seals it against that layout’s takes', async () => {
    const store = new DynamoDeliveryStore(client, table);
    const c = `c-${randomUUID()}`;
    const earlier = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`old${i}`, deadline()]));
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: marshall({ pk: `DISPATCH#${c}`, sk: '_', slots: earlier, registered: {}, gen: 1, shards: 1 }),
      }),
    );
    // Ten of ten held by lanes of the earlier layout: nothing more is taken.
    expect((await store.takeSlot(c, `n-${randomUUID()}`, deadline(), g(10))).taken).toBe(false);
    // Those lanes end one by one; at most ten slots are held throughout.
    for (let i = 0; i < 9; i++) {
      await store.releaseSlot(c, `old${i}`);
      await store.takeSlot(c, `n${i}-${randomUUID()}`, deadline(), g(10));
      expect(Object.keys(await store.slots(c)).length).toBeLessThanOrEqual(10);
    }
    await store.releaseSlot(c, 'old9');
    // All of them ended: the bound fills up again, one slot per item.
    await Promise.all(
      Array.from({ length: 15 }, (_, i) => store.takeSlot(c, `m${i}-${randomUUID()}`, deadline(), g(10))),
    );
    const held = Object.keys(await store.slots(c));
    expect(held).toHaveLength(10);
    expect(new Set(held.map(shardOf)).size).toBe(10);
    // Every item a take adopted carries the earlier layout's generation at a value no
    // generation reaches: that layout's takes read it as a newer generation and take nothing.
    const items = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: marshall({ ':pk': `DISPATCH#${c}` }),
        ConsistentRead: true,
      }),
    );
    const adopted = (items.Items ?? []).map((i) => unmarshall(i)).filter((i) => i.adoptedBy === 1);
    expect(adopted.length).toBeGreaterThan(0);
    for (const item of adopted) expect(item.gen).toBe(Number.MAX_SAFE_INTEGER);
  });
});
