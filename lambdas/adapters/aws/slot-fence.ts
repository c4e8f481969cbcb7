/**
 * The generation fence on a consumer's slot shards: which generations may still register a batch.
 *
 * A stop (QC-08) or an update must keep the replaced generation from starting batches, even from
 * slots it took before. Checking the attachment item in every registration's transaction did
 * that, but made that one item part of every registration of the consumer: DynamoDB cancels a
 * transaction whose item is in another one in flight, so all lanes of a consumer serialised on
 * it. The fence lives on the shard items instead, which a registration writes anyway: a stop or
 * an update writes `closedBelow` into every shard the replaced generation may use (at most one
 * write per ten slots, once per control-plane change), and a registration's update of its own
 * shard is admitted only for a generation at or above it.
 */
import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { conditionalUpdate } from './dynamodb-conditional-update.ts';
import { slotShardKey } from './dynamodb-slot-map.ts';
import { shardCount } from './slot-shards.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

const ADMITS = '(attribute_not_exists(#fence) OR #fence <= :g)';

/** A transaction's write of a registered slot, admitted only for a generation the fence allows. */
export function registerAction(
  table: string,
  consumerUid: string,
  shard: number,
  batchId: string,
  generation: number,
  deadline: number,
) {
  return {
    Update: {
      TableName: table,
      Key: marshall(slotShardKey(consumerUid, shard)),
      UpdateExpression: 'SET registered.#b = :true, slots.#b = :deadline',
      // The stop boundary (QC-08): a slot revoked, or fenced off, before this point never holds a
      // batch.
      ConditionExpression: `attribute_exists(slots.#b) AND ${ADMITS}`,
      ExpressionAttributeNames: { '#b': batchId, '#fence': 'closedBelow' },
      ExpressionAttributeValues: marshall({ ':true': true, ':deadline': deadline, ':g': generation }),
    },
  };
}

/** A transaction's removal of a registered slot (a registration taken back before any handler ran). */
export function unregisterAction(table: string, consumerUid: string, shard: number, batchId: string) {
  return {
    Update: {
      TableName: table,
      Key: marshall(slotShardKey(consumerUid, shard)),
      UpdateExpression: 'REMOVE slots.#b, registered.#b',
      ConditionExpression: 'attribute_exists(registered.#b)',
      ExpressionAttributeNames: { '#b': batchId },
    },
  };
}

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
  perShard: number,
): Promise<number> {
  const shards = new Set(Array.from({ length: shardCount(maxConcurrency, perShard) }, (_, s) => s));
  for (const sk of await existingShardKeys(client, table, consumerUid)) {
    shards.add(sk === '_' ? 0 : Number(sk.slice('shard#'.length)));
  }
  await Promise.all(
    [...shards].map((shard) =>
      conditionalUpdate(client, table, slotShardKey(consumerUid, shard), {
        UpdateExpression:
          'SET slots = if_not_exists(slots, :empty), registered = if_not_exists(registered, :empty), #fence = :c',
        ConditionExpression: 'attribute_not_exists(#fence) OR #fence < :c',
        ExpressionAttributeNames: { '#fence': 'closedBelow' },
        ExpressionAttributeValues: marshall({ ':empty': {}, ':c': closedBelow }),
      }),
    ),
  );
  return shards.size;
}

async function existingShardKeys(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
): Promise<string[]> {
  const keys: string[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: '#pk = :pk',
        ProjectionExpression: '#sk',
        ExpressionAttributeNames: { '#pk': PK, '#sk': SK },
        ExpressionAttributeValues: marshall({ ':pk': slotShardKey(consumerUid)[PK] }),
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    for (const raw of page.Items ?? []) keys.push(String(unmarshall(raw)[SK]));
    start = page.LastEvaluatedKey;
  } while (start);
  return keys;
}
