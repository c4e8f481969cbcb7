/**
 * The supervisor's items. `SUPERVISOR` / `_`: the lease that makes one round run at a time
 * (`leaseHolder`, `leaseUntil`) and where the last round stopped (`resumeAfter`), each write one
 * conditional UpdateItem of a small item. `SUPERVISOR` / `tagged`: the queues the supervisor has
 * tagged with their Space (`taggedQueues`), so that each is tagged once per Host rather than once
 * per cold start; apart, so the lease's two writes a minute stay one unit each however many
 * queues there are.
 */
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { RoundClaim, SupervisorLedger } from '../../delivery/supervision.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK } = TABLE_KEYS;
export const supervisorKey = () => ({ [PK]: 'SUPERVISOR', [SK]: '_' });
const taggedKey = () => ({ [PK]: 'SUPERVISOR', [SK]: 'tagged' });

export class DynamoSupervisorLedger implements SupervisorLedger {
  private readonly client: Pick<DynamoDBClient, 'send'>;
  private readonly table: string;

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

  /** The queues the supervisor has tagged already. */
  async taggedQueues(): Promise<Set<string>> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: marshall(taggedKey()),
        ProjectionExpression: 'taggedQueues',
      }),
    );
    const queues = out.Item ? unmarshall(out.Item).taggedQueues : undefined;
    return queues instanceof Set ? (queues as Set<string>) : new Set();
  }

  /** Records queues as tagged (a string set: adding is idempotent, concurrent adds merge). */
  async addTagged(queueUids: readonly string[]): Promise<void> {
    if (queueUids.length === 0) return;
    await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: marshall(taggedKey()),
        UpdateExpression: 'ADD taggedQueues :q',
        ExpressionAttributeValues: { ':q': { SS: [...new Set(queueUids)] } },
      }),
    );
  }
}
