/** The records of messages moved to a dead-letter queue, written in batches of 25. */
import { type AttributeValue, BatchWriteItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DeadLetterRecord } from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { backoff, CONFLICT_TRIES } from '../dynamodb-conditional-update.ts';
import { deadLetterRecordKey } from '../dynamodb-dead-letter-records.ts';
import type { DeliveryTable } from './delivery-table.ts';

const { ttl: TTL } = TABLE_KEYS;

/** BatchWriteItem writes at most 25 items per request. */
const BATCH_WRITE_MAX_ITEMS = 25;

export async function putDeadLetterRecords(
  t: DeliveryTable,
  deadLetterQueueUid: string,
  records: { copyId: string; record: DeadLetterRecord }[],
  expiresAtSeconds: number,
): Promise<void> {
  for (let i = 0; i < records.length; i += BATCH_WRITE_MAX_ITEMS) {
    let requests: { PutRequest: { Item: Record<string, AttributeValue> } }[] = records
      .slice(i, i + BATCH_WRITE_MAX_ITEMS)
      .map(({ copyId, record }) => ({
        PutRequest: {
          Item: marshall({
            ...deadLetterRecordKey(deadLetterQueueUid, copyId),
            ...record,
            [TTL]: expiresAtSeconds,
          }),
        },
      }));
    // What DynamoDB leaves unprocessed (throttling) is sent again, a bounded number of times.
    for (let round = 1; requests.length > 0; round++) {
      const out = await t.client.send(new BatchWriteItemCommand({ RequestItems: { [t.table]: requests } }));
      requests = (out.UnprocessedItems?.[t.table] ?? []) as typeof requests;
      if (requests.length > 0 && round >= CONFLICT_TRIES)
        throw new Error(`${requests.length} dead-letter records left unprocessed`);
      if (requests.length > 0) await backoff(round);
    }
  }
}
