import {
  type AttributeValue,
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  type DynamoDBClient,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { CommitStore, OnlyCopies } from '../../delivery/ports.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK, ttl: TTL } = TABLE_KEYS;

/** One item per committed multi-message send, expired by DynamoDB TTL. */
export const commitKey = (commitId: string) => ({ [PK]: `COMMIT#${commitId}`, [SK]: '_' });

/** The commit id of a commit item's partition key; undefined for any other item. */
export const commitIdOf = (pk: unknown): string | undefined =>
  typeof pk === 'string' && pk.startsWith('COMMIT#') ? pk.slice('COMMIT#'.length) : undefined;

/** The attribute of a commit item naming the one copy of messages SQS may hold twice. */
export const ONLY_COPIES = 'onlyCopies';

/** The copies a commit item names (`OnlyCopies`), if it names any. */
export function onlyCopiesOf(item: Record<string, unknown>): OnlyCopies | undefined {
  const copies = item[ONLY_COPIES];
  if (typeof copies !== 'object' || copies === null) return undefined;
  return Object.fromEntries(Object.entries(copies).filter(([, queueId]) => typeof queueId === 'string'));
}

/** BatchGetItem reads at most 100 keys per request. */
const BATCH_GET_KEYS = 100;
/** Rounds for keys DynamoDB returns as unprocessed before the read counts as failed. */
const MAX_ROUNDS = 6;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Commit records of multi-message sends on the Host table (see `QueueProducer.sendBatch`). */
export class DynamoCommitStore implements CommitStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  /** Unconditional and idempotent: writing the same commit twice changes nothing that matters. */
  async putCommit(commitId: string, expiresAtSeconds: number, onlyCopies?: OnlyCopies): Promise<void> {
    await this.client.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall({
          ...commitKey(commitId),
          [TTL]: expiresAtSeconds,
          ...(onlyCopies ? { [ONLY_COPIES]: onlyCopies } : {}),
        }),
      }),
    );
  }

  /** Consistent reads, so a commit acknowledged to a producer is never reported missing. */
  async committed(commitIds: readonly string[], onlyCopies?: Map<string, OnlyCopies>): Promise<Set<string>> {
    const found = new Set<string>();
    const unique = [...new Set(commitIds)];
    for (let i = 0; i < unique.length; i += BATCH_GET_KEYS) {
      let keys: Record<string, AttributeValue>[] | undefined = unique
        .slice(i, i + BATCH_GET_KEYS)
        .map((id) => marshall(commitKey(id)));
      for (let round = 1; keys && keys.length > 0; round++) {
        if (round > MAX_ROUNDS) throw new Error('DynamoDB left commit reads unprocessed');
        if (round > 1) await sleep(20 * 2 ** (round - 2));
        const out: BatchGetItemCommandOutput = await this.client.send(
          new BatchGetItemCommand({
            RequestItems: {
              [this.table]: {
                Keys: keys,
                ConsistentRead: true,
                ProjectionExpression: '#pk, #only',
                ExpressionAttributeNames: { '#pk': PK, '#only': ONLY_COPIES },
              },
            },
          }),
        );
        for (const item of out.Responses?.[this.table] ?? []) {
          const v = unmarshall(item);
          const id = commitIdOf(v[PK]);
          if (id === undefined) continue;
          found.add(id);
          const copies = onlyCopiesOf(v);
          if (copies) onlyCopies?.set(id, copies);
        }
        keys = out.UnprocessedKeys?.[this.table]?.Keys;
      }
    }
    return found;
  }
}
