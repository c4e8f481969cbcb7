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
 *
 * The start lease of a lane a wake starts (`claimWakeStart`) is on this item too, for the same
 * reason: on the first shard a send to a busy consumer with a free slot met the registrations
 * there. The lane's first take ends it (`endWakeStart`), read beside the take's write.
 */
import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { conditionalUpdate } from './dynamodb-conditional-update.ts';
import { writeToken } from './write-token.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

export const wakeKey = (consumerUid: string) => ({ [PK]: `WAKE#${consumerUid}`, [SK]: '_' });

/**
 * The count of wakes so far, when the last one was counted (the waker's clock), and until when a
 * lane a wake started holds the start lease (it has not taken its slot yet).
 */
export interface Wakes {
  wakes: number;
  lastWakeAt?: number;
  starting?: number;
  /** The second the last lane for messages due later was claimed for (epoch s). */
  dueLaneAt?: number;
}

const wakesOf = (item: Record<string, unknown> | undefined): Wakes => ({
  wakes: typeof item?.wakes === 'number' ? item.wakes : 0,
  ...(typeof item?.lastWakeAt === 'number' ? { lastWakeAt: item.lastWakeAt } : {}),
  ...(typeof item?.starting === 'number' ? { starting: item.starting } : {}),
  ...(typeof item?.dueLaneAt === 'number' ? { dueLaneAt: item.dueLaneAt } : {}),
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

/**
 * One conditional write on the consumer's wake item that leaves a token in `tokenField`: a write
 * whose first try committed and whose answer was lost fails its condition on the SDK's retry, and
 * finds its own token there — the claim is its own (else it would hold, for nothing, what it took).
 */
async function claimWithToken(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  claim: { set: string; condition: string; values: Record<string, unknown>; tokenField: string },
): Promise<boolean> {
  const token = writeToken();
  const out = await conditionalUpdate(client, table, wakeKey(consumerUid), {
    UpdateExpression: `SET ${claim.set}, ${claim.tokenField} = :token`,
    ConditionExpression: claim.condition,
    ExpressionAttributeValues: marshall({ ...claim.values, ':token': token }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  });
  return out.ok || out.old?.[claim.tokenField] === token;
}

/** Takes the consumer's start lease until `now + leaseMs` unless a live one is held. */
export function claimWakeStart(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  now: number,
  leaseMs: number,
): Promise<boolean> {
  return claimWithToken(client, table, consumerUid, {
    set: 'starting = :until',
    condition: 'attribute_not_exists(starting) OR starting < :now',
    values: { ':until': now + leaseMs, ':now': now },
    tokenField: 'startToken',
  });
}

/**
 * Ends the start lease: a lane took its slot, and from then on its slot shows it receiving. Only
 * a lease that is still live is worth a write; one left in place lapses by itself.
 */
export async function endWakeStart(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
): Promise<void> {
  await conditionalUpdate(client, table, wakeKey(consumerUid), {
    UpdateExpression: 'REMOVE starting, startToken',
    ConditionExpression: 'attribute_exists(starting)',
  });
}

/**
 * Claims the start of a lane for messages due at `at` (epoch seconds) for every process of the
 * Host: refused while a lane is due to start within `coverSeconds` before `at` (it still polls when
 * these messages return). A token recognises a claim whose answer was lost.
 */
export function claimDueLane(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  at: number,
  coverSeconds: number,
): Promise<boolean> {
  return claimWithToken(client, table, consumerUid, {
    set: 'dueLaneAt = :at',
    condition: 'attribute_not_exists(dueLaneAt) OR dueLaneAt < :lo OR dueLaneAt > :at',
    values: { ':at': at, ':lo': at - Math.max(0, coverSeconds - 1) },
    tokenField: 'dueToken',
  });
}

/** Gives a due lane's claim back after its start failed, so the next ask starts one. */
export async function forgetDueLane(
  client: DynamoDBClient,
  table: string,
  consumerUid: string,
  at: number,
): Promise<void> {
  await conditionalUpdate(client, table, wakeKey(consumerUid), {
    UpdateExpression: 'REMOVE dueLaneAt, dueToken',
    ConditionExpression: 'dueLaneAt = :at',
    ExpressionAttributeValues: marshall({ ':at': at }),
  });
}
