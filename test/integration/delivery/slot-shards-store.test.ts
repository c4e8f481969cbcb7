/**
 * DL-02 in the DynamoDB store when a consumer's slots are spread over shard items (few slots per
 * shard here, so a small maxConcurrency already needs several): takes, hand-overs and releases
 * find their shard from the batch id, the bound holds under concurrent takes and across a lowered
 * maxConcurrency, and every write names one small item whatever maxConcurrency is.
 */
import { randomUUID } from 'node:crypto';
import { type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { shardOf, takeOrder } from '../../../lambdas/adapters/aws/slot-shards.ts';

describe('DL-02 slots in shards (DynamoDB store)', () => {
  let client: DynamoDBClient;
  let table: string;
  const deadline = () => Date.now() + 60_000;
  /** The bound of a consumer's first generation. */
  const g1 = (max: number) => ({ max, generation: 1 });
  const storeWith = (slotsPerShard: number) => new DynamoDeliveryStore(client, table, { slotsPerShard });
  /** A store of its own process (nothing of the consumer seen yet) that names every request it sends. */
  function countedStore(slotsPerShard: number) {
    const counted = dynamoDbClient(inject('ddbEndpoint'));
    const calls: string[] = [];
    counted.middlewareStack.add(
      (next, context) => async (args) => {
        calls.push(String(context.commandName));
        return next(args);
      },
      { step: 'initialize', name: 'countCalls' },
    );
    return { store: new DynamoDeliveryStore(counted, table, { slotsPerShard }), calls };
  }

  /** The consumer's slot items as stored, by sort key. */
  async function items(consumerUid: string) {
    const out = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: marshall({ ':pk': `DISPATCH#${consumerUid}` }),
        ConsistentRead: true,
      }),
    );
    return Object.fromEntries((out.Items ?? []).map((i) => unmarshall(i)).map((i) => [i.sk, i]));
  }

  beforeAll(async () => {
    client = dynamoDbClient(inject('ddbEndpoint'));
    table = `t-${randomUUID()}`;
    await createHostTable(client, table);
  });

  it('DL-02 maxConcurrency 5 over shards of 2: five takes land in shards 0–2, a sixth is refused; shard 0 counts the shards', async () => {
    const store = storeWith(2);
    const c = `c-${randomUUID()}`;
    const held: string[] = [];
    for (let i = 0; i < 5; i++) {
      const out = await store.takeSlot(c, `b${i}x${randomUUID().slice(0, 8)}`, deadline(), g1(5));
      expect(out.taken).toBe(true);
      // The answer of a write to one shard shows that shard only (shard 0 alone is complete
      // while no other shard was used yet).
      if (shardOf(out.batchId) > 0) expect(out.state.partial).toBe(true);
      held.push(out.batchId);
    }
    expect((await store.takeSlot(c, `b-more`, deadline(), g1(5))).taken).toBe(false);
    const byShard = held.map(shardOf).sort();
    expect(byShard).toEqual([0, 0, 1, 1, 2]);
    const stored = await items(c);
    expect(Object.keys(stored).sort()).toEqual(['_', 'shard#1', 'shard#2']);
    expect(stored._?.shards).toBe(3);
    const state = await store.dispatchState(c);
    expect(Object.keys(state.slots).sort()).toEqual([...held].sort());
    expect(state.partial).toBeUndefined();
    // Releases find the shard from the id.
    for (const id of held) await store.releaseSlot(c, id);
    expect(await store.slots(c)).toEqual({});
  });

  it('DL-02 thirty concurrent takes for maxConcurrency 7 over shards of 3: exactly seven are taken', async () => {
    const store = storeWith(3);
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g1(7))),
    );
    const taken = outs.filter((o) => o.taken);
    expect(taken).toHaveLength(7);
    expect(Object.keys(await store.slots(c)).sort()).toEqual(taken.map((o) => o.batchId).sort());
  });

  it('DL-02 a hand-over stays in its shard; a lowered maxConcurrency refuses it where the shard has no room left and frees the slot', async () => {
    const store = storeWith(2);
    const c = `c-${randomUUID()}`;
    const held: string[] = [];
    for (let i = 0; i < 6; i++) {
      const out = await store.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g1(6));
      held.push(out.batchId);
    }
    const inShard2 = held.find((id) => shardOf(id) === 2) as string;
    const inShard0 = held.find((id) => shardOf(id) === 0) as string;
    // Same bound: the next batch of a lane takes its place in the same shard.
    const next = await store.swapSlot(c, inShard2, 'bNext', deadline(), g1(6));
    expect(next).toMatchObject({ taken: true, batchId: 'bNext.s2' });
    // maxConcurrency lowered to 4 (the next generation): shard 2 may hold none, shard 0 still two.
    const lowered = { max: 4, generation: 2 };
    const refused = await store.swapSlot(c, 'bNext.s2', 'bLater', deadline(), lowered);
    expect(refused.taken).toBe(false);
    const kept = await store.swapSlot(c, inShard0, 'bKept', deadline(), lowered);
    expect(kept).toMatchObject({ taken: true, batchId: 'bKept' });
    const slots = Object.keys(await store.slots(c));
    expect(slots).toHaveLength(5);
    expect(slots).not.toContain('bNext.s2');
    // Five held, over the new bound of four: no take succeeds until they drop below it.
    expect((await store.takeSlot(c, 'bNew', deadline(), lowered)).taken).toBe(false);
  });

  it('DL-02 lanes of two generations (maxConcurrency 4 and 6) taking at once hold at most six between them', async () => {
    const store = storeWith(2);
    const c = `c-${randomUUID()}`;
    const outs = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        store.takeSlot(
          c,
          `b${i}-${randomUUID()}`,
          deadline(),
          i % 2 === 0 ? { max: 4, generation: 1 } : { max: 6, generation: 2 },
        ),
      ),
    );
    expect(outs.filter((o) => o.taken).length).toBeLessThanOrEqual(6);
    expect(Object.keys(await store.slots(c)).length).toBeLessThanOrEqual(6);
  });

  it('a take near the bound tries one shard, reads them all once, then takes where there is room: three slot-map requests, not one per full shard', async () => {
    const c = `c-${randomUUID()}`;
    const writer = storeWith(2);
    // Nine of ten slots held over five shards; the free one is in whichever shard the ninth missed.
    for (let i = 0; i < 9; i++) await writer.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g1(10));
    // A process that has seen nothing of the consumer: its first try may meet a full shard,
    // then one read of them all, then the take (and once per process, the shard count); beside
    // them, one read of the wake count (an item of its own).
    const { store: fresh, calls } = countedStore(2);
    const out = await fresh.takeSlot(c, 'bLast', deadline(), g1(10));
    expect(out.taken).toBe(true);
    expect(calls.filter((n) => n === 'GetItemCommand')).toHaveLength(1);
    expect(calls.filter((n) => n !== 'GetItemCommand').length).toBeLessThanOrEqual(4);
    expect(calls.filter((n) => n === 'QueryCommand').length).toBeLessThanOrEqual(1);
    expect(Object.keys(await writer.slots(c))).toHaveLength(10);
    expect((await fresh.takeSlot(c, 'bOneMore', deadline(), g1(10))).taken).toBe(false);
    // Having just read every shard, it goes straight to the one with room: one request.
    await fresh.releaseSlot(c, out.batchId);
    await fresh.dispatchState(c);
    calls.length = 0;
    expect((await fresh.takeSlot(c, 'bAgain', deadline(), g1(10))).taken).toBe(true);
    expect(calls.sort()).toEqual(['GetItemCommand', 'UpdateItemCommand']);
  });

  it('DL-02 a cohort of lanes filling a new map: shards prepared once, then every take lands at its first try', async () => {
    const c = `c-${randomUUID()}`;
    const { store, calls } = countedStore(3);
    // maxConcurrency 8 over shards of 3 (capacities 3, 3, 2): the supervisor reads the map, then
    // prepares it for its cohort of 8 — the count raised once, three shards created.
    await store.dispatchState(c);
    calls.length = 0;
    await store.prepareSlots(c, g1(8), 8);
    expect(calls.filter((n) => n === 'UpdateItemCommand')).toHaveLength(4);
    expect(Object.keys(await items(c)).sort()).toEqual(['_', 'shard#1', 'shard#2']);
    expect((await items(c))._?.shards).toBe(3);
    calls.length = 0;
    const takes = await Promise.all(
      Array.from({ length: 8 }, (_, rank) =>
        store.takeSlot(c, `b${rank}-${randomUUID()}`, deadline(), g1(8), { rank }),
      ),
    );
    expect(takes.every((t) => t.taken)).toBe(true);
    // One write per lane (none refused, none creating a shard), and the wake count read beside it.
    expect(calls.filter((n) => n === 'UpdateItemCommand')).toHaveLength(8);
    expect(calls.filter((n) => n === 'GetItemCommand')).toHaveLength(8);
    expect(calls).toHaveLength(16);
    expect(takes.map((t) => shardOf(t.batchId)).sort()).toEqual([0, 0, 0, 1, 1, 1, 2, 2]);
    // The bound holds for a ninth lane of the cohort, and preparing again writes nothing.
    expect((await store.takeSlot(c, `b8-${randomUUID()}`, deadline(), g1(8), { rank: 8 })).taken).toBe(false);
    calls.length = 0;
    await store.prepareSlots(c, g1(8), 8);
    expect(calls).toEqual([]);
  });

  it('a registration reads every shard: those it knew of and those shard 0 says were used since', async () => {
    const writer = storeWith(1);
    const c = `c-${randomUUID()}`;
    // Slots in shards 0..3 (maxConcurrency 4 at one slot per shard).
    for (let i = 0; i < 4; i++) await writer.takeSlot(c, `b${i}-${randomUUID()}`, deadline(), g1(4));
    // Another process that has never seen the consumer, reading for maxConcurrency 2.
    const reader = storeWith(1);
    const read = await reader.registrationReads(`q-${randomUUID()}`, [], {
      consumerUid: c,
      maxConcurrency: 2,
    });
    expect(read.held).toBe(4);
    expect(Object.keys(read.slots ?? {}).sort()).toEqual(Object.keys(await writer.slots(c)).sort());
  });

  it('a recovery’s release is stamped; an idle release of a slot outside shard 0 reports shard 0’s wake count and the last wake’s time', async () => {
    const store = storeWith(1);
    const c = `c-${randomUUID()}`;
    const a = await store.takeSlot(c, `bA-${randomUUID()}`, deadline(), g1(3));
    const b = await store.takeSlot(c, `bB-${randomUUID()}`, deadline(), g1(3));
    const other = [a, b].find((o) => shardOf(o.batchId) > 0) as { batchId: string };
    const wakeAt = Date.now();
    await store.wake(c, wakeAt);
    expect(await store.releaseIdle(c, other.batchId)).toEqual({ wakes: 1, lastWakeAt: wakeAt });
    const first = [a, b].find((o) => shardOf(o.batchId) === 0);
    if (first) expect(await store.releaseIdle(c, first.batchId)).toEqual({ wakes: 1, lastWakeAt: wakeAt });
    const c2 = await store.takeSlot(c, `bC-${randomUUID()}`, deadline(), g1(3));
    await store.releaseSlot(c, c2.batchId, { recoveredAt: 12345 });
    const read = await store.registrationReads(`q-${randomUUID()}`, [], {
      consumerUid: c,
      maxConcurrency: 3,
    });
    expect(read.recoveredAt).toBe(12345);
  });

  it('DL-02 a lone lane takes first in a shard its generation adopted: one write, no refusal, no read of every shard', async () => {
    const { store, calls } = countedStore(1);
    const c = `c-${randomUUID()}`;
    const first = await store.takeSlot(c, `b-first-${randomUUID().slice(0, 8)}`, deadline(), g1(10));
    expect(first.taken).toBe(true);
    await store.releaseSlot(c, first.batchId);
    // A lane whose id would first guess another shard, one its generation has not adopted.
    let id = '';
    do id = `b-${randomUUID().slice(0, 12)}`;
    while (takeOrder(id, 10)[0] === shardOf(first.batchId));
    calls.length = 0;
    const next = await store.takeSlot(c, id, deadline(), g1(10));
    expect(next.taken).toBe(true);
    expect(shardOf(next.batchId)).toBe(shardOf(first.batchId));
    // The take itself, and the wake count read beside it.
    expect(calls.filter((name) => name !== 'GetItemCommand')).toEqual(['UpdateItemCommand']);
    // Held there, the next lane goes where its own id points, adopting that shard.
    const third = await store.takeSlot(c, id.replace('b-', 'b3-'), deadline(), g1(10));
    expect(third.taken).toBe(true);
    expect(shardOf(third.batchId)).not.toBe(shardOf(first.batchId));
  });
});
