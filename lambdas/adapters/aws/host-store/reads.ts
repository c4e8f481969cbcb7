/** Consistent reads of single records: name reservations, idempotency mappings, Operations, Resources, claims, versions. */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { OperationRecord, ResourceRecord } from '../../../engine/model.ts';
import type { IdempotencyRecord } from '../../../engine/ports.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { consistentGet, type HostTable } from './host-table.ts';
import { keys, toOperation, toResource } from './items.ts';

const { ttl: TTL } = TABLE_KEYS;

/** The uid holding a (space, name) reservation, if any. */
export async function uidByName(t: HostTable, space: string, name: string): Promise<string | undefined> {
  const item = await consistentGet(t, keys.name(space, name));
  return item ? (unmarshall(item).uid as string) : undefined;
}

export async function getIdempotency(
  t: HostTable,
  principal: string,
  key: string,
): Promise<IdempotencyRecord | undefined> {
  const item = await consistentGet(t, keys.idempotency(principal, key));
  if (!item) return undefined;
  const v = unmarshall(item);
  if (typeof v[TTL] === 'number' && v[TTL] < Math.floor(Date.now() / 1000)) return undefined;
  return { principal: v.principal, key: v.key, operationId: v.operationId, fingerprint: v.fingerprint };
}

export async function getOperation(t: HostTable, id: string): Promise<OperationRecord | undefined> {
  const item = await consistentGet(t, keys.operation(id));
  return item ? toOperation(item) : undefined;
}

export async function getResource(t: HostTable, uid: string): Promise<ResourceRecord | undefined> {
  const item = await consistentGet(t, keys.resource(uid));
  return item ? toResource(item) : undefined;
}

export async function getClaim(t: HostTable, key: string) {
  const item = await consistentGet(t, keys.claim(key));
  if (!item) return undefined;
  const v = unmarshall(item);
  return { owner: v.owner as string, attributes: (v.attributes ?? {}) as Record<string, string | null> };
}

/** The claim keys a Resource holds, as recorded on its item. */
export async function listClaims(t: HostTable, uid: string): Promise<string[]> {
  const item = await consistentGet(t, keys.resource(uid));
  const v = item ? unmarshall(item) : undefined;
  return Array.isArray(v?.claimKeys) ? (v.claimKeys as string[]) : [];
}

export async function getVersion(t: HostTable, key: string): Promise<number> {
  const item = await consistentGet(t, keys.version(key));
  return item ? (unmarshall(item).version as number) : 0;
}
