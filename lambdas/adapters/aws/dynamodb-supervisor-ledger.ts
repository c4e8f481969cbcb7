/**
 * The supervisor's one item, `SUPERVISOR` / `_`: the lease that makes one round run at a time
 * (`leaseHolder`, `leaseUntil`), where the last round stopped (`resumeAfter`), and the queues
 * the supervisor has tagged with their Space (`taggedQueues`), so that each is tagged once per
 * Host rather than once per cold start. Every write is one conditional UpdateItem.
 */
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { RoundClaim, SupervisorLedger } from '../../delivery/supervision.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;
export const supervisorKey = () => ({ [PK]: 'SUPERVISOR', [SK]: '_' });

export class DynamoSupervisorLedger implements SupervisorLedger {
  private readonly client: Pick<DynamoDBClient, 'send'>;
  private readonly table: string;
  /** The queues tagged already, as the last claim read them. */
  private tagged = new Set<string>();

  constructor(client: Pick<DynamoDBClient, 'send'>, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async claim(holder: string, now: number, until: number): Promise<RoundClaim | undefined> {
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall(supervisorKey()),
          UpdateExpression: 'SET leaseHolder = :h, leaseUntil = :u',
          ConditionExpression: 'attribute_not_exists(leaseUntil) OR leaseUntil <= :now OR leaseHolder = :h',
          ExpressionAttributeValues: marshall({ ':h': holder, ':u': until, ':now': now }),
          ReturnValues: 'ALL_NEW',
        }),
      );
      const item = out.Attributes ? unmarshall(out.Attributes) : {};
      this.tagged = item.taggedQueues instanceof Set ? (item.taggedQueues as Set<string>) : new Set();
      return typeof item.resumeAfter === 'string' ? { resumeAfter: item.resumeAfter } : {};
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  async release(holder: string, resumeAfter: string | undefined): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall(supervisorKey()),
          UpdateExpression:
            resumeAfter === undefined
              ? 'REMOVE leaseUntil, resumeAfter'
              : 'SET resumeAfter = :r REMOVE leaseUntil',
          ConditionExpression: 'leaseHolder = :h',
          ExpressionAttributeValues: marshall({
            ':h': holder,
            ...(resumeAfter ? { ':r': resumeAfter } : {}),
          }),
        }),
      );
    } catch (err) {
      // Another round took the lease after ours ran out: it records its own place.
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** Whether the supervisor has tagged `queueUid` already (as of the last claim). */
  isTagged(queueUid: string): boolean {
    return this.tagged.has(queueUid);
  }

  /** Records queues as tagged (a string set: adding is idempotent, concurrent adds merge). */
  async addTagged(queueUids: readonly string[]): Promise<void> {
    if (queueUids.length === 0) return;
    await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: marshall(supervisorKey()),
        UpdateExpression: 'ADD taggedQueues :q',
        ExpressionAttributeValues: { ':q': { SS: [...new Set(queueUids)] } },
      }),
    );
    for (const uid of queueUids) this.tagged.add(uid);
  }
}
