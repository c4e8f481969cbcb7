/**
 * A consumer's closed batches, newest first: its heads in gsi1. Registration writes the
 * partition, the close the sort key (sparse: an open batch is not in the index), so listing a
 * batch costs no write of its own — only the index's copy of the closing write.
 *
 * The partition is one of `RECENT_SHARDS` per consumer, chosen by the batch id: under one key,
 * every close (and every later write of a closed head, which the index copies) of a busy consumer
 * landed in one index partition, whose 1,000 write units a second a consumer of a few hundred
 * batches a second passes — and a throttled index throttles the table's writes with it. Listing
 * reads every shard (and the single partition of heads written before the shards) and merges:
 * an operator's read, rare beside the writes it spreads.
 */
import { createHash } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { BatchHead } from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../../shared/table-schema.ts';
import type { DeliveryTable } from './delivery-table.ts';
import { toHead } from './items.ts';

export const RECENT_INDEX = TABLE_KEYS.gsi1;

/** Index partitions per consumer for its closed batches. */
export const RECENT_SHARDS = 8;

/** The index partition of a batch's head: one of the consumer's shards, by the batch id. */
export const recentPartition = (consumerUid: string, batchId: string) =>
  `RECENT#${consumerUid}#${(createHash('sha256').update(batchId).digest()[0] as number) % RECENT_SHARDS}`;

/** Every partition a consumer's closed batches may be in: its shards, then the one used before them. */
export const recentPartitions = (consumerUid: string): string[] => [
  ...Array.from({ length: RECENT_SHARDS }, (_, i) => `RECENT#${consumerUid}#${i}`),
  `RECENT#${consumerUid}`,
];

export async function recentlyClosed(
  t: DeliveryTable,
  consumerUid: string,
  limit: number,
  since: number,
): Promise<BatchHead[]> {
  // The newest `limit` of all are among the newest `limit` of each partition.
  const pages = await Promise.all(
    recentPartitions(consumerUid).map(async (pk) => {
      const out = await t.client.send(
        new QueryCommand({
          TableName: t.table,
          IndexName: RECENT_INDEX.name,
          KeyConditionExpression: '#pk = :pk AND #sk >= :since',
          ExpressionAttributeNames: { '#pk': RECENT_INDEX.pk, '#sk': RECENT_INDEX.sk },
          ExpressionAttributeValues: marshall({ ':pk': pk, ':since': timeOrderedKey(since, '') }),
          ScanIndexForward: false,
          Limit: limit,
        }),
      );
      return (out.Items ?? []).map((item) => unmarshall(item));
    }),
  );
  return pages
    .flat()
    .filter((v) => v.closed === true)
    .sort((a, b) => String(b[RECENT_INDEX.sk]).localeCompare(String(a[RECENT_INDEX.sk])))
    .slice(0, limit)
    .map(toHead);
}
