/**
 * The generation fence on a consumer's slot shards: which generations may still register a batch.
 *
 * A stop (QC-08) or an update must keep the replaced generation from starting batches, even from
 * slots it took before. Checking the attachment item in every registration's transaction did
 * that, but made that one item part of every registration of the consumer: DynamoDB cancels a
 * transaction whose item is in another one in flight, so all lanes of a consumer serialised on
 * it. The fence lives on the shard items instead, which a registration writes anyway: a stop or
 * an update writes `closedBelow` into every shard the replaced generation may use (at most one
 * write per ten slots, once per control-plane change), and a registration's mark of its own
 * slot is admitted only for a generation at or above it.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { conditionalUpdate } from './dynamodb-conditional-update.ts';
import {
  groupCount,
  queryGroups,
  type SlotLayout,
  shardOfSortKey,
  slotShardKey,
  upTo,
} from './slot-groups.ts';
import { shardCount } from './slot-shards.ts';

const { sk: SK } = TABLE_KEYS;

const ADMITS = '(attribute_not_exists(#fence) OR #fence <= :g)';

/**
 * The write that marks a slot as holding a registered batch, with the batch's deadline (an
 * UpdateItem's input, less table and key: the slot's shard item), admitted only while the slot
 * is held and for a generation the fence allows.
 */
export function registerUpdate(batchId: string, generation: number, deadline: number) {
  return {
    UpdateExpression: 'SET registered.#b = :true, slots.#b = :deadline',
    // The stop boundary (QC-08): a slot revoked, or fenced off, before this point never holds a
    // batch.
    ConditionExpression: `attribute_exists(slots.#b) AND ${ADMITS}`,
    ExpressionAttributeNames: { '#b': batchId, '#fence': 'closedBelow' },
    ExpressionAttributeValues: marshall({ ':true': true, ':deadline': deadline, ':g': generation }),
  };
}

/** A transaction's removal of a registered slot (a registration taken back before any handler ran). */
export function unregisterAction(table: string, key: Record<string, string>, batchId: string) {
  return {
    Update: {
      TableName: table,
      Key: marshall(key),
      UpdateExpression: 'REMOVE slots.#b, registered.#b',
      ConditionExpression: 'attribute_exists(registered.#b)',
      ExpressionAttributeNames: { '#b': batchId },
    },
  };
}

/** Fence writes in flight at once: a stop of a consumer at maxConcurrency 250 writes 250 items. */
const FENCE_WRITES_AT_ONCE = 25;

/**
 * Raises the fence of every shard the consumer has, and of every shard a generation bounded by
 * `maxConcurrency` may create, to `closedBelow` (never lowers it). A missing shard is created
 * with empty maps, so a take that creates it later keeps the fence. Idempotent: a repeated or
 * resumed stop or update writes the same.
 */
export async function fenceSlotShards(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  closedBelow: number,
  maxConcurrency: number,
  layout: SlotLayout,
): Promise<number> {
  const bound = shardCount(maxConcurrency, layout.perShard);
  const shards = new Set(upTo(bound));
  for (const shard of await existingShards(client, table, consumerUid, bound, layout)) shards.add(shard);
  const pending = [...shards];
  const fenceOne = (shard: number) =>
    conditionalUpdate(client, table, slotShardKey(consumerUid, shard, layout), {
      UpdateExpression:
        'SET slots = if_not_exists(slots, :empty), registered = if_not_exists(registered, :empty), #fence = :c',
      ConditionExpression: 'attribute_not_exists(#fence) OR #fence < :c',
      ExpressionAttributeNames: { '#fence': 'closedBelow' },
      ExpressionAttributeValues: marshall({ ':empty': {}, ':c': closedBelow }),
    });
  const worker = async () => {
    for (let shard = pending.pop(); shard !== undefined; shard = pending.pop()) await fenceOne(shard);
  };
  await Promise.all(upTo(Math.min(FENCE_WRITES_AT_ONCE, pending.length)).map(worker));
  return shards.size;
}

/** The shards that exist: the groups `bound` shards span, and any further ones shard 0 counts. */
async function existingShards(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  bound: number,
  layout: SlotLayout,
): Promise<number[]> {
  const asked = groupCount(bound, layout);
  const items = await queryGroups(client, table, consumerUid, upTo(asked), [SK, 'shards']);
  const used = Number(items.find((item) => item[SK] === '_')?.shards ?? 1);
  const needed = groupCount(used, layout);
  if (needed > asked)
    items.push(...(await queryGroups(client, table, consumerUid, upTo(needed).slice(asked), [SK])));
  return items.map((item) => shardOfSortKey(item[SK]));
}
