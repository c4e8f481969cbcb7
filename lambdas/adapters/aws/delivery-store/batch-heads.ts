/**
 * A batch head after registration: read it and its manifest, mark it doubtful, close it (which
 * also lists it among the consumer's recent batches), mark its outcome applied, fence recovery.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import type {
  BatchClose,
  BatchHead,
  Manifest,
  ReleaseClaim,
  ReleaseKind,
} from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../../shared/table-schema.ts';
import { type DeliveryTable, getItem, updateItem } from './delivery-table.ts';
import { deliveryKeys, manifestOfItem, toHead } from './items.ts';
import { RECENT_INDEX } from './recent-batches.ts';

const { pk: PK } = TABLE_KEYS;

export async function getHead(t: DeliveryTable, batchId: string): Promise<BatchHead | undefined> {
  const item = await getItem(t, deliveryKeys.head(batchId));
  return item ? toHead(item) : undefined;
}

export async function getManifest(
  t: DeliveryTable,
  head: Pick<BatchHead, 'batchId' | 'manifestRef'>,
): Promise<Manifest | undefined> {
  const item = await getItem(t, deliveryKeys.manifest(head.batchId, head.manifestRef));
  return item ? manifestOfItem(item) : undefined;
}

export async function markDoubtful(t: DeliveryTable, batchId: string): Promise<void> {
  await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: 'SET doubtful = :true',
    ConditionExpression: 'attribute_exists(#pk)',
    ExpressionAttributeNames: { '#pk': PK },
    ExpressionAttributeValues: marshall({ ':true': true }),
  });
}

/**
 * Closes an open head (ours, when a credential is given). `closed: false` when it was closed
 * already or is gone: the caller reads the head as it is.
 */
export async function closeHead(
  t: DeliveryTable,
  batchId: string,
  outcome: string,
  close: BatchClose,
): Promise<{ closed: true; head: BatchHead | undefined } | { closed: false }> {
  const { credentialHash, error } = close;
  const ours = credentialHash === undefined ? '' : ' AND credentialHash = :h';
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: `SET closed = :true, outcome = :o, closedAt = :at, closedBy = :by, #rsk = :rsk${
      error ? ', #err = :e' : ''
    }`,
    ConditionExpression: `attribute_exists(#pk) AND closed = :false${ours}`,
    ExpressionAttributeNames: { '#pk': PK, '#rsk': RECENT_INDEX.sk, ...(error ? { '#err': 'error' } : {}) },
    ExpressionAttributeValues: marshall({
      ':true': true,
      ':false': false,
      ':o': outcome,
      ':at': close.at,
      ':by': credentialHash === undefined ? 'host' : 'runner',
      ':rsk': timeOrderedKey(close.at, batchId),
      ...(error ? { ':e': { name: error.name, message: error.message } } : {}),
      ...(credentialHash === undefined ? {} : { ':h': credentialHash }),
    }),
    ReturnValues: 'ALL_NEW',
  });
  if (!out.ok) return { closed: false };
  return { closed: true, head: out.item ? toHead(out.item) : undefined };
}

export async function markApplied(
  t: DeliveryTable,
  batchId: string,
  pendingDeadLetter: string[],
  opts: { unlessRecovering?: boolean } = {},
): Promise<boolean> {
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: 'SET applied = :true, pendingDeadLetter = :p',
    ...(opts.unlessRecovering ? { ConditionExpression: 'attribute_not_exists(recovering)' } : {}),
    ExpressionAttributeValues: marshall({ ':true': true, ':p': pendingDeadLetter }),
  });
  return out.ok;
}

export async function fenceRecovery(t: DeliveryTable, batchId: string): Promise<BatchHead | undefined> {
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: 'SET recovering = :true',
    ConditionExpression: 'attribute_exists(#pk)',
    ExpressionAttributeNames: { '#pk': PK },
    ExpressionAttributeValues: marshall({ ':true': true }),
    ReturnValues: 'ALL_NEW',
  });
  return out.ok && out.item ? toHead(out.item) : undefined;
}

/** The head's attributes of a release claim: who holds it, and what a claimant left unreleased. */
const RELEASE_ATTRIBUTES: Record<ReleaseKind, { claim: string; left: string }> = {
  retried: { claim: 'releaseClaim', left: 'releaseLeft' },
  owed: { claim: 'returnClaim', left: 'returnLeft' },
};

export async function claimRelease(
  t: DeliveryTable,
  batchId: string,
  kind: ReleaseKind,
  token: string,
  takeOver = false,
): Promise<ReleaseClaim> {
  const { claim, left } = RELEASE_ATTRIBUTES[kind];
  const out = await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: 'SET #c = :token',
    // Held by this token already: the SDK's retry of a claim whose answer was lost.
    ConditionExpression: takeOver
      ? 'attribute_exists(#pk)'
      : 'attribute_exists(#pk) AND (attribute_not_exists(#c) OR #c = :token)',
    ExpressionAttributeNames: { '#pk': PK, '#c': claim },
    ExpressionAttributeValues: marshall({ ':token': token }),
    ReturnValues: 'ALL_OLD',
  });
  if (!out.ok) return { release: 'none' };
  const items = out.item?.[left];
  return Array.isArray(items) ? { release: 'some', items: items.map(String) } : { release: 'all' };
}

export async function leaveUnreleased(
  t: DeliveryTable,
  batchId: string,
  kind: ReleaseKind,
  token: string,
  items: string[],
): Promise<void> {
  const { claim, left } = RELEASE_ATTRIBUTES[kind];
  await updateItem(t, deliveryKeys.head(batchId), {
    UpdateExpression: 'SET #l = :items REMOVE #c',
    ConditionExpression: '#c = :token',
    ExpressionAttributeNames: { '#c': claim, '#l': left },
    ExpressionAttributeValues: marshall({ ':token': token, ':items': items }),
  });
}
