/**
 * Registering a batch: its manifest, then its head with the slot's `registered` mark in one
 * transaction; and the reads registration makes first (queue state, commits, slots) in one batch.
 */
import { createHash } from 'node:crypto';
import {
  PutItemCommand,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { BatchHead, Manifest, RegistrationReads } from '../../../delivery/delivery-store.ts';
import { BatchRegisteredAlready, ManifestNotWritten } from '../../../delivery/delivery-store.ts';
import { TABLE_KEYS } from '../../../shared/table-schema.ts';
import { commitIdOf, commitKey, onlyCopiesOf } from '../dynamodb-commit-store.ts';
import { backoff, CONFLICT_TRIES } from '../dynamodb-conditional-update.ts';
import type { DynamoSlotMap } from '../dynamodb-slot-map.ts';
import { encodeManifest } from '../manifest-codec.ts';
import { registerAction, unregisterAction } from '../slot-fence.ts';
import { shardOf } from '../slot-shards.ts';
import { cancellationCodes, consistentBatchGet, type DeliveryTable, retryable } from './delivery-table.ts';
import { BATCH_RETENTION_SECONDS, deliveryKeys } from './items.ts';
import { RECENT_INDEX, recentPartition } from './recent-batches.ts';
import type { RecordsWatermark } from './records-watermark.ts';

const { pk: PK, ttl: TTL } = TABLE_KEYS;

type TransactItems = NonNullable<TransactWriteItemsCommandInput['TransactItems']>;

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
  const items: TransactItems = [
    {
      Put: {
        TableName: t.table,
        Item: marshall(
          {
            ...deliveryKeys.head(head.batchId),
            ...head,
            [RECENT_INDEX.pk]: recentPartition(head.consumerUid, head.batchId),
            [TTL]: expires,
          },
          { removeUndefinedValues: true },
        ),
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': PK },
      },
    },
    // The slot, on condition that it was neither revoked nor fenced off by a stop or an update
    // since it was taken (`slot-fence.ts`): the generation is checked on the shard item this
    // write names anyway, never on an item every registration of the consumer shares.
    registerAction(
      t.table,
      slotMap.keyOf(head.consumerUid, shardOf(head.batchId)),
      head.batchId,
      head.generation,
      head.deadline,
    ),
  ];
  // The manifest (every receipt handle: the largest item of a batch) is a plain write, at half
  // a transactional write's cost, made before the transaction: a head never exists without its
  // manifest, and a manifest whose write failed (or whose answer was lost) is named by no head,
  // so it counts no delivery. Its key is its content's hash, which the head names: a replayed
  // registration writes another item (or the same bytes again), never over the manifest of a
  // head that exists. (Written beside the transaction, a lost answer of the manifest's write
  // left a head naming a manifest of a batch that never ran: chaos seed 30.)
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
  return registerHead(t, head, items);
}

/** The head and the slot's `registered` mark in one transaction (see `createBatch`). */
async function registerHead(t: DeliveryTable, head: BatchHead, items: TransactItems): Promise<boolean> {
  // One transaction, so a handler never runs without the records that settle and recover it
  // (a BatchWriteItem may leave items unprocessed under throttling). The token makes a retry of
  // a transaction that committed but whose answer was lost (a connection that dropped) succeed
  // instead of failing its conditions against its own writes.
  const ClientRequestToken = createHash('sha256').update(head.batchId).digest('base64url').slice(0, 36);
  for (let round = 1; ; round++) {
    try {
      await t.client.send(
        new TransactWriteItemsCommand({
          TransactItems: items,
          ClientRequestToken,
        }),
      );
      return true;
    } catch (err) {
      const codes = cancellationCodes(err);
      // The head exists: registered before (a repeated registration, never this call's own
      // retry, which the token makes succeed).
      if (
        codes?.[0] === 'ConditionalCheckFailed' ||
        (err as Error)?.name === 'IdempotentParameterMismatchException'
      ) {
        throw new BatchRegisteredAlready(head.batchId);
      }
      if (codes?.[1] === 'ConditionalCheckFailed') return false;
      if (!retryable(err, codes) || round >= CONFLICT_TRIES) throw err;
      await backoff(round);
    }
  }
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
