import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { Attachment, AttachmentStore } from '../../forms/queue-consumer/attachments.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK, gsi1 } = TABLE_KEYS;
export const attachmentKey = (uid: string) => ({ [PK]: `ATTACH#${uid}`, [SK]: '_' });
/** The dispatcher lists active attachments through this sparse index partition. */
export const ACTIVE_ATTACHMENTS = 'ATTACHMENTS';

export class DynamoAttachments implements AttachmentStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async activate(a: Attachment): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: marshall(
            {
              ...attachmentKey(a.consumerUid),
              ...a,
              specJson: JSON.stringify(a.spec),
              spec: undefined,
              [gsi1.pk]: ACTIVE_ATTACHMENTS,
              [gsi1.sk]: a.consumerUid,
            },
            { removeUndefinedValues: true },
          ),
          ConditionExpression: 'attribute_not_exists(#pk) OR generation <= :g',
          ExpressionAttributeNames: { '#pk': PK },
          ExpressionAttributeValues: marshall({ ':g': a.generation }),
        }),
      );
    } catch (err) {
      // A newer generation is already active: this older step has nothing left to do.
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  async get(consumerUid: string): Promise<Attachment | undefined> {
    const out = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: marshall(attachmentKey(consumerUid)),
        ConsistentRead: true,
      }),
    );
    if (!out.Item) return undefined;
    const v = unmarshall(out.Item);
    return {
      consumerUid: v.consumerUid,
      space: v.space,
      queueName: v.queueName,
      generation: v.generation,
      spec: JSON.parse(v.specJson),
      state: v.state,
    };
  }

  /** Active attachments (the sparse index holds only those). */
  async listActive(): Promise<{ consumerUid: string; generation: number; maxConcurrency: number }[]> {
    const out: { consumerUid: string; generation: number; maxConcurrency: number }[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: gsi1.name,
          KeyConditionExpression: '#pk = :pk',
          ExpressionAttributeNames: { '#pk': gsi1.pk },
          ExpressionAttributeValues: marshall({ ':pk': ACTIVE_ATTACHMENTS }),
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const v = unmarshall(item);
        out.push({
          consumerUid: v.consumerUid,
          generation: v.generation,
          maxConcurrency: JSON.parse(v.specJson).maxConcurrency,
        });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  async stop(consumerUid: string): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall(attachmentKey(consumerUid)),
          UpdateExpression: 'SET #state = :stopping REMOVE #gpk, #gsk',
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#state': 'state', '#pk': PK, '#gpk': gsi1.pk, '#gsk': gsi1.sk },
          ExpressionAttributeValues: marshall({ ':stopping': 'stopping' }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  async remove(consumerUid: string): Promise<void> {
    await this.client.send(
      new DeleteItemCommand({ TableName: this.table, Key: marshall(attachmentKey(consumerUid)) }),
    );
  }
}
