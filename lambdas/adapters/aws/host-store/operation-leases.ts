/**
 * The executor's hold on Operations: which are due (gsi2, keyed by the time they are due), a
 * lease that claims one, the mark that a dispatch may have happened, and the release of leases.
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { OperationRecord, OperationStatus } from '../../../engine/model.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import type { HostTable } from './host-table.ts';
import { DUE, dueKey, keys, toOperation } from './items.ts';

const { gsi2 } = TABLE_KEYS;

/** A Query of the due index: Operations due by `now` (`<=`), or due later, i.e. leased (`>`). */
function dueIndex(table: string, compare: '<=' | '>', now: number) {
  return {
    TableName: table,
    IndexName: gsi2.name,
    KeyConditionExpression: `#pk = :due AND #sk ${compare} :now`,
    ExpressionAttributeNames: { '#pk': gsi2.pk, '#sk': gsi2.sk },
    ExpressionAttributeValues: marshall({ ':due': DUE, ':now': dueKey(now, '~') }),
  };
}

export async function dueOperations(
  t: HostTable,
  now: number,
  limit: number,
): Promise<{ id: string; status: OperationStatus }[]> {
  const out = await t.client.send(new QueryCommand({ ...dueIndex(t.table, '<=', now), Limit: limit }));
  return (out.Items ?? []).map((item) => {
    const v = unmarshall(item);
    return { id: v.id as string, status: v.status as OperationStatus };
  });
}

export async function releaseLeases(t: HostTable, now: number): Promise<number> {
  let released = 0;
  let start: Record<string, AttributeValue> | undefined;
  do {
    // A claimed Operation is due when its lease ends: the leased ones sort after `now`.
    const page = await t.client.send(
      new QueryCommand({ ...dueIndex(t.table, '>', now), ExclusiveStartKey: start }),
    );
    for (const item of page.Items ?? []) {
      const v = unmarshall(item);
      if (typeof v.leaseUntil !== 'number' || v.leaseUntil <= now || typeof v.leaseToken !== 'string')
        continue;
      try {
        await t.client.send(
          new UpdateItemCommand({
            TableName: t.table,
            Key: marshall(keys.operation(v.id)),
            UpdateExpression: 'SET leaseUntil = :now, #gsk = :dueNow',
            // Only the lease that was read: a claim or settlement meanwhile is left alone.
            ConditionExpression: 'attribute_exists(#gpk) AND leaseToken = :t AND leaseUntil = :until',
            ExpressionAttributeNames: { '#gpk': gsi2.pk, '#gsk': gsi2.sk },
            ExpressionAttributeValues: marshall({
              ':now': now,
              ':dueNow': dueKey(Math.max(now, Number(v.nextAttemptAt ?? now)), v.id),
              ':t': v.leaseToken,
              ':until': v.leaseUntil,
            }),
          }),
        );
        released++;
      } catch (err) {
        // A failed condition means the lease changed hands since the read: nothing to release.
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return released;
}

export async function claimOperation(
  t: HostTable,
  id: string,
  from: OperationStatus,
  token: string,
  now: number,
  leaseMs: number,
): Promise<OperationRecord | undefined> {
  const until = now + leaseMs;
  // A lease that runs out makes the Operation due again: its due key is the lease end.
  const set = [
    'leaseToken = :t',
    'leaseUntil = :until',
    '#gsk = :due',
    'attempts = if_not_exists(attempts, :zero) + :one',
  ];
  const values: Record<string, unknown> = {
    ':t': token,
    ':until': until,
    ':now': now,
    ':due': dueKey(until, id),
    ':zero': 0,
    ':one': 1,
    ':from': from,
  };
  if (from === 'queued') {
    set.push('#status = :running', 'updatedAt = :nowIso');
    values[':running'] = 'running';
    values[':nowIso'] = new Date(now).toISOString();
  }
  try {
    const out = await t.client.send(
      new UpdateItemCommand({
        TableName: t.table,
        Key: marshall(keys.operation(id)),
        UpdateExpression: `SET ${set.join(', ')}`,
        ConditionExpression:
          'attribute_exists(#gpk) AND #status = :from AND nextAttemptAt <= :now AND ' +
          '(attribute_not_exists(leaseUntil) OR leaseUntil <= :now)',
        ExpressionAttributeNames: { '#gpk': gsi2.pk, '#gsk': gsi2.sk, '#status': 'status' },
        ExpressionAttributeValues: marshall(values),
        ReturnValues: 'ALL_NEW',
      }),
    );
    return out.Attributes ? toOperation(out.Attributes) : undefined;
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) return undefined;
    throw err;
  }
}

export async function markDispatch(t: HostTable, id: string, token: string, now: number): Promise<boolean> {
  try {
    await t.client.send(
      new UpdateItemCommand({
        TableName: t.table,
        Key: marshall(keys.operation(id)),
        UpdateExpression:
          'SET dispatchPossible = :true, #status = :reconciling, effect = :unknown, updatedAt = :now',
        ConditionExpression: 'leaseToken = :t',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: marshall({
          ':true': true,
          ':reconciling': 'reconciling',
          ':unknown': 'unknown',
          ':now': new Date(now).toISOString(),
          ':t': token,
        }),
      }),
    );
    return true;
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) return false;
    throw err;
  }
}
