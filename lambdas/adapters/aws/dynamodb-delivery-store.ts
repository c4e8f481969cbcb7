import { createHash } from 'node:crypto';
import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type {
  AttemptsRecord,
  BatchClose,
  BatchDigest,
  BatchHead,
  DeadLetterRecord,
  DeliveryStore,
  DispatchState,
  GroupSettleResult,
  Manifest,
  RegistrationReads,
  SettleResult,
  SlotAnswer,
} from '../../delivery/delivery-store.ts';
import { codeOf, ManifestNotWritten } from '../../delivery/delivery-store.ts';
import { NamedError } from '../../delivery/limits.ts';
import type { HandlerError, SettleCall } from '../../delivery/settlement-protocol.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../shared/table-schema.ts';
import { attachmentKey } from './dynamodb-attachments.ts';
import { commitIdOf, commitKey } from './dynamodb-commit-store.ts';
import {
  backoff,
  CONFLICT_TRIES,
  conditionalUpdate,
  isConditionFailure,
  isTransactionConflict,
} from './dynamodb-conditional-update.ts';
import { deadLetterRecordKey } from './dynamodb-dead-letter-records.ts';
import { DynamoSlotMap, slotShardKey } from './dynamodb-slot-map.ts';
import { decodeManifest, encodeManifest } from './manifest-codec.ts';

const { pk: PK, sk: SK, gsi1: RECENT_INDEX, ttl: TTL } = TABLE_KEYS;

/**
 * A consumer's closed batches, newest first: its heads in gsi1 under one partition. Registration
 * writes the partition, the close the sort key (sparse: an open batch is not in the index), so
 * listing a batch costs no write of its own — only the index's copy of the closing write.
 */
const recentPartition = (consumerUid: string) => `RECENT#${consumerUid}`;

/** BatchGetItem reads at most 100 keys per request. */
const BATCH_GET_MAX_KEYS = 100;

/** An item as read back: schemaless, so callers read the fields they named. */
// biome-ignore lint/suspicious/noExplicitAny: see above
type StoredItem = Record<string, any>;

export const deliveryKeys = {
  /** A consumer's first slot shard (`dynamodb-slot-map.ts`). */
  slots: (consumerUid: string) => slotShardKey(consumerUid, 0),
  head: (batchId: string) => ({ [PK]: `BATCH#${batchId}`, [SK]: 'head' }),
  /** Named by its content (`ref`), so a replayed registration never overwrites the manifest of a head. */
  manifest: (batchId: string, ref?: string) => ({
    [PK]: `BATCH#${batchId}`,
    [SK]: ref === undefined ? 'manifest' : `manifest#${ref}`,
  }),
  attempts: (queueUid: string, id: string) => ({ [PK]: `ATT#${queueUid}#${id}`, [SK]: '_' }),
  queueState: (queueUid: string) => ({ [PK]: `QSTATE#${queueUid}`, [SK]: '_' }),
};

/** Batch records outlive their batch by a week: long enough to audit, short enough to cost nothing. */
const BATCH_RETENTION_SECONDS = 7 * 86_400;

const cancellationCodes = (err: unknown) =>
  err instanceof TransactionCanceledException
    ? (err.CancellationReasons ?? []).map((r) => r.Code ?? 'None')
    : undefined;
/**
 * A cancelled transaction worth trying again: a conflict with another write of one of its items,
 * or a throttled item. The SDK retries neither (the cancellation is a client error).
 */
const retryable = (err: unknown, codes = cancellationCodes(err)) =>
  isTransactionConflict(err) ||
  (codes ?? []).some(
    (c) => c === 'TransactionConflict' || c === 'ThrottlingError' || c === 'ProvisionedThroughputExceeded',
  );

/**
 * Per-message settlements one combined write may carry: its condition grows by about 40
 * characters per message, so 50 keep it near 2 KB, well under DynamoDB's 4 KB expression limit.
 */
export const COMBINED_SETTLE_MAX = 50;

type PerMessageCall = Extract<SettleCall, { index: number }>;
const isPerMessage = (call: SettleCall): call is PerMessageCall =>
  call.kind === 'ack' || call.kind === 'retry';
const validIndex = (call: PerMessageCall) => Number.isInteger(call.index) && call.index >= 0;

/**
 * Splits a group, keeping its order, into parts that are either one call (a batch-level call, an
 * invalid index) or up to COMBINED_SETTLE_MAX per-message calls on distinct indexes, which one
 * write can settle together exactly as one by one (none of them sees another's decision).
 */
function settleParts(calls: SettleCall[]): SettleCall[][] {
  const parts: SettleCall[][] = [];
  let current: PerMessageCall[] = [];
  let indexes = new Set<number>();
  const close = () => {
    if (current.length > 0) parts.push(current);
    current = [];
    indexes = new Set();
  };
  for (const call of calls) {
    if (!isPerMessage(call) || !validIndex(call)) {
      close();
      parts.push([call]);
      continue;
    }
    if (indexes.has(call.index) || current.length >= COMBINED_SETTLE_MAX) close();
    current.push(call);
    indexes.add(call.index);
  }
  close();
  return parts;
}

function toHead(item: Record<string, unknown>): BatchHead {
  return {
    batchId: item.batchId as string,
    consumerUid: item.consumerUid as string,
    queueUid: item.queueUid as string,
    generation: item.generation as number,
    credentialHash: item.credentialHash as string,
    size: item.size as number,
    closed: item.closed === true,
    outcome: item.outcome as string | undefined,
    applied: item.applied === true,
    settled: (item.settled ?? {}) as BatchHead['settled'],
    all: item.all as BatchHead['all'],
    deadline: item.deadline as number,
    // Heads of older Host versions have none: their handles were never recorded either.
    invisibleUntil: (item.invisibleUntil ?? item.deadline) as number,
    doubtful: item.doubtful === true,
    pendingDeadLetter: (item.pendingDeadLetter ?? []) as string[],
    ...(item.recovering === true ? { recovering: true } : {}),
    ...(item.digest ? { digest: item.digest as BatchDigest } : {}),
    ...(typeof item.manifestRef === 'string' ? { manifestRef: item.manifestRef } : {}),
    ...(typeof item.closedAt === 'number' ? { closedAt: item.closedAt } : {}),
    ...(item.closedBy === 'runner' || item.closedBy === 'host' ? { closedBy: item.closedBy } : {}),
    ...(item.error ? { error: item.error as HandlerError } : {}),
  };
}

/** A manifest item as stored by this Host (bytes) or by older versions (JSON; before that, a list). */
export function manifestOfItem(item: Record<string, unknown>): Manifest {
  if (item.entries instanceof Uint8Array) return decodeManifest(item.entries);
  const parsed = JSON.parse(item.entriesJson as string);
  return Array.isArray(parsed) ? { entries: parsed, moves: [] } : (parsed as Manifest);
}

export class DynamoDeliveryStore implements DeliveryStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  private readonly slotMap: DynamoSlotMap;

  /** `slotsPerShard` below 10 spreads slots over more items (tests use it to exercise the shards). */
  constructor(client: DynamoDBClient, tableName: string, opts: { slotsPerShard?: number } = {}) {
    this.client = client;
    this.table = tableName;
    this.slotMap = new DynamoSlotMap(client, tableName, opts.slotsPerShard);
  }

  /** A consistent read of one item, unmarshalled. */
  // biome-ignore lint/suspicious/noExplicitAny: items are schemaless; callers read named fields
  private async getItem(key: Record<string, string>): Promise<Record<string, any> | undefined> {
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: marshall(key), ConsistentRead: true }),
    );
    return out.Item ? unmarshall(out.Item) : undefined;
  }

  /** One conditional UpdateItem on the Host table (`conditionalUpdate`). */
  private update(key: Record<string, string>, input: Parameters<typeof conditionalUpdate>[3]) {
    return conditionalUpdate(this.client, this.table, key, input);
  }

  // Slots: the slot map (`dynamodb-slot-map.ts`) answers for them.
  initSlots(consumerUid: string): Promise<void> {
    return this.slotMap.init(consumerUid);
  }

  prepareSlots(consumerUid: string, max: number, lanes: number): Promise<void> {
    return this.slotMap.prepare(consumerUid, max, lanes);
  }

  async slots(consumerUid: string): Promise<Record<string, number>> {
    return (await this.slotMap.read(consumerUid)).slots;
  }

  dispatchState(consumerUid: string): Promise<DispatchState> {
    return this.slotMap.read(consumerUid);
  }

  takeSlot(
    consumerUid: string,
    batchId: string,
    deadline: number,
    max: number,
    spread?: { rank: number },
  ): Promise<SlotAnswer> {
    return this.slotMap.take(consumerUid, batchId, deadline, max, spread);
  }

  swapSlot(
    consumerUid: string,
    previous: string,
    batchId: string,
    deadline: number,
    max: number,
  ): Promise<SlotAnswer> {
    return this.slotMap.swap(consumerUid, previous, batchId, deadline, max);
  }

  async releaseSlot(
    consumerUid: string,
    batchId: string,
    opts: { recoveredAt?: number } = {},
  ): Promise<void> {
    await this.slotMap.release(consumerUid, batchId, opts.recoveredAt);
  }

  releaseIdle(consumerUid: string, batchId: string): Promise<{ wakes?: number; lastWakeAt?: number }> {
    return this.slotMap.releaseIdle(consumerUid, batchId);
  }

  claimStart(consumerUid: string, now: number, leaseMs: number): Promise<boolean> {
    return this.slotMap.claimStart(consumerUid, now, leaseMs);
  }

  wake(consumerUid: string, now: number): Promise<DispatchState> {
    return this.slotMap.wake(consumerUid, now);
  }

  releaseUnregistered(consumerUid: string, batchId: string): Promise<boolean> {
    return this.slotMap.releaseUnregistered(consumerUid, batchId);
  }

  markRegistered(consumerUid: string, batchId: string): Promise<boolean> {
    return this.slotMap.markRegistered(consumerUid, batchId);
  }

  consumersWithSlots(): Promise<string[]> {
    return this.slotMap.consumersWithSlots();
  }

  revokeUnregistered(consumerUid: string): Promise<number> {
    return this.slotMap.revokeUnregistered(consumerUid);
  }

  async createBatch(batchHead: BatchHead, manifest: Manifest): Promise<boolean> {
    const bytes = encodeManifest(manifest);
    const manifestRef = createHash('sha256').update(bytes).digest('base64url').slice(0, 22);
    const head: BatchHead = { ...batchHead, manifestRef };
    const expires = Math.ceil(head.invisibleUntil / 1000) + BATCH_RETENTION_SECONDS;
    const items = [
      {
        Put: {
          TableName: this.table,
          Item: marshall(
            {
              ...deliveryKeys.head(head.batchId),
              ...head,
              [RECENT_INDEX.pk]: recentPartition(head.consumerUid),
              [TTL]: expires,
            },
            { removeUndefinedValues: true },
          ),
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        },
      },
      // The stop boundary (QC-08): a slot revoked before this point never holds a batch.
      this.slotMap.registerAction(head.consumerUid, head.batchId, head.deadline),
      {
        // The consumer generation the slot was sealed for is still the active one: a stop or an
        // update after the slot was taken starts nothing (the check replaces a read before it).
        ConditionCheck: {
          TableName: this.table,
          Key: marshall(attachmentKey(head.consumerUid)),
          ConditionExpression: '#state = :active AND generation = :g',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: marshall({ ':active': 'active', ':g': head.generation }),
        },
      },
    ];
    // The manifest (every receipt handle: the largest item of a batch) is a plain write, at half
    // a transactional write's cost, made before the transaction: a head never exists without its
    // manifest, and a manifest whose write failed (or whose answer was lost) is named by no head,
    // so it counts no delivery. Its key is its content's hash, which the head names: a replayed
    // registration writes another item (or the same bytes again), never over the manifest of a
    // head that exists. (Written beside the transaction, a lost answer of the manifest's write
    // left a head naming a manifest of a batch that never ran: chaos seed 30.)
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: {
            ...marshall({
              ...deliveryKeys.manifest(head.batchId, manifestRef),
              batchId: head.batchId,
              [TTL]: expires,
            }),
            entries: { B: bytes },
          },
        }),
      );
    } catch (err) {
      throw new ManifestNotWritten(head.batchId, err);
    }
    return this.registerHead(head, items);
  }

  /** The head and the slot's `registered` mark in one transaction (see `createBatch`). */
  private async registerHead(
    head: BatchHead,
    items: NonNullable<TransactWriteItemsCommandInput['TransactItems']>,
  ): Promise<boolean> {
    // One transaction, so a handler never runs without the records that settle and recover it
    // (a BatchWriteItem may leave items unprocessed under throttling). The token makes a retry of
    // a transaction that committed but whose answer was lost (a connection that dropped) succeed
    // instead of failing its conditions against its own writes.
    const ClientRequestToken = createHash('sha256').update(head.batchId).digest('base64url').slice(0, 36);
    for (let round = 1; ; round++) {
      try {
        await this.client.send(
          new TransactWriteItemsCommand({
            TransactItems: items,
            ClientRequestToken,
          }),
        );
        return true;
      } catch (err) {
        const codes = cancellationCodes(err);
        // The head exists: registered before (a replayed call, never this call's own retry,
        // which the token makes succeed).
        if (
          codes?.[0] === 'ConditionalCheckFailed' ||
          (err as Error)?.name === 'IdempotentParameterMismatchException'
        ) {
          throw new NamedError('unknown_batch', 'this batch is registered already');
        }
        if (codes?.[1] === 'ConditionalCheckFailed' || codes?.[2] === 'ConditionalCheckFailed') return false;
        if (!retryable(err, codes) || round >= CONFLICT_TRIES) throw err;
        await backoff(round);
      }
    }
  }

  async getHead(batchId: string): Promise<BatchHead | undefined> {
    const item = await this.getItem(deliveryKeys.head(batchId));
    return item ? toHead(item) : undefined;
  }

  async getManifest(head: Pick<BatchHead, 'batchId' | 'manifestRef'>): Promise<Manifest | undefined> {
    const item = await this.getItem(deliveryKeys.manifest(head.batchId, head.manifestRef));
    return item ? manifestOfItem(item) : undefined;
  }

  async settle(batchId: string, credentialHash: string, call: SettleCall): Promise<SettleResult> {
    const perMessage = call.kind === 'ack' || call.kind === 'retry';
    if (perMessage && !(Number.isInteger(call.index) && call.index >= 0)) return 'unknown_batch';
    // One conditional write, no read first: the condition checks the credential, that the batch
    // is open, that the index is in it, and that nothing settled the message yet.
    const open = 'attribute_exists(#pk) AND credentialHash = :h AND closed = :false';
    const out = await this.update(deliveryKeys.head(batchId), {
      UpdateExpression: perMessage ? 'SET settled.#i = :code' : 'SET #all = :code',
      ConditionExpression: perMessage
        ? `${open} AND #size > :index AND attribute_not_exists(settled.#i) AND attribute_not_exists(#all)`
        : `${open} AND attribute_not_exists(#all)`,
      ExpressionAttributeNames: perMessage
        ? { '#pk': PK, '#i': String(call.index), '#all': 'all', '#size': 'size' }
        : { '#pk': PK, '#all': 'all' },
      ExpressionAttributeValues: marshall({
        ':h': credentialHash,
        ':false': false,
        ':code': codeOf(call),
        ...(perMessage ? { ':index': call.index } : {}),
      }),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    if (out.ok) return 'ok';
    const old = out.old;
    if (!old || old.credentialHash !== credentialHash || old.closed === true) return 'unknown_batch';
    if (perMessage && !(call.index < (old.size as number))) return 'unknown_batch';
    // Open and ours: a per-message call lost to an earlier settlement; a batch-level call after
    // another batch-level call has nothing left to settle.
    return perMessage ? 'already_settled' : 'ok';
  }

  async settleMany(
    batchId: string,
    credentialHash: string,
    calls: SettleCall[],
  ): Promise<GroupSettleResult[]> {
    const results: GroupSettleResult[] = [];
    try {
      for (const part of settleParts(calls)) {
        const [only] = part;
        if (part.length === 1 && only) {
          results.push(await this.settle(batchId, credentialHash, only));
          continue;
        }
        const combined = await this.settleDistinct(batchId, credentialHash, part as PerMessageCall[]);
        if (combined === 'ok' || combined === 'unknown_batch') {
          for (const _ of part) results.push(combined);
          continue;
        }
        // Some message is settled already (or an index is out of range): each call gets its own
        // answer from the single-call write.
        for (const call of part) results.push(await this.settle(batchId, credentialHash, call));
      }
    } catch {
      // This write's outcome is unknown; the rest of the group is not attempted.
    }
    while (results.length < calls.length) results.push('write_failed');
    return results;
  }

  /**
   * One conditional write settling per-message calls on distinct indexes: all or nothing, on
   * condition that the batch is open and ours, every index is in it and none is settled yet.
   * `unknown_batch` when the head shows the batch closed, gone or not ours (so is every call of
   * the part, one by one); `mixed` when the calls need answers of their own.
   */
  private async settleDistinct(
    batchId: string,
    credentialHash: string,
    calls: PerMessageCall[],
  ): Promise<'ok' | 'unknown_batch' | 'mixed'> {
    const names: Record<string, string> = { '#pk': PK, '#all': 'all', '#size': 'size', '#s': 'settled' };
    const values: Record<string, unknown> = {
      ':h': credentialHash,
      ':false': false,
      ':max': Math.max(...calls.map((c) => c.index)),
    };
    const codes = new Map<string, string>();
    const sets: string[] = [];
    const unsettled: string[] = [];
    for (const [j, call] of calls.entries()) {
      const code = codeOf(call);
      let value = codes.get(code);
      if (!value) {
        value = `:c${codes.size}`;
        codes.set(code, value);
        values[value] = code;
      }
      names[`#i${j}`] = String(call.index);
      sets.push(`#s.#i${j} = ${value}`);
      unsettled.push(`attribute_not_exists(#s.#i${j})`);
    }
    const out = await this.update(deliveryKeys.head(batchId), {
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: `attribute_exists(#pk) AND credentialHash = :h AND closed = :false AND #size > :max AND attribute_not_exists(#all) AND ${unsettled.join(' AND ')}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: marshall(values),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    if (out.ok) return 'ok';
    const old = out.old;
    // Closed is for good and the credential never changes: every call would be refused alike.
    if (!old || old.credentialHash !== credentialHash || old.closed === true) return 'unknown_batch';
    return 'mixed';
  }

  async markDoubtful(batchId: string): Promise<void> {
    await this.update(deliveryKeys.head(batchId), {
      UpdateExpression: 'SET doubtful = :true',
      ConditionExpression: 'attribute_exists(#pk)',
      ExpressionAttributeNames: { '#pk': PK },
      ExpressionAttributeValues: marshall({ ':true': true }),
    });
  }

  async closeBatch(batchId: string, outcome: string, close: BatchClose): Promise<BatchHead | undefined> {
    const { credentialHash, error } = close;
    const ours = credentialHash === undefined ? '' : ' AND credentialHash = :h';
    const out = await this.update(deliveryKeys.head(batchId), {
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
    // Closed already (by this step's earlier attempt, or by recovery): the head as it is.
    if (!out.ok) return this.getHead(batchId);
    return out.item ? toHead(out.item) : undefined;
  }

  async recentlyClosed(consumerUid: string, limit: number, since: number): Promise<BatchHead[]> {
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: RECENT_INDEX.name,
        KeyConditionExpression: '#pk = :pk AND #sk >= :since',
        ExpressionAttributeNames: { '#pk': RECENT_INDEX.pk, '#sk': RECENT_INDEX.sk },
        ExpressionAttributeValues: marshall({
          ':pk': recentPartition(consumerUid),
          ':since': timeOrderedKey(since, ''),
        }),
        ScanIndexForward: false,
        Limit: limit,
      }),
    );
    return (out.Items ?? [])
      .map((item) => unmarshall(item))
      .filter((v) => v.closed === true)
      .map(toHead);
  }

  async markApplied(
    batchId: string,
    pendingDeadLetter: string[],
    opts: { unlessRecovering?: boolean } = {},
  ): Promise<boolean> {
    const out = await this.update(deliveryKeys.head(batchId), {
      UpdateExpression: 'SET applied = :true, pendingDeadLetter = :p',
      ...(opts.unlessRecovering ? { ConditionExpression: 'attribute_not_exists(recovering)' } : {}),
      ExpressionAttributeValues: marshall({ ':true': true, ':p': pendingDeadLetter }),
    });
    return out.ok;
  }

  async fenceRecovery(batchId: string): Promise<BatchHead | undefined> {
    const out = await this.update(deliveryKeys.head(batchId), {
      UpdateExpression: 'SET recovering = :true',
      ConditionExpression: 'attribute_exists(#pk)',
      ExpressionAttributeNames: { '#pk': PK },
      ExpressionAttributeValues: marshall({ ':true': true }),
      ReturnValues: 'ALL_NEW',
    });
    return out.ok && out.item ? toHead(out.item) : undefined;
  }

  async registrationReads(
    queueUid: string,
    commitIds: readonly string[],
    slotsOf?: { consumerUid: string; maxConcurrency: number },
  ): Promise<RegistrationReads> {
    const state = deliveryKeys.queueState(queueUid);
    const shards = slotsOf ? this.slotMap.keysFor(slotsOf.consumerUid, slotsOf.maxConcurrency) : [];
    const keys = [state, ...shards, ...[...new Set(commitIds)].map(commitKey)];
    const out: RegistrationReads = { outstanding: 0, committed: new Set() };
    const slotItems: StoredItem[] = [];
    for (const v of await this.consistentBatchGet(keys, 'registration reads')) {
      const commit = commitIdOf(v[PK]);
      if (commit !== undefined) out.committed.add(commit);
      else if (v[PK] === state[PK]) out.outstanding = Number(v.outstanding ?? 0);
      else if (slotsOf && v[PK] === shards[0]?.[PK]) slotItems.push(v);
    }
    if (slotsOf) {
      // A consumer without a slot map holds no slots (as `slots` reads it).
      const slots = await this.slotMap.fromReads(slotsOf.consumerUid, slotItems, shards.length);
      out.slots = slots.slots;
      out.held = Object.keys(slots.slots).length;
      if (slots.recoveredAt !== undefined) out.recoveredAt = slots.recoveredAt;
    }
    return out;
  }

  async getAttempts(queueUid: string, ids: readonly string[]): Promise<Map<string, AttemptsRecord>> {
    const found = new Map<string, AttemptsRecord>();
    const keys = [...new Set(ids)].map((id) => deliveryKeys.attempts(queueUid, id));
    for (const v of await this.consistentBatchGet(keys, 'attempts records')) {
      found.set(v.id, { id: v.id, attempts: v.attempts, notBefore: v.notBefore, acked: v.acked });
    }
    return found;
  }

  /** Consistent reads of up to 100 keys a request; keys DynamoDB leaves unprocessed are asked again. */
  private async consistentBatchGet(keys: Record<string, string>[], what: string): Promise<StoredItem[]> {
    const items: StoredItem[] = [];
    for (let i = 0; i < keys.length; i += BATCH_GET_MAX_KEYS) {
      let ask = keys.slice(i, i + BATCH_GET_MAX_KEYS).map((k) => marshall(k));
      for (let round = 0; ask.length > 0 && round < 10; round++) {
        if (round > 0) await backoff(round); // unprocessed keys: DynamoDB asks to slow down
        const out = await this.client.send(
          new BatchGetItemCommand({ RequestItems: { [this.table]: { Keys: ask, ConsistentRead: true } } }),
        );
        for (const item of out.Responses?.[this.table] ?? []) items.push(unmarshall(item));
        ask = out.UnprocessedKeys?.[this.table]?.Keys ?? [];
      }
      if (ask.length > 0) throw new Error(`${what} could not all be read`);
    }
    return items;
  }

  async putAttempts(queueUid: string, r: AttemptsRecord, expiresAtSeconds: number): Promise<void> {
    const item = marshall(
      { ...deliveryKeys.attempts(queueUid, r.id), ...r, [TTL]: expiresAtSeconds },
      { removeUndefinedValues: true },
    );
    const replace = () =>
      this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        }),
      );
    // Replace an existing record (count unchanged), else create it and count it, in one transaction.
    for (let round = 0; round < CONFLICT_TRIES; round++) {
      if (round > 0) await backoff(round);
      try {
        await replace();
        return;
      } catch (err) {
        if (!isConditionFailure(err)) throw err;
      }
      try {
        await this.client.send(
          new TransactWriteItemsCommand({
            TransactItems: [
              {
                Put: {
                  TableName: this.table,
                  Item: item,
                  ConditionExpression: 'attribute_not_exists(#pk)',
                  ExpressionAttributeNames: { '#pk': PK },
                },
              },
              {
                Update: {
                  TableName: this.table,
                  Key: marshall(deliveryKeys.queueState(queueUid)),
                  UpdateExpression: 'ADD outstanding :one',
                  ExpressionAttributeValues: marshall({ ':one': 1 }),
                },
              },
            ],
          }),
        );
        return;
      } catch (err) {
        // Created meanwhile (replace it), or a conflict or throttle: try again.
        if (!(err instanceof TransactionCanceledException)) throw err;
        const codes = cancellationCodes(err) ?? [];
        if (codes[0] !== 'ConditionalCheckFailed' && !retryable(err, codes)) throw err;
      }
    }
    throw new Error('attempts record kept changing; retry later');
  }

  async clearAttempts(queueUid: string, id: string): Promise<void> {
    for (let round = 1; ; round++) {
      try {
        await this.clearAttemptsOnce(queueUid, id);
        return;
      } catch (err) {
        const codes = cancellationCodes(err);
        if (!codes) throw err;
        if (codes[0] === 'ConditionalCheckFailed') return; // already cleared
        if (!retryable(err, codes) || round >= CONFLICT_TRIES) throw err;
        await backoff(round);
      }
    }
  }

  async putDeadLetterRecords(
    deadLetterQueueUid: string,
    records: { copyId: string; record: DeadLetterRecord }[],
    expiresAtSeconds: number,
  ): Promise<void> {
    for (let i = 0; i < records.length; i += 25) {
      let requests: { PutRequest: { Item: Record<string, AttributeValue> } }[] = records
        .slice(i, i + 25)
        .map(({ copyId, record }) => ({
          PutRequest: {
            Item: marshall({
              ...deadLetterRecordKey(deadLetterQueueUid, copyId),
              ...record,
              [TTL]: expiresAtSeconds,
            }),
          },
        }));
      // What DynamoDB leaves unprocessed (throttling) is sent again, a bounded number of times.
      for (let round = 1; requests.length > 0; round++) {
        const out = await this.client.send(
          new BatchWriteItemCommand({ RequestItems: { [this.table]: requests } }),
        );
        requests = (out.UnprocessedItems?.[this.table] ?? []) as typeof requests;
        if (requests.length > 0 && round >= CONFLICT_TRIES)
          throw new Error(`${requests.length} dead-letter records left unprocessed`);
        if (requests.length > 0) await backoff(round);
      }
    }
  }

  private async clearAttemptsOnce(queueUid: string, id: string): Promise<void> {
    await this.client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            Delete: {
              TableName: this.table,
              Key: marshall(deliveryKeys.attempts(queueUid, id)),
              ConditionExpression: 'attribute_exists(#pk)',
              ExpressionAttributeNames: { '#pk': PK },
            },
          },
          {
            Update: {
              TableName: this.table,
              Key: marshall(deliveryKeys.queueState(queueUid)),
              UpdateExpression: 'ADD outstanding :minus',
              ExpressionAttributeValues: marshall({ ':minus': -1 }),
            },
          },
        ],
      }),
    );
  }
}
