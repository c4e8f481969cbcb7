/**
 * Transaction items that keep guarantees across records, shared by acceptance and settlement:
 * the idempotency mapping, references between Resources, claims, and version guards.
 */
import type { TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Claim, Reference, VersionGuard } from '../../../engine/forms.ts';
import type { IdempotencyRecord } from '../../../engine/ports.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { keys } from './items.ts';

const { pk: PK, ttl: TTL } = TABLE_KEYS;

/** A mapping past its retention may linger until TTL removes it; it no longer holds the key. */
export function idempotencyPut(table: string, idem: IdempotencyRecord): TransactWriteItem {
  return {
    Put: {
      TableName: table,
      Item: marshall({ ...keys.idempotency(idem.principal, idem.key), ...idem }),
      ConditionExpression: 'attribute_not_exists(#pk) OR #ttl < :nowSeconds',
      ExpressionAttributeNames: { '#pk': PK, '#ttl': TTL },
      ExpressionAttributeValues: marshall({ ':nowSeconds': Math.floor(Date.now() / 1000) }),
    },
  };
}

/**
 * Takes a reference on a live target (same principal and Space, exact Form, not deleting):
 * an edge item under the source and a count on the target, which a delete must find at zero.
 */
export function referenceTake(
  table: string,
  source: string,
  ref: Reference,
  principal: string,
  space: string,
): TransactWriteItem[] {
  return [
    {
      Update: {
        TableName: table,
        Key: marshall(keys.resource(ref.resourceUid)),
        UpdateExpression: 'ADD inboundRefs :one',
        ConditionExpression:
          'attribute_exists(#pk) AND principal = :p AND #space = :s AND #form = :f AND ' +
          'attribute_not_exists(deletedAt) AND phase <> :deleting',
        ExpressionAttributeNames: { '#pk': PK, '#space': 'space', '#form': 'form' },
        ExpressionAttributeValues: marshall({
          ':one': 1,
          ':p': principal,
          ':s': space,
          ':f': ref.form,
          ':deleting': 'deleting',
        }),
      },
    },
    {
      Put: {
        TableName: table,
        Item: marshall({ ...keys.edge(source, ref.resourceUid), target: ref.resourceUid, role: ref.role }),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
  ];
}

export function referenceRelease(table: string, source: string, target: string): TransactWriteItem[] {
  return [
    {
      Delete: {
        TableName: table,
        Key: marshall(keys.edge(source, target)),
        ConditionExpression: 'attribute_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    {
      Update: {
        TableName: table,
        Key: marshall(keys.resource(target)),
        UpdateExpression: 'ADD inboundRefs :minus',
        ConditionExpression: 'attribute_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
        ExpressionAttributeValues: marshall({ ':minus': -1 }),
      },
    },
  ];
}

export function claimCreate(table: string, owner: string, claim: Claim): TransactWriteItem {
  return {
    Put: {
      TableName: table,
      Item: marshall({ ...keys.claim(claim.key), owner, attributes: claim.attributes }),
      ConditionExpression: 'attribute_not_exists(#pk)',
      ExpressionAttributeNames: { '#pk': PK },
    },
  };
}

export function claimUpdate(table: string, owner: string, claim: Claim): TransactWriteItem {
  return {
    Update: {
      TableName: table,
      Key: marshall(keys.claim(claim.key)),
      UpdateExpression: 'SET attributes = :a',
      ConditionExpression: '#owner = :owner',
      ExpressionAttributeNames: { '#owner': 'owner' },
      ExpressionAttributeValues: marshall({ ':a': claim.attributes, ':owner': owner }),
    },
  };
}

export function claimRelease(table: string, owner: string, key: string): TransactWriteItem {
  return {
    Delete: {
      TableName: table,
      Key: marshall(keys.claim(key)),
      ConditionExpression: 'attribute_not_exists(#pk) OR #owner = :owner',
      ExpressionAttributeNames: { '#pk': PK, '#owner': 'owner' },
      ExpressionAttributeValues: marshall({ ':owner': owner }),
    },
  };
}

export function versionBump(table: string, guard: VersionGuard): TransactWriteItem {
  return {
    Update: {
      TableName: table,
      Key: marshall(keys.version(guard.key)),
      UpdateExpression: 'SET version = :next',
      ConditionExpression:
        guard.expected === 0 ? 'attribute_not_exists(version) OR version = :v' : 'version = :v',
      ExpressionAttributeValues: marshall({ ':v': guard.expected, ':next': guard.expected + 1 }),
    },
  };
}
