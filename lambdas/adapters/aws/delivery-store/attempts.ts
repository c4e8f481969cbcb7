/**
 * A message's attempts record (how often it was delivered, when it may run again), each written
 * alone: the queue's time that says records may exist (`records-watermark.ts`) is raised before a
 * record that would outlive it, not counted with every record created or cleared.
 */
import { DeleteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttemptsRecord } from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import {
  backoff,
  CONFLICT_TRIES,
  conditionalUpdate,
  isConditionFailure,
} from '../dynamodb-conditional-update.ts';
import { consistentBatchGet, type DeliveryTable } from './delivery-table.ts';
import { deliveryKeys } from './items.ts';
import type { RecordsWatermark } from './records-watermark.ts';

const { pk: PK, ttl: TTL } = TABLE_KEYS;

export async function getAttempts(
  t: DeliveryTable,
  queueUid: string,
  ids: readonly string[],
): Promise<Map<string, AttemptsRecord>> {
  const found = new Map<string, AttemptsRecord>();
  const keys = [...new Set(ids)].map((id) => deliveryKeys.attempts(queueUid, id));
  for (const v of await consistentBatchGet(t, keys, 'attempts records')) {
    found.set(v.id, { id: v.id, attempts: v.attempts, notBefore: v.notBefore, acked: v.acked });
  }
  return found;
}

/**
 * Creates or replaces a message's record, never with fewer attempts than it holds: a record with
 * more was written by a later delivery, and this decision is stale (false, nothing written). An
 * acknowledgement still marks such a record (delete on sight), keeping its count.
 */
export async function putAttempts(
  t: DeliveryTable,
  watermark: RecordsWatermark,
  queueUid: string,
  r: AttemptsRecord,
  expiresAtSeconds: number,
): Promise<boolean> {
  const key = deliveryKeys.attempts(queueUid, r.id);
  const item = marshall({ ...key, ...r, [TTL]: expiresAtSeconds }, { removeUndefinedValues: true });
  const replace = () =>
    t.client.send(
      new PutItemCommand({
        TableName: t.table,
        Item: item,
        // Equal attempts pass: the same decision written again (a repeated finalisation, or the
        // SDK's retry of a write whose answer was lost).
        ConditionExpression: 'attribute_exists(#pk) AND (attribute_not_exists(#a) OR #a <= :a)',
        ExpressionAttributeNames: { '#pk': PK, '#a': 'attempts' },
        ExpressionAttributeValues: marshall({ ':a': r.attempts }),
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
  // Replace an existing record, else create it.
  await watermark.cover(queueUid, expiresAtSeconds);
  for (let round = 0; round < CONFLICT_TRIES; round++) {
    if (round > 0) await backoff(round);
    try {
      await replace();
      return true;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      const held = err.Item ? unmarshall(err.Item).attempts : undefined;
      if (typeof held === 'number' && held > r.attempts) {
        if (!r.acked) return false;
        const marked = await conditionalUpdate(t.client, t.table, key, {
          UpdateExpression: 'SET acked = :true',
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
          ExpressionAttributeValues: marshall({ ':true': true }),
        });
        if (marked.ok) return true;
      }
      // No record to replace (or it was cleared meanwhile): create it below.
    }
    try {
      await t.client.send(
        new PutItemCommand({
          TableName: t.table,
          Item: item,
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        }),
      );
      return true;
    } catch (err) {
      // Created meanwhile: replace it.
      if (!isConditionFailure(err)) throw err;
    }
  }
  throw new Error('attempts record kept changing; retry later');
}

export async function clearAttempts(t: DeliveryTable, queueUid: string, id: string): Promise<void> {
  try {
    await t.client.send(
      new DeleteItemCommand({
        TableName: t.table,
        Key: marshall(deliveryKeys.attempts(queueUid, id)),
        ConditionExpression: 'attribute_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err; // already cleared
  }
}
