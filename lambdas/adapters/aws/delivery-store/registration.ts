/**
 * Registering a batch: its manifest, then its head, then the slot's `registered` mark — three
 * plain writes in that order — and the reads registration makes first (queue state, commits,
 * slots) in one batch.
 */
import { createHash } from 'node:crypto';
import { DeleteItemCommand, PutItemCommand, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { BatchHead, Manifest, RegistrationReads } from '../../../delivery/delivery-store.ts';
import { BatchRegisteredAlready, ManifestNotWritten } from '../../../delivery/delivery-store.ts';
import { log } from '../../../shared/log.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { commitIdOf, commitKey, onlyCopiesOf } from '../dynamodb-commit-store.ts';
import {
  backoff,
  CONFLICT_TRIES,
  conditionalUpdate,
  isConditionFailure,
} from '../dynamodb-conditional-update.ts';
import type { DynamoSlotMap } from '../dynamodb-slot-map.ts';
import { encodeManifest } from '../manifest-codec.ts';
import { registerUpdate, unregisterAction } from '../slot-fence.ts';
import { shardOf } from '../slot-shards.ts';
import { cancellationCodes, consistentBatchGet, type DeliveryTable, retryable } from './delivery-table.ts';
import { BATCH_RETENTION_SECONDS, deliveryKeys } from './items.ts';
import { RECENT_INDEX, recentPartition } from './recent-batches.ts';
import type { RecordsWatermark } from './records-watermark.ts';

const { pk: PK, ttl: TTL } = TABLE_KEYS;

/**
 * The three writes, and why each comes where it does:
 * - the manifest (every receipt handle: the largest item of a batch) first: a head never exists
 *   without its manifest, and a manifest whose write failed (or whose answer was lost) is named
 *   by no head, so it counts no delivery. Its key is its content's hash, which the head names: a
 *   replayed registration writes another item (or the same bytes again), never over the manifest
 *   of a head that exists. (Written beside the head, a lost answer of the manifest's write left a
 *   head naming a manifest of a batch that never ran: chaos seed 30.)
 * - the head, on condition that none exists: of two runners of one slot (a duplicate
 *   InvokeWorker) exactly one writes it;
 * - the slot's mark, on condition that the slot is still held and no stop or update fenced its
 *   generation off (`slot-fence.ts`). Refused, the head is taken back and the batch never starts.
 * No handler runs before all three are written, so a head with no mark is a batch that never
 * started (its slot ends unregistered, its messages return by their short visibility) and a mark
 * always has its head. As a transaction, head and mark cost 4 WRU a batch; as two writes, 2.
 */
export async function createBatch(
  t: DeliveryTable,
  slotMap: DynamoSlotMap,
  batchHead: BatchHead,
  manifest: Manifest,
): Promise<boolean> {
  const bytes = encodeManifest(manifest);
  const manifestRef = createHash('sha256').update(bytes).digest('base64url').slice(0, 22);
  const head: BatchHead = { ...batchHead, manifestRef };
  const expires = Math.ceil(head.invisibleUntil / 1000) + BATCH_RETENTION_SECONDS;
  try {
    await t.client.send(
      new PutItemCommand({
        TableName: t.table,
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
  if (!(await putHead(t, head, expires))) throw new BatchRegisteredAlready(head.batchId);
  return markBatchSlot(t, slotMap, head);
}

/** The slot's mark (`markSlot`); refused, the head is taken back (`DeliveryStore.markBatchSlot`). */
export async function markBatchSlot(
  t: DeliveryTable,
  slotMap: DynamoSlotMap,
  head: BatchHead,
): Promise<boolean> {
  if (await markSlot(t, slotMap, head)) return true;
  await takeBackHead(t, head.batchId, head.credentialHash);
  return false;
}

/**
 * Writes the head unless one exists. One that exists may be this call's own earlier try, whose
 * answer was lost (the SDK retried it): registration tells (`registration-repeat.ts`), and
 * answers as that try would have, with the head's own deadline.
 */
async function putHead(t: DeliveryTable, head: BatchHead, expires: number): Promise<boolean> {
  const Item = marshall(
    {
      ...deliveryKeys.head(head.batchId),
      ...head,
      [RECENT_INDEX.pk]: recentPartition(head.consumerUid, head.batchId),
      [TTL]: expires,
    },
    { removeUndefinedValues: true },
  );
  for (let round = 1; ; round++) {
    try {
      await t.client.send(
        new PutItemCommand({
          TableName: t.table,
          Item,
          ConditionExpression: 'attribute_not_exists(#pk)',
          ExpressionAttributeNames: { '#pk': PK },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      if (!retryable(err) || round >= CONFLICT_TRIES) throw err;
      await backoff(round);
    }
  }
}

/**
 * Marks the slot as holding the registered batch `head`, with the batch's deadline: true once it
 * does (now, or by an earlier try whose answer was lost), false when the slot was revoked,
 * recovered or fenced off. Safe to repeat.
 */
async function markSlot(
  t: DeliveryTable,
  slotMap: DynamoSlotMap,
  head: Pick<BatchHead, 'consumerUid' | 'batchId' | 'generation' | 'deadline'>,
): Promise<boolean> {
  const out = await conditionalUpdate(
    t.client,
    t.table,
    slotMap.keyOf(head.consumerUid, shardOf(head.batchId)),
    {
      ...registerUpdate(head.batchId, head.generation, head.deadline),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    },
  );
  if (out.ok) return true;
  const old = out.old as
    | { registered?: Record<string, unknown>; slots?: Record<string, unknown> }
    | undefined;
  return old?.registered?.[head.batchId] === true && old.slots?.[head.batchId] !== undefined;
}

/**
 * Takes back the open head of a batch that never started (its slot refused the mark, or was
 * freed unmarked), this registration's own when `credentialHash` is given. If it cannot, the head
 * stays open and unmarked, which no recovery, settlement or listing reads, until it expires.
 */
export async function takeBackHead(
  t: DeliveryTable,
  batchId: string,
  credentialHash?: string,
): Promise<void> {
  const ours = credentialHash === undefined ? '' : ' AND credentialHash = :h';
  await t.client
    .send(
      new DeleteItemCommand({
        TableName: t.table,
        Key: marshall(deliveryKeys.head(batchId)),
        ConditionExpression: `closed = :false${ours}`,
        ExpressionAttributeValues: marshall({
          ':false': false,
          ...(credentialHash === undefined ? {} : { ':h': credentialHash }),
        }),
      }),
    )
    .catch((err: unknown) => {
      if (isConditionFailure(err)) return;
      log.warn('could not take back the head of a batch that never started; it expires', { batchId, err });
    });
}

/**
 * Takes a registration back before its credential left the Host (`DeliveryStore.cancelBatch`):
 * the head and the slot go in one transaction, on condition that the batch is still open. Its
 * manifest is named by no head then, and expires.
 */
export async function cancelBatch(
  t: DeliveryTable,
  slotMap: DynamoSlotMap,
  consumerUid: string,
  batchId: string,
): Promise<boolean> {
  for (let round = 1; ; round++) {
    try {
      await t.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Delete: {
                TableName: t.table,
                Key: marshall(deliveryKeys.head(batchId)),
                ConditionExpression: 'closed = :false',
                ExpressionAttributeValues: marshall({ ':false': false }),
              },
            },
            unregisterAction(t.table, slotMap.keyOf(consumerUid, shardOf(batchId)), batchId),
          ],
          ClientRequestToken: createHash('sha256')
            .update(`cancel:${batchId}`)
            .digest('base64url')
            .slice(0, 36),
        }),
      );
      return true;
    } catch (err) {
      const codes = cancellationCodes(err);
      if (codes?.includes('ConditionalCheckFailed')) return false;
      if (!retryable(err, codes) || round >= CONFLICT_TRIES) throw err;
      await backoff(round);
    }
  }
}

export async function registrationReads(
  t: DeliveryTable,
  slotMap: DynamoSlotMap,
  watermark: RecordsWatermark,
  queueUid: string,
  commitIds: readonly string[],
  slotsOf?: { consumerUid: string; maxConcurrency: number },
): Promise<RegistrationReads> {
  const state = deliveryKeys.queueState(queueUid);
  const keys = [state, ...[...new Set(commitIds)].map(commitKey)];
  const out: RegistrationReads = { outstanding: 0, committed: new Set() };
  // Every slot of the consumer: one Query per group of its shards, beside the batch read (a
  // Query costs the bytes it returns; the same items in the batch would cost a unit each).
  const [items, slots] = await Promise.all([
    consistentBatchGet(t, keys, 'registration reads'),
    slotsOf ? slotMap.read(slotsOf.consumerUid, slotsOf.maxConcurrency) : undefined,
  ]);
  for (const v of items) {
    const commit = commitIdOf(v[PK]);
    if (commit !== undefined) {
      out.committed.add(commit);
      const copies = onlyCopiesOf(v);
      if (copies) {
        out.onlyCopies ??= new Map();
        out.onlyCopies.set(commit, copies);
      }
    } else if (v[PK] === state[PK]) out.outstanding = watermark.mayHoldRecords(v, Date.now()) ? 1 : 0;
  }
  if (slots) {
    out.slots = slots.slots;
    out.registered = slots.registered;
    out.held = Object.keys(slots.slots).length;
    if (slots.recoveredAt !== undefined) out.recoveredAt = slots.recoveredAt;
  }
  return out;
}
