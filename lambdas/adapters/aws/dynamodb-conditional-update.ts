/**
 * One conditional UpdateItem on the Host table, retried while it meets a transaction on its
 * item (the SDK does not retry those). A failed condition is an answer, not an error: it comes
 * back with the item as it was (when asked for), so callers can tell why.
 */
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';

export const isConditionFailure = (err: unknown) => err instanceof ConditionalCheckFailedException;
/** A write that raced a transaction on the same item. */
export const isTransactionConflict = (err: unknown) =>
  (err as Error)?.name === 'TransactionConflictException';
/** Tries for a write that keeps meeting transactions on its item. */
export const CONFLICT_TRIES = 6;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
export const backoff = (round: number) => sleep(5 * 2 ** round + Math.random() * 10);

export type UpdateAnswer =
  | { ok: true; item?: Record<string, unknown> }
  | { ok: false; old?: Record<string, unknown>; busy?: true };

/**
 * `busy`: a write that may as well go elsewhere (a take trying a shard it only guessed has room)
 * answers `busy` at the first transaction it meets on its item, rather than waiting it out.
 */
export async function conditionalUpdate(
  client: DynamoDBClient,
  table: string,
  key: Record<string, string>,
  input: Omit<UpdateItemCommandInput, 'TableName' | 'Key'>,
  opts: { busy?: boolean } = {},
): Promise<UpdateAnswer> {
  for (let round = 1; ; round++) {
    try {
      const out = await client.send(
        new UpdateItemCommand({ TableName: table, Key: marshall(key), ...input }),
      );
      return { ok: true, item: out.Attributes ? unmarshall(out.Attributes) : undefined };
    } catch (err) {
      if (isTransactionConflict(err) && opts.busy) return { ok: false, busy: true };
      if (isTransactionConflict(err) && round < CONFLICT_TRIES) {
        await backoff(round);
        continue;
      }
      if (!isConditionFailure(err)) throw err;
      return { ok: false, old: err.Item ? unmarshall(err.Item) : undefined };
    }
  }
}
