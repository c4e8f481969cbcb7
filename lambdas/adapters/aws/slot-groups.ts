/**
 * Where a consumer's slot shards live in the table (`slot-shards.ts` says what a shard holds).
 *
 * One slot per shard item by default: a registration's transaction names its lane's shard item,
 * and DynamoDB cancels a transaction (or refuses a plain write) whose item is in another
 * transaction in flight, so lanes that shared an item stalled each other at every batch. Alone in
 * its item, a slot is written by its own lane only, one request after another.
 *
 * The shards are kept in groups of `perGroup`, each group under its own partition key
 * (`DISPATCH#<consumer>` for the first, `DISPATCH#<consumer>#<n>` after it): a partition key
 * serves at most 1,000 write and 3,000 read units a second, which one consumer's lanes at
 * maxConcurrency 250 would pass if they shared one. Every registration of a consumer with more
 * than one slot reads all of its slots (the due slots it must recover first); a Query of a group
 * costs the bytes it returns (25 small items: one read unit), where a BatchGetItem of the same
 * items would cost a unit per item.
 *
 * Groups of 25 keep every shard of the earlier layout (at most 25 shards of 10 slots) in the
 * first group, under the key it always had.
 */
import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

export const SLOT_PREFIX = 'DISPATCH#';

/** Slots per shard item by default, and the most a shard may hold (10 keeps an item under 1 KB). */
export const SLOTS_PER_SHARD = 1;
export const MAX_SLOTS_PER_SHARD = 10;
/** Shards per partition key by default. */
export const SHARDS_PER_GROUP = 25;

/** How a slot map spreads its slots; every process of a Host must use the same. */
export interface SlotLayout {
  perShard: number;
  perGroup: number;
}

export const DEFAULT_SLOT_LAYOUT: SlotLayout = { perShard: SLOTS_PER_SHARD, perGroup: SHARDS_PER_GROUP };

export function slotLayout(opts: Partial<SlotLayout> = {}): SlotLayout {
  const layout = { ...DEFAULT_SLOT_LAYOUT, ...opts };
  if (!Number.isInteger(layout.perShard) || layout.perShard < 1 || layout.perShard > MAX_SLOTS_PER_SHARD) {
    throw new Error(`slots per shard must be 1..${MAX_SLOTS_PER_SHARD}`);
  }
  // The earlier layout's 25 shards must stay in the first group (see above).
  if (!Number.isInteger(layout.perGroup) || layout.perGroup < 1 || layout.perGroup > 1_000) {
    throw new Error('shards per group must be 1..1000');
  }
  return layout;
}

export const groupOf = (shard: number, layout: SlotLayout) => Math.floor(shard / layout.perGroup);

/** How many groups hold `shards` shards. */
export const groupCount = (shards: number, layout: SlotLayout) =>
  Math.max(1, Math.ceil(shards / layout.perGroup));

const groupPk = (consumerUid: string, group: number) =>
  group === 0 ? `${SLOT_PREFIX}${consumerUid}` : `${SLOT_PREFIX}${consumerUid}#${group}`;

export const slotShardKey = (consumerUid: string, shard: number, layout: SlotLayout) => ({
  [PK]: groupPk(consumerUid, groupOf(shard, layout)),
  [SK]: shard === 0 ? '_' : `shard#${shard}`,
});

export const shardOfSortKey = (sk: unknown) => (sk === '_' ? 0 : Number(String(sk).slice('shard#'.length)));

/** The consumer whose slot map an item's partition key names. */
export const consumerOfSlotKey = (pk: string) => pk.slice(SLOT_PREFIX.length).split('#')[0] ?? '';

/**
 * Every shard item of `groups`, one consistent Query per group, all at once; `attributes`
 * narrows what comes back (the read costs the same).
 */
export async function queryGroups(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  groups: readonly number[],
  attributes?: readonly string[],
): Promise<Record<string, unknown>[]> {
  const projected = attributes?.map((name, i) => [`#a${i}`, name] as const) ?? [];
  const pages = await Promise.all(
    groups.map(async (group) => {
      const items: Record<string, unknown>[] = [];
      let start: Record<string, AttributeValue> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: '#pk = :pk',
            ExpressionAttributeNames: { '#pk': PK, ...Object.fromEntries(projected) },
            ExpressionAttributeValues: marshall({ ':pk': groupPk(consumerUid, group) }),
            ...(projected.length > 0 ? { ProjectionExpression: projected.map(([n]) => n).join(', ') } : {}),
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        for (const raw of page.Items ?? []) items.push(unmarshall(raw));
        start = page.LastEvaluatedKey;
      } while (start);
      return items;
    }),
  );
  return pages.flat();
}

/** `0 … count - 1`. */
export const upTo = (count: number) => Array.from({ length: count }, (_, i) => i);
