import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { Claim, Reference, VersionGuard } from '../../engine/forms.ts';
import type { OperationRecord, OperationStatus, ResourceRecord } from '../../engine/model.ts';
import { TERMINAL } from '../../engine/model.ts';
import type {
  AcceptCreate,
  AcceptMutation,
  AcceptResult,
  HostStore,
  IdempotencyRecord,
  ListQuery,
  Settlement,
} from '../../engine/ports.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../shared/table-schema.ts';

const { pk: PK, sk: SK, gsi1, gsi2, ttl: TTL } = TABLE_KEYS;
const ONE = '_';
const DUE = 'DUE';
/** gsi2 partition of every live Resource: what the background refresh of `observed` walks. */
export const OBSERVABLE = 'OBSERVE';

/** Item keys: one item per record, one table (see ARCHITECTURE.md, "Tables"). */
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

const owner = (principal: string) => `OWNER#${principal}`;
const dueKey = timeOrderedKey;
const epochSeconds = (iso: string) => Math.ceil(Date.parse(iso) / 1000);

function resourceItem(r: ResourceRecord, claimKeys: readonly string[] = []): Record<string, AttributeValue> {
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
    item[gsi1.pk] = owner(r.principal);
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

function operationItem(op: OperationRecord): Record<string, AttributeValue> {
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

function toOperation(item: Record<string, AttributeValue>): OperationRecord {
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

function cancellationCodes(err: unknown): string[] | undefined {
  if (err instanceof TransactionCanceledException) {
    return (err.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
  }
  return undefined;
}

export interface DynamoHostStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  replayWindowSeconds: number;
}

export class DynamoHostStore implements HostStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly windowMs: number;

  constructor(opts: DynamoHostStoreOptions) {
    this.client = opts.client;
    this.table = opts.tableName;
    this.windowMs = opts.replayWindowSeconds * 1000;
  }

  private async get(key: Record<string, string>) {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: marshall(key), ConsistentRead: true }),
    );
    return out.Item;
  }

  /** The uid holding a (space, name) reservation, if any. */
  async uidByName(space: string, name: string): Promise<string | undefined> {
    const item = await this.get(keys.name(space, name));
    return item ? (unmarshall(item).uid as string) : undefined;
  }

  async getIdempotency(principal: string, key: string): Promise<IdempotencyRecord | undefined> {
    const item = await this.get(keys.idempotency(principal, key));
    if (!item) return undefined;
    const v = unmarshall(item);
    if (typeof v[TTL] === 'number' && v[TTL] < Math.floor(Date.now() / 1000)) return undefined;
    return { principal: v.principal, key: v.key, operationId: v.operationId, fingerprint: v.fingerprint };
  }

  async getOperation(id: string): Promise<OperationRecord | undefined> {
    const item = await this.get(keys.operation(id));
    return item ? toOperation(item) : undefined;
  }

  async getResource(uid: string): Promise<ResourceRecord | undefined> {
    const item = await this.get(keys.resource(uid));
    return item ? toResource(item) : undefined;
  }

  async listResources(q: ListQuery): Promise<ResourceRecord[]> {
    const out: ResourceRecord[] = [];
    let startKey: Record<string, AttributeValue> | undefined;
    const filters: string[] = [];
    const values: Record<string, unknown> = { ':o': owner(q.principal) };
    const names: Record<string, string> = { '#pk': gsi1.pk };
    for (const field of ['space', 'name', 'form'] as const) {
      const wanted = q[field];
      if (wanted !== undefined) {
        filters.push(`#${field} = :${field}`);
        names[`#${field}`] = field;
        values[`:${field}`] = wanted;
      }
    }
    let condition = '#pk = :o';
    if (q.afterUid !== undefined) {
      condition += ' AND #sk > :after';
      names['#sk'] = gsi1.sk;
      values[':after'] = q.afterUid;
    }
    do {
      const page = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: gsi1.name,
          KeyConditionExpression: condition,
          FilterExpression: filters.length ? filters.join(' AND ') : undefined,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall(values),
          ExclusiveStartKey: startKey,
          Limit: Math.max(q.limit * 2, 25),
        }),
      );
      for (const item of page.Items ?? []) {
        const r = toResource(item);
        if (!r.deletedAt) out.push(r);
        if (out.length >= q.limit) return out;
      }
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return out;
  }

  /** A mapping past its retention may linger until TTL removes it; it no longer holds the key. */
  private idempotencyPut(idem: IdempotencyRecord): TransactWriteItem {
    return {
      Put: {
        TableName: this.table,
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
  private referenceTake(
    source: string,
    ref: Reference,
    principal: string,
    space: string,
  ): TransactWriteItem[] {
    return [
      {
        Update: {
          TableName: this.table,
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
          TableName: this.table,
          Item: marshall({ ...keys.edge(source, ref.resourceUid), target: ref.resourceUid, role: ref.role }),
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
    ];
  }

  private referenceRelease(source: string, target: string): TransactWriteItem[] {
    return [
      {
        Delete: {
          TableName: this.table,
          Key: marshall(keys.edge(source, target)),
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
      {
        Update: {
          TableName: this.table,
          Key: marshall(keys.resource(target)),
          UpdateExpression: 'ADD inboundRefs :minus',
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
          ExpressionAttributeValues: marshall({ ':minus': -1 }),
        },
      },
    ];
  }

  private claimCreate(owner: string, claim: Claim): TransactWriteItem {
    return {
      Put: {
        TableName: this.table,
        Item: marshall({ ...keys.claim(claim.key), owner, attributes: claim.attributes }),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    };
  }

  private claimUpdate(owner: string, claim: Claim): TransactWriteItem {
    return {
      Update: {
        TableName: this.table,
        Key: marshall(keys.claim(claim.key)),
        UpdateExpression: 'SET attributes = :a',
        ConditionExpression: '#owner = :owner',
        ExpressionAttributeNames: { '#owner': 'owner' },
        ExpressionAttributeValues: marshall({ ':a': claim.attributes, ':owner': owner }),
      },
    };
  }

  private claimRelease(owner: string, key: string): TransactWriteItem {
    return {
      Delete: {
        TableName: this.table,
        Key: marshall(keys.claim(key)),
        ConditionExpression: 'attribute_not_exists(#pk) OR #owner = :owner',
        ExpressionAttributeNames: { '#pk': PK, '#owner': 'owner' },
        ExpressionAttributeValues: marshall({ ':owner': owner }),
      },
    };
  }

  private versionBump(guard: VersionGuard): TransactWriteItem {
    return {
      Update: {
        TableName: this.table,
        Key: marshall(keys.version(guard.key)),
        UpdateExpression: 'SET version = :next',
        ConditionExpression:
          guard.expected === 0 ? 'attribute_not_exists(version) OR version = :v' : 'version = :v',
        ExpressionAttributeValues: marshall({ ':v': guard.expected, ':next': guard.expected + 1 }),
      },
    };
  }

  async getClaim(key: string) {
    const item = await this.get(keys.claim(key));
    if (!item) return undefined;
    const v = unmarshall(item);
    return { owner: v.owner as string, attributes: (v.attributes ?? {}) as Record<string, string | null> };
  }

  async listClaims(uid: string): Promise<string[]> {
    const item = await this.get(keys.resource(uid));
    const v = item ? unmarshall(item) : undefined;
    return Array.isArray(v?.claimKeys) ? (v.claimKeys as string[]) : [];
  }

  async getVersion(key: string): Promise<number> {
    const item = await this.get(keys.version(key));
    return item ? (unmarshall(item).version as number) : 0;
  }

  async listReferences(uid: string): Promise<string[]> {
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :ref)',
        ExpressionAttributeNames: { '#pk': PK, '#sk': SK },
        ExpressionAttributeValues: marshall({ ':pk': keys.resource(uid)[PK], ':ref': 'REF#' }),
        ConsistentRead: true,
      }),
    );
    return (out.Items ?? []).map((item) => unmarshall(item).target as string);
  }

  async acceptCreate(input: AcceptCreate): Promise<AcceptResult> {
    const { resource: r, operation, idempotency, references, claims, versions } = input;
    const items: TransactWriteItem[] = [
      this.idempotencyPut(idempotency),
      {
        Put: {
          TableName: this.table,
          Item: marshall({ ...keys.name(r.space, r.name), uid: r.uid }),
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
      {
        Put: {
          TableName: this.table,
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
          TableName: this.table,
          Item: operationItem(operation),
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
      ...references.flatMap((ref) => this.referenceTake(r.uid, ref, r.principal, r.space)),
      ...claims.map((c) => this.claimCreate(r.uid, c)),
      ...versions.map((v) => this.versionBump(v)),
    ];
    const out = await this.transact(items);
    if (out.ok || 'retry' in out) return out.ok ? { ok: true } : { ok: false, reason: 'version_conflict' };
    if (out.failed === 0) return { ok: false, reason: 'idempotency_race' };
    if (out.failed === 1) return { ok: false, reason: 'name_conflict' };
    const guard = this.guardFailure(out.failed - 4, references, claims);
    if (guard) return guard;
    throw out.err;
  }

  /**
   * Runs an acceptance transaction. A cancellation names the first item whose condition failed;
   * one cancelled only by a concurrent transaction (real DynamoDB) asks for a fresh check.
   */
  private async transact(
    items: TransactWriteItem[],
  ): Promise<
    | { ok: true }
    | { ok: false; retry: true }
    | { ok: false; failed: number; err: TransactionCanceledException }
  > {
    try {
      await this.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
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
  private guardFailure(
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

  private async acceptMutation(input: AcceptMutation, action: 'update' | 'delete'): Promise<AcceptResult> {
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
      this.idempotencyPut(idempotency),
      {
        Update: {
          TableName: this.table,
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
          TableName: this.table,
          Item: operationItem(operation),
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
      ...input.addedReferences.flatMap((ref) => this.referenceTake(uid, ref, principal, operation.space)),
      ...input.claims.map((c) => this.claimUpdate(uid, c)),
      ...input.versions.map((v) => this.versionBump(v)),
    ];
    const out = await this.transact(items);
    if (out.ok || 'retry' in out) return out.ok ? { ok: true } : { ok: false, reason: 'version_conflict' };
    if (out.failed === 0) return { ok: false, reason: 'idempotency_race' };
    if (out.failed === 1) {
      const reason = out.err.CancellationReasons?.[1];
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
    const guard = this.guardFailure(out.failed - 3, input.addedReferences, input.claims);
    if (guard) return guard;
    throw out.err;
  }

  acceptUpdate(input: AcceptMutation): Promise<AcceptResult> {
    return this.acceptMutation(input, 'update');
  }

  acceptDelete(input: AcceptMutation): Promise<AcceptResult> {
    return this.acceptMutation(input, 'delete');
  }

  /** A Query of the due index: Operations due by `now` (`<=`), or due later, i.e. leased (`>`). */
  private dueIndex(compare: '<=' | '>', now: number) {
    return {
      TableName: this.table,
      IndexName: gsi2.name,
      KeyConditionExpression: `#pk = :due AND #sk ${compare} :now`,
      ExpressionAttributeNames: { '#pk': gsi2.pk, '#sk': gsi2.sk },
      ExpressionAttributeValues: marshall({ ':due': DUE, ':now': dueKey(now, '~') }),
    };
  }

  async dueOperations(now: number, limit: number): Promise<{ id: string; status: OperationStatus }[]> {
    const out = await this.client.send(new QueryCommand({ ...this.dueIndex('<=', now), Limit: limit }));
    return (out.Items ?? []).map((item) => {
      const v = unmarshall(item);
      return { id: v.id as string, status: v.status as OperationStatus };
    });
  }

  async releaseLeases(now: number): Promise<number> {
    let released = 0;
    let start: Record<string, AttributeValue> | undefined;
    do {
      // A claimed Operation is due when its lease ends: the leased ones sort after `now`.
      const page = await this.client.send(
        new QueryCommand({ ...this.dueIndex('>', now), ExclusiveStartKey: start }),
      );
      for (const item of page.Items ?? []) {
        const v = unmarshall(item);
        if (typeof v.leaseUntil !== 'number' || v.leaseUntil <= now || typeof v.leaseToken !== 'string')
          continue;
        try {
          await this.client.send(
            new UpdateItemCommand({
              TableName: this.table,
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
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
        }
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return released;
  }

  async claimOperation(
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
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
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

  async markDispatch(id: string, token: string, now: number): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
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

  async settleOperation(op: OperationRecord, token: string, now: number, s: Settlement): Promise<boolean> {
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
      const retainUntil = new Date(Math.max(Date.parse(op.retainUntil), now + this.windowMs)).toISOString();
      const expires = epochSeconds(retainUntil);
      set.push('retainUntil = :retain', '#ttl = :ttl');
      values[':retain'] = retainUntil;
      values[':ttl'] = expires;
      names['#ttl'] = TTL;
      names['#gpk'] = gsi2.pk;
      remove.push('#gpk', '#gsk');
      items.push({
        Update: {
          TableName: this.table,
          Key: marshall(keys.idempotency(op.principal, op.idempotencyKey)),
          UpdateExpression: 'SET #ttl = :ttl',
          ExpressionAttributeNames: { '#ttl': TTL },
          ExpressionAttributeValues: marshall({ ':ttl': expires }),
        },
      });
      items.push(...this.projectOntoResource(op, s, nowIso));
    } else {
      const next = s.nextAttemptAt ?? now;
      set.push('nextAttemptAt = :next', '#gsk = :due');
      values[':next'] = next;
      values[':due'] = dueKey(next, op.id);
    }
    items.unshift({
      Update: {
        TableName: this.table,
        Key: marshall(keys.operation(op.id)),
        UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
        ConditionExpression: 'leaseToken = :t',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: marshall(values, { removeUndefinedValues: true }),
      },
    });
    try {
      await this.client.send(new TransactWriteItemsCommand({ TransactItems: items }));
      return true;
    } catch (err) {
      const codes = cancellationCodes(err);
      if (codes?.[0] === 'ConditionalCheckFailed') return false;
      throw err;
    }
  }

  /** The terminal transition as seen on the Resource, name reservation and references. */
  private projectOntoResource(op: OperationRecord, s: Settlement, nowIso: string): TransactWriteItem[] {
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
          TableName: this.table,
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
          TableName: this.table,
          Key: marshall(keys.name(op.space, op.name)),
          ConditionExpression: 'uid = :uid',
          ExpressionAttributeValues: marshall({ ':uid': op.resourceUid }),
        },
      });
    }
    if (succeeded) {
      for (const target of s.releasedReferences ?? [])
        items.push(...this.referenceRelease(op.resourceUid, target));
      // A deleted Resource gives up its claims (e.g. "the consumer of queue X"), so the role is free
      // again; only its own claim is removed, and a claim already gone is not an error.
      for (const key of s.releasedClaims ?? []) items.push(this.claimRelease(op.resourceUid, key));
    }
    return items;
  }
}
