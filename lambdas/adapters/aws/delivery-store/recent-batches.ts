/**
 * A consumer's closed batches, newest first: its heads in gsi1 under one partition. Registration
 * writes the partition, the close the sort key (sparse: an open batch is not in the index), so
 * listing a batch costs no write of its own — only the index's copy of the closing write.
 */
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { BatchHead } from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../../shared/table-schema.ts';
import type { DeliveryTable } from './delivery-table.ts';
import { toHead } from './items.ts';

export const RECENT_INDEX = TABLE_KEYS.gsi1;

export const recentPartition = (consumerUid: string) => `RECENT#${consumerUid}`;

export async function recentlyClosed(
  t: DeliveryTable,
  consumerUid: string,
  limit: number,
  since: number,
): Promise<BatchHead[]> {
  const out = await t.client.send(
    new QueryCommand({
      TableName: t.table,
      IndexName: RECENT_INDEX.name,
      KeyConditionExpression: '#pk = :pk AND #sk >= :since',
      ExpressionAttributeNames: { '#pk': RECENT_INDEX.pk, '#sk': RECENT_INDEX.sk },
      ExpressionAttributeValues: marshall({
        ':pk': recentPartition(consumerUid),
        ':since': timeOrderedKey(since, ''),
      }),
      ScanIndexForward: false,
      Limit: limit,
    }),
  );
  return (out.Items ?? [])
    .map((item) => unmarshall(item))
    .filter((v) => v.closed === true)
    .map(toHead);
}
