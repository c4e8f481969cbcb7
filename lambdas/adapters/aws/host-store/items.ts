/**
 * How Resources and Operations are stored: their item keys and the codecs between records and
 * items. One item per record, one table (see ARCHITECTURE.md, "Tables").
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { OperationRecord, ResourceRecord } from '../../../engine/model.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../../shared/table-schema.ts';

const { pk: PK, sk: SK, gsi1, gsi2 } = TABLE_KEYS;
const ONE = '_';
/** gsi2 partition of every Operation not yet terminal: what the executor's sweep walks. */
export const DUE = 'DUE';
/** gsi2 partition of every live Resource: what the background refresh of `observed` walks. */
export const OBSERVABLE = 'OBSERVE';

export const keys = {
  resource: (uid: string) => ({ [PK]: `RES#${uid}`, [SK]: ONE }),
  name: (space: string, name: string) => ({ [PK]: `NAME#${space}#${name}`, [SK]: ONE }),
  operation: (id: string) => ({ [PK]: `OP#${id}`, [SK]: ONE }),
  idempotency: (principal: string, key: string) => ({ [PK]: `IDEM#${principal}#${key}`, [SK]: ONE }),
  claim: (key: string) => ({ [PK]: `CLAIM#${key}`, [SK]: ONE }),
  version: (key: string) => ({ [PK]: `VERSION#${key}`, [SK]: ONE }),
  /** An outbound reference lives in its source's partition, so one Query lists them. */
  edge: (source: string, target: string) => ({ [PK]: `RES#${source}`, [SK]: `REF#${target}` }),
};

/** gsi1 partition of a principal's live Resources: what a listing reads. */
export const ownerPartition = (principal: string) => `OWNER#${principal}`;
export const dueKey = timeOrderedKey;
export const epochSeconds = (iso: string) => Math.ceil(Date.parse(iso) / 1000);

export function resourceItem(
  r: ResourceRecord,
  claimKeys: readonly string[] = [],
): Record<string, AttributeValue> {
  const item: Record<string, unknown> = {
    ...keys.resource(r.uid),
    uid: r.uid,
    principal: r.principal,
    form: r.form,
    space: r.space,
    name: r.name,
    generation: r.generation,
    observedGeneration: r.observedGeneration,
    observedAt: r.observedAt,
    phase: r.phase,
    specJson: JSON.stringify(r.spec),
    observedJson: JSON.stringify(r.observed),
    outputJson: JSON.stringify(r.output),
    lastOperation: r.lastOperation,
    inboundRefs: 0,
  };
  if (claimKeys.length) item.claimKeys = [...claimKeys];
  if (r.busyOperation) item.busyOperation = r.busyOperation;
  if (!r.deletedAt) {
    item[gsi1.pk] = ownerPartition(r.principal);
    item[gsi1.sk] = r.uid;
    item[gsi2.pk] = OBSERVABLE;
    item[gsi2.sk] = r.uid;
  }
  return marshall(item, { removeUndefinedValues: true });
}

export function toResource(item: Record<string, AttributeValue>): ResourceRecord {
  const v = unmarshall(item);
  return {
    uid: v.uid,
    principal: v.principal,
    form: v.form,
    space: v.space,
    name: v.name,
    generation: v.generation,
    observedGeneration: v.observedGeneration,
    observedAt: v.observedAt ?? null,
    phase: v.phase,
    spec: JSON.parse(v.specJson),
    observed: JSON.parse(v.observedJson),
    output: JSON.parse(v.outputJson),
    lastOperation: v.lastOperation,
    busyOperation: v.busyOperation,
    deletedAt: v.deletedAt,
  };
}

export function operationItem(op: OperationRecord): Record<string, AttributeValue> {
  return marshall(
    {
      ...keys.operation(op.id),
      id: op.id,
      resourceUid: op.resourceUid,
      principal: op.principal,
      action: op.action,
      generation: op.generation,
      status: op.status,
      effect: op.effect,
      createdAt: op.createdAt,
      updatedAt: op.updatedAt,
      retainUntil: op.retainUntil,
      error: op.error,
      idempotencyKey: op.idempotencyKey,
      form: op.form,
      space: op.space,
      name: op.name,
      specJson: JSON.stringify(op.spec),
      dispatchPossible: op.dispatchPossible,
      attempts: op.attempts,
      nextAttemptAt: op.nextAttemptAt,
      leaseUntil: op.leaseUntil,
      [gsi2.pk]: DUE,
      [gsi2.sk]: dueKey(op.nextAttemptAt, op.id),
    },
    { removeUndefinedValues: true },
  );
}

export function toOperation(item: Record<string, AttributeValue>): OperationRecord {
  const v = unmarshall(item);
  return {
    id: v.id,
    resourceUid: v.resourceUid,
    principal: v.principal,
    action: v.action,
    generation: v.generation,
    status: v.status,
    effect: v.effect,
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    retainUntil: v.retainUntil,
    error: v.error,
    idempotencyKey: v.idempotencyKey,
    form: v.form,
    space: v.space,
    name: v.name,
    spec: JSON.parse(v.specJson),
    dispatchPossible: v.dispatchPossible === true,
    attempts: v.attempts ?? 0,
    nextAttemptAt: v.nextAttemptAt ?? 0,
    leaseToken: v.leaseToken,
    leaseUntil: v.leaseUntil ?? 0,
  };
}
