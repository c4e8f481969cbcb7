/**
 * Settling an Operation under its lease: a retry makes it due again later; a terminal status
 * keeps it for the replay window and projects the outcome onto its Resource in one transaction.
 */
import { type TransactWriteItem, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { OperationRecord } from '../../../engine/model.ts';
import { TERMINAL } from '../../../engine/model.ts';
import type { Settlement } from '../../../engine/ports.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { claimRelease, referenceRelease } from './guard-items.ts';
import { cancellationCodes, type HostTable } from './host-table.ts';
import { dueKey, epochSeconds, keys, OBSERVABLE } from './items.ts';

const { gsi1, gsi2, ttl: TTL } = TABLE_KEYS;

export async function settleOperation(
  t: HostTable,
  replayWindowMs: number,
  op: OperationRecord,
  token: string,
  now: number,
  s: Settlement,
): Promise<boolean> {
  const nowIso = new Date(now).toISOString();
  const terminal = TERMINAL.has(s.status);
  const names: Record<string, string> = { '#status': 'status', '#error': 'error', '#gsk': gsi2.sk };
  const values: Record<string, unknown> = {
    ':t': token,
    ':status': s.status,
    ':effect': s.effect,
    ':now': nowIso,
  };
  const set = ['#status = :status', 'effect = :effect', 'updatedAt = :now'];
  const remove = ['leaseToken', 'leaseUntil'];
  if (s.error) {
    set.push('#error = :error');
    values[':error'] = s.error;
  } else {
    remove.push('#error');
  }
  const items: TransactWriteItem[] = [];
  if (terminal) {
    // Kept for another full replay window from the terminal time (host-api-v2 §9); the
    // replay mapping expires with the Operation.
    const retainUntil = new Date(Math.max(Date.parse(op.retainUntil), now + replayWindowMs)).toISOString();
    const expires = epochSeconds(retainUntil);
    set.push('retainUntil = :retain', '#ttl = :ttl');
    values[':retain'] = retainUntil;
    values[':ttl'] = expires;
    names['#ttl'] = TTL;
    names['#gpk'] = gsi2.pk;
    remove.push('#gpk', '#gsk');
    items.push({
      Update: {
        TableName: t.table,
        Key: marshall(keys.idempotency(op.principal, op.idempotencyKey)),
        UpdateExpression: 'SET #ttl = :ttl',
        ExpressionAttributeNames: { '#ttl': TTL },
        ExpressionAttributeValues: marshall({ ':ttl': expires }),
      },
    });
    items.push(...projectOntoResource(t.table, op, s, nowIso));
  } else {
    const next = s.nextAttemptAt ?? now;
    set.push('nextAttemptAt = :next', '#gsk = :due');
    values[':next'] = next;
    values[':due'] = dueKey(next, op.id);
  }
  items.unshift({
    Update: {
      TableName: t.table,
      Key: marshall(keys.operation(op.id)),
      UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
      ConditionExpression: 'leaseToken = :t',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: marshall(values, { removeUndefinedValues: true }),
    },
  });
  try {
    await t.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
    return true;
  } catch (err) {
    const codes = cancellationCodes(err);
    if (codes?.[0] === 'ConditionalCheckFailed') return false;
    throw err;
  }
}

/** The terminal transition as seen on the Resource, name reservation and references. */
function projectOntoResource(
  table: string,
  op: OperationRecord,
  s: Settlement,
  nowIso: string,
): TransactWriteItem[] {
  const succeeded = s.status === 'succeeded';
  const values: Record<string, unknown> = { ':op': op.id };
  const set: string[] = [];
  const remove = ['busyOperation'];
  if (succeeded && op.action === 'delete') {
    set.push('phase = :idle', 'deletedAt = :now');
    values[':idle'] = 'idle';
    values[':now'] = nowIso;
    remove.push('#gpk', '#gsk', '#opk', '#osk');
  } else {
    set.push('phase = :phase');
    values[':phase'] = succeeded ? 'idle' : 'error';
    // Resources made before the refresh existed join its index with their next Operation.
    set.push('#opk = :observable', '#osk = :uid');
    values[':observable'] = OBSERVABLE;
    values[':uid'] = op.resourceUid;
  }
  if (succeeded) {
    set.push('observedGeneration = :gen', 'observedAt = :now');
    values[':gen'] = op.generation;
    values[':now'] = nowIso;
  }
  if (s.observed) {
    set.push('observedJson = :observed');
    values[':observed'] = JSON.stringify(s.observed);
  }
  if (s.output) {
    set.push('outputJson = :output');
    values[':output'] = JSON.stringify(s.output);
  }
  const items: TransactWriteItem[] = [
    {
      Update: {
        TableName: table,
        Key: marshall(keys.resource(op.resourceUid)),
        UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
        ConditionExpression: 'busyOperation = :op',
        ExpressionAttributeNames: {
          ...(remove.includes('#gpk') ? { '#gpk': gsi1.pk, '#gsk': gsi1.sk } : {}),
          '#opk': gsi2.pk,
          '#osk': gsi2.sk,
        },
        ExpressionAttributeValues: marshall(values),
      },
    },
  ];
  if (succeeded && op.action === 'delete') {
    items.push({
      Delete: {
        TableName: table,
        Key: marshall(keys.name(op.space, op.name)),
        ConditionExpression: 'uid = :uid',
        ExpressionAttributeValues: marshall({ ':uid': op.resourceUid }),
      },
    });
  }
  if (succeeded) {
    for (const target of s.releasedReferences ?? [])
      items.push(...referenceRelease(table, op.resourceUid, target));
    // A deleted Resource gives up its claims (e.g. "the consumer of queue X"), so the role is free
    // again; only its own claim is removed, and a claim already gone is not an error.
    for (const key of s.releasedClaims ?? []) items.push(claimRelease(table, op.resourceUid, key));
  }
  return items;
}
