/**
 * The Host table as every part of the Host store reaches it (a client and the table's name),
 * and the two DynamoDB answers they all read: an item by key, and a cancelled transaction's codes.
 */
import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';

export interface HostTable {
  client: DynamoDBClient;
  table: string;
}

/** A consistent read of one item, as stored. */
export async function consistentGet(
  t: HostTable,
  key: Record<string, string>,
): Promise<Record<string, AttributeValue> | undefined> {
  const out = await t.client.send(
    new GetItemCommand({ TableName: t.table, Key: marshall(key), ConsistentRead: true }),
  );
  return out.Item;
}

/** The code of each item of a cancelled transaction, in the transaction's order. */
export function cancellationCodes(err: unknown): string[] | undefined {
  if (err instanceof TransactionCanceledException) {
    return (err.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
  }
  return undefined;
}
