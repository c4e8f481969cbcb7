import { type DynamoDBClient, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { RecentBatch, RecentBatchStore } from '../../operator/recent-batches.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK, ttl: TTL } = TABLE_KEYS;

/** A finished batch stays listed this long; DynamoDB's TTL then removes it at no write cost. */
const KEEP_SECONDS = 24 * 3600;

export const recentBatchKey = (consumerUid: string, endedAt: number, batchId: string) => ({
  [PK]: `RECENT#${consumerUid}`,
  // Sorts by time as a string: 15 digits of epoch ms, then the id for ties.
  [SK]: `${String(Math.max(0, Math.floor(endedAt))).padStart(15, '0')}#${batchId}`,
});

/**
 * Finished batches of a consumer: one small item per batch in the consumer's `RECENT#` partition,
 * read newest first with one Query. Its own item, not a field of the slot map (every lane writes
 * that item, and a larger item makes each of those writes dearer) nor of the batch head (an index
 * on it would be written again by each later update of the head).
 */
export class DynamoRecentBatches implements RecentBatchStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async record(consumerUid: string, batch: RecentBatch): Promise<void> {
    await this.client.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall({
          ...recentBatchKey(consumerUid, batch.endedAt, batch.batchId),
          batchJson: JSON.stringify(batch),
          [TTL]: Math.ceil(batch.endedAt / 1000) + KEEP_SECONDS,
        }),
      }),
    );
  }

  async recent(consumerUid: string, limit: number): Promise<RecentBatch[]> {
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': PK },
        ExpressionAttributeValues: marshall({ ':pk': `RECENT#${consumerUid}` }),
        ScanIndexForward: false,
        Limit: limit,
      }),
    );
    const now = Math.floor(Date.now() / 1000);
    return (out.Items ?? [])
      .map((item) => unmarshall(item))
      .filter((v) => typeof v[TTL] !== 'number' || v[TTL] > now)
      .map((v) => JSON.parse(v.batchJson) as RecentBatch);
  }
}
