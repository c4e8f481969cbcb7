/**
 * Acceptance: one transaction writes the idempotency mapping, the Resource change, the new
 * Operation and every guard it needs, or nothing. A failed condition is mapped onto the answer
 * the engine gives (name taken, Resource busy, a conflicting reference, claim or version...).
 */
import {
  type TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { Claim, Reference } from '../../../engine/forms.ts';
import type { AcceptCreate, AcceptMutation, AcceptResult } from '../../../engine/ports.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { claimCreate, claimUpdate, idempotencyPut, referenceTake, versionBump } from './guard-items.ts';
import { cancellationCodes, type HostTable } from './host-table.ts';
import { keys, operationItem, resourceItem } from './items.ts';

const { pk: PK } = TABLE_KEYS;

type TransactOutcome =
  | { ok: true }
  | { ok: false; retry: true }
  | { ok: false; failed: number; err: TransactionCanceledException };

export async function acceptCreate(t: HostTable, input: AcceptCreate): Promise<AcceptResult> {
  const { resource: r, operation, idempotency, references, claims, versions } = input;
  const items: TransactWriteItem[] = [
    idempotencyPut(t.table, idempotency),
    {
      Put: {
        TableName: t.table,
        Item: marshall({ ...keys.name(r.space, r.name), uid: r.uid }),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    {
      Put: {
        TableName: t.table,
        Item: resourceItem(
          r,
          claims.map((c) => c.key),
        ),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    {
      Put: {
        TableName: t.table,
        Item: operationItem(operation),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    ...references.flatMap((ref) => referenceTake(t.table, r.uid, ref, r.principal, r.space)),
    ...claims.map((c) => claimCreate(t.table, r.uid, c)),
    ...versions.map((v) => versionBump(t.table, v)),
  ];
  const out = await transact(t, items);
  if (out.ok || 'retry' in out) return out.ok ? { ok: true } : { ok: false, reason: 'version_conflict' };
  if (out.failed === 0) return { ok: false, reason: 'idempotency_race' };
  if (out.failed === 1) return { ok: false, reason: 'name_conflict' };
  const guard = guardFailure(out.failed - 4, references, claims);
  if (guard) return guard;
  throw out.err;
}

/** An update or a delete: the Resource, at the generation the caller saw, takes the new Operation. */
export async function acceptMutation(
  t: HostTable,
  input: AcceptMutation,
  action: 'update' | 'delete',
): Promise<AcceptResult> {
  const { uid, principal, expectedGeneration, operation, idempotency } = input;
  const set = [
    'generation = generation + :one',
    'busyOperation = :op',
    'lastOperation = :op',
    'phase = :phase',
  ];
  const values: Record<string, unknown> = {
    ':one': 1,
    ':op': operation.id,
    ':phase': action === 'delete' ? 'deleting' : 'pending',
    ':p': principal,
    ':g': expectedGeneration,
  };
  if (input.spec) {
    set.push('specJson = :spec');
    values[':spec'] = JSON.stringify(input.spec);
  }
  let condition =
    'attribute_exists(#pk) AND principal = :p AND attribute_not_exists(deletedAt) AND ' +
    'attribute_not_exists(busyOperation) AND generation = :g';
  if (action === 'delete') {
    condition += ' AND (attribute_not_exists(inboundRefs) OR inboundRefs = :zero)';
    values[':zero'] = 0;
  }
  const items: TransactWriteItem[] = [
    idempotencyPut(t.table, idempotency),
    {
      Update: {
        TableName: t.table,
        Key: marshall(keys.resource(uid)),
        UpdateExpression: `SET ${set.join(', ')}`,
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#pk': PK },
        ExpressionAttributeValues: marshall(values),
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    },
    {
      Put: {
        TableName: t.table,
        Item: operationItem(operation),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    ...input.addedReferences.flatMap((ref) => referenceTake(t.table, uid, ref, principal, operation.space)),
    ...input.claims.map((c) => claimUpdate(t.table, uid, c)),
    ...input.versions.map((v) => versionBump(t.table, v)),
  ];
  const out = await transact(t, items);
  if (out.ok || 'retry' in out) return out.ok ? { ok: true } : { ok: false, reason: 'version_conflict' };
  if (out.failed === 0) return { ok: false, reason: 'idempotency_race' };
  if (out.failed === 1) return resourceRefusal(out.err, principal, expectedGeneration);
  const guard = guardFailure(out.failed - 3, input.addedReferences, input.claims);
  if (guard) return guard;
  throw out.err;
}

/** Why the Resource's own condition failed, read from the item as it was. */
function resourceRefusal(
  err: TransactionCanceledException,
  principal: string,
  expectedGeneration: number,
): AcceptResult {
  const reason = err.CancellationReasons?.[1];
  const old = reason?.Item ? unmarshall(reason.Item) : undefined;
  if (!old || old.principal !== principal) return { ok: false, reason: 'not_found' };
  if (old.deletedAt) return { ok: false, reason: 'gone' };
  if (old.busyOperation) return { ok: false, reason: 'resource_busy' };
  if (old.generation !== expectedGeneration) return { ok: false, reason: 'generation_conflict' };
  return {
    ok: false,
    reason: 'dependency_conflict',
    detail: 'the Resource is still referenced by another Resource',
  };
}

/**
 * Runs an acceptance transaction. A cancellation names the first item whose condition failed;
 * one cancelled only by a concurrent transaction (real DynamoDB) asks for a fresh check.
 */
async function transact(t: HostTable, items: TransactWriteItem[]): Promise<TransactOutcome> {
  try {
    await t.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
    return { ok: true };
  } catch (err) {
    const codes = cancellationCodes(err);
    if (!codes) throw err;
    const failed = codes.indexOf('ConditionalCheckFailed');
    if (failed === -1 && codes.includes('TransactionConflict')) return { ok: false, retry: true };
    if (
      failed === -1 &&
      codes.some((c) => c === 'ThrottlingError' || c === 'ProvisionedThroughputExceeded')
    ) {
      // Throttled, nothing written: a transient store failure (503), not a Host error (500).
      throw Object.assign(new Error('the Host table throttled the transaction'), {
        name: 'ThrottlingException',
      });
    }
    if (failed === -1) throw err;
    return { ok: false, failed, err: err as TransactionCanceledException };
  }
}

/** Maps a failed index past the fixed items onto references (2 items each), claims, versions. */
function guardFailure(
  index: number,
  refs: readonly Reference[],
  claims: readonly Claim[],
): AcceptResult | undefined {
  if (index < 0) return undefined;
  if (index < refs.length * 2) {
    const ref = refs[Math.floor(index / 2)];
    return {
      ok: false,
      reason: 'dependency_conflict',
      detail: `${ref?.role} does not name a live Resource of the required Form in this Space`,
    };
  }
  const claim = claims[index - refs.length * 2];
  if (claim) return { ok: false, reason: 'claim_conflict', key: claim.key };
  return { ok: false, reason: 'version_conflict' };
}
