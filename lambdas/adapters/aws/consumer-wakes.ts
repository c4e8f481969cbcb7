/**
 * A consumer's wakes: every send through the Host counts one (`WAKE#<consumer>`), and a lane that
 * found its queue empty ends only if none came after it took its slot (DL-01).
 *
 * The count lives on an item of its own, which no transaction names. On the slot map's first
 * shard, which every registration there writes in a transaction, a send's count was refused
 * (`TransactionConflict`) whenever a registration held the item, and each refused send was
 * retried against the next one: sends and registrations of one consumer contended for one item.
 * The order still closes the race between a send and a lane's idle end: a send counts its wake
 * before it reads the slots, and a lane releases its slot before it reads the count, so either
 * the send sees the slot gone (and starts a lane) or the lane sees the wake (and receives again).
 */
import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { conditionalUpdate } from './dynamodb-conditional-update.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

export const wakeKey = (consumerUid: string) => ({ [PK]: `WAKE#${consumerUid}`, [SK]: '_' });

/** The count of wakes so far, and when the last one was counted (the waker's clock). */
export interface Wakes {
  wakes: number;
  lastWakeAt?: number;
}

const wakesOf = (item: Record<string, unknown> | undefined): Wakes => ({
  wakes: typeof item?.wakes === 'number' ? item.wakes : 0,
  ...(typeof item?.lastWakeAt === 'number' ? { lastWakeAt: item.lastWakeAt } : {}),
});

/** Counts one wake; answers the count with it. */
export async function countWake(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  now: number,
): Promise<Wakes> {
  const out = await conditionalUpdate(client, table, wakeKey(consumerUid), {
    UpdateExpression: 'ADD wakes :one SET lastWakeAt = :now',
    ExpressionAttributeValues: marshall({ ':one': 1, ':now': now }),
    ReturnValues: 'ALL_NEW',
  });
  return wakesOf(out.ok ? out.item : undefined);
}

/** The count as it is now (a strongly consistent read: it must see every wake counted before). */
export async function readWakes(client: DynamoDBClient, table: string, consumerUid: string): Promise<Wakes> {
  const out = await client.send(
    new GetItemCommand({ TableName: table, Key: marshall(wakeKey(consumerUid)), ConsistentRead: true }),
  );
  return wakesOf(out.Item ? unmarshall(out.Item) : undefined);
}
