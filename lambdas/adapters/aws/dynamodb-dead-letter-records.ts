import { type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;

/**
 * The Host's own record of one message it moved to a dead-letter queue: where it came from and
 * why. Kept in the Host's table, never in the copy's body, so the batch object a dead-letter
 * consumer's handler sees stays exactly as the Form specifies.
 */
export interface DeadLetterRecord {
  /** The queue Resource the message ran out of retries on, and its name then. */
  sourceQueueUid: string;
  sourceQueueName: string;
  /** The message id it had there (the copy has a new id). */
  originalId: string;
  /** Deliveries counted there (1 + maxRetries). */
  attempts: number;
  /** How its last delivery ended: the batch outcome and this message's settlement, e.g. `threw`, `returned/retry`. */
  lastOutcome: string;
  /** When the copy was sent, epoch ms. */
  movedAt: number;
}

/**
 * `DLMOVE#<dead-letter queue uid>#<copy's message id>` / `_`, TTL = the dead-letter queue's
 * retention after the move (plus its delivery delay): the record lives as long as the copy can.
 * Written by the dead-letter move, read by the operator's peek.
 */
export const deadLetterRecordKey = (deadLetterQueueUid: string, messageId: string) => ({
  [PK]: `DLMOVE#${deadLetterQueueUid}#${messageId}`,
  [SK]: '_',
});

function recordOf(item: Record<string, unknown>): DeadLetterRecord | undefined {
  const { sourceQueueUid, sourceQueueName, originalId, attempts, lastOutcome, movedAt } = item;
  if (
    typeof sourceQueueUid !== 'string' ||
    typeof sourceQueueName !== 'string' ||
    typeof originalId !== 'string' ||
    typeof attempts !== 'number' ||
    typeof lastOutcome !== 'string' ||
    typeof movedAt !== 'number'
  ) {
    return undefined;
  }
  return { sourceQueueUid, sourceQueueName, originalId, attempts, lastOutcome, movedAt };
}

/** Reads dead-letter records; a peek asks for at most a few dozen at a time. */
export class DynamoDeadLetterRecords {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  /** The records of these copies in one dead-letter queue, by message id; absent ids have none. */
  async get(
    deadLetterQueueUid: string,
    messageIds: readonly string[],
  ): Promise<Map<string, DeadLetterRecord>> {
    const found = new Map<string, DeadLetterRecord>();
    await Promise.all(
      [...new Set(messageIds)].map(async (id) => {
        const out = await this.client.send(
          new GetItemCommand({
            TableName: this.table,
            Key: marshall(deadLetterRecordKey(deadLetterQueueUid, id)),
          }),
        );
        const record = out.Item ? recordOf(unmarshall(out.Item)) : undefined;
        if (record) found.set(id, record);
      }),
    );
    return found;
  }
}
