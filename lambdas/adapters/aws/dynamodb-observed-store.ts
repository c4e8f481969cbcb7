import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { JsonObject } from '../../engine/model.ts';
import type { ObservedStore } from '../../engine/resource-observer.ts';
import { TABLE_KEYS } from '../../shared/table-schema.ts';
import { keys, OBSERVABLE, toResource } from './dynamodb-host-store.ts';

const { pk: PK, gsi2 } = TABLE_KEYS;

/**
 * The background refresh's view of the table: live Resources through their `OBSERVE` entry in
 * gsi2 (set while a Resource is not deleted), and a conditional write of `observed` alone.
 */
export class DynamoObservedStore implements ObservedStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.client = client;
    this.table = tableName;
  }

  async listObservable(after: string | undefined, limit: number) {
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: gsi2.name,
        KeyConditionExpression: after === undefined ? '#pk = :p' : '#pk = :p AND #sk > :after',
        ExpressionAttributeNames: { '#pk': gsi2.pk, ...(after === undefined ? {} : { '#sk': gsi2.sk }) },
        ExpressionAttributeValues: marshall({
          ':p': OBSERVABLE,
          ...(after === undefined ? {} : { ':after': after }),
        }),
        Limit: limit,
      }),
    );
    const resources = (out.Items ?? []).map(toResource);
    const last = resources.at(-1);
    return out.LastEvaluatedKey && last ? { resources, next: last.uid } : { resources };
  }

  async refreshObserved(uid: string, generation: number, observed: JsonObject, at: string) {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall(keys.resource(uid)),
          UpdateExpression: 'SET observedJson = :observed, observedAt = :at',
          // Never over an Operation: one accepted since the read moved the generation or is busy.
          ConditionExpression:
            'attribute_exists(#pk) AND generation = :g AND observedGeneration = :g AND ' +
            'attribute_not_exists(busyOperation) AND attribute_not_exists(deletedAt)',
          ExpressionAttributeNames: { '#pk': PK },
          ExpressionAttributeValues: marshall({
            ':observed': JSON.stringify(observed),
            ':at': at,
            ':g': generation,
          }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }
}
