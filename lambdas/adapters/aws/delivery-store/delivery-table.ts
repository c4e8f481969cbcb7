/**
 * The Host table as every part of the delivery store reaches it (a client and the table's
 * name), with the reads and the conditional write they share, and how a cancelled transaction
 * is read.
 */
import {
  BatchGetItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { backoff, conditionalUpdate, isTransactionConflict } from '../dynamodb-conditional-update.ts';

export interface DeliveryTable {
  client: DynamoDBClient;
  table: string;
}

/** An item as read back: schemaless, so callers read the fields they named. */
// biome-ignore lint/suspicious/noExplicitAny: see above
export type StoredItem = Record<string, any>;

/** BatchGetItem reads at most 100 keys per request. */
const BATCH_GET_MAX_KEYS = 100;

/** A consistent read of one item, unmarshalled. */
export async function getItem(
  t: DeliveryTable,
  key: Record<string, string>,
): Promise<StoredItem | undefined> {
  const out = await t.client.send(
    new GetItemCommand({ TableName: t.table, Key: marshall(key), ConsistentRead: true }),
  );
  return out.Item ? unmarshall(out.Item) : undefined;
}

/** One conditional UpdateItem on the Host table (`conditionalUpdate`). */
export function updateItem(
  t: DeliveryTable,
  key: Record<string, string>,
  input: Parameters<typeof conditionalUpdate>[3],
) {
  return conditionalUpdate(t.client, t.table, key, input);
}

/** Consistent reads of up to 100 keys a request; keys DynamoDB leaves unprocessed are asked again. */
export async function consistentBatchGet(
  t: DeliveryTable,
  keys: Record<string, string>[],
  what: string,
): Promise<StoredItem[]> {
  const items: StoredItem[] = [];
  for (let i = 0; i < keys.length; i += BATCH_GET_MAX_KEYS) {
    let ask = keys.slice(i, i + BATCH_GET_MAX_KEYS).map((k) => marshall(k));
    for (let round = 0; ask.length > 0 && round < 10; round++) {
      if (round > 0) await backoff(round); // unprocessed keys: DynamoDB asks to slow down
      const out = await t.client.send(
        new BatchGetItemCommand({ RequestItems: { [t.table]: { Keys: ask, ConsistentRead: true } } }),
      );
      for (const item of out.Responses?.[t.table] ?? []) items.push(unmarshall(item));
      ask = out.UnprocessedKeys?.[t.table]?.Keys ?? [];
    }
    if (ask.length > 0) throw new Error(`${what} could not all be read`);
  }
  return items;
}

export const cancellationCodes = (err: unknown) =>
  err instanceof TransactionCanceledException
    ? (err.CancellationReasons ?? []).map((r) => r.Code ?? 'None')
    : undefined;

/**
 * A cancelled transaction worth trying again: a conflict with another write of one of its items,
 * or a throttled item. The SDK retries neither (the cancellation is a client error).
 */
export const retryable = (err: unknown, codes = cancellationCodes(err)) =>
  isTransactionConflict(err) ||
  (codes ?? []).some(
    (c) => c === 'TransactionConflict' || c === 'ThrottlingError' || c === 'ProvisionedThroughputExceeded',
  );
