/**
 * The delivery core's DeliveryStore on the one Host table. The slot map answers for slots
 * (`dynamodb-slot-map.ts`); each other responsibility lives in its own module under
 * `delivery-store/`: registration, settlement, batch heads, recent batches, attempts records,
 * dead-letter records and the item codecs. This class binds them to a client and a table.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type {
  AttemptsRecord,
  BatchClose,
  BatchHead,
  DeadLetterRecord,
  DeliveryStore,
  DispatchState,
  GroupSettleResult,
  IdleRelease,
  Manifest,
  RegistrationReads,
  ReleaseClaim,
  ReleaseKind,
  SettleResult,
  SlotAnswer,
  SlotBound,
} from '../../delivery/delivery-store.ts';
import type { SettleCall } from '../../delivery/settlement-protocol.ts';
import { log } from '../../shared/log.ts';
import { claimDueLane, claimWakeStart, endWakeStart, forgetDueLane, readWakes } from './consumer-wakes.ts';
import { clearAttempts, getAttempts, putAttempts } from './delivery-store/attempts.ts';
import {
  claimRelease,
  closeHead,
  fenceRecovery,
  getHead,
  getManifest,
  leaveUnreleased,
  markApplied,
  markDoubtful,
} from './delivery-store/batch-heads.ts';
import { putDeadLetterRecords } from './delivery-store/dead-letter-writes.ts';
import type { DeliveryTable } from './delivery-store/delivery-table.ts';
import { recentlyClosed } from './delivery-store/recent-batches.ts';
import { RecordsWatermark } from './delivery-store/records-watermark.ts';
import {
  cancelBatch,
  createBatch,
  markBatchSlot,
  registrationReads,
  takeBackHead,
} from './delivery-store/registration.ts';
import { settle, settleMany } from './delivery-store/settlement.ts';
import { DynamoSlotMap } from './dynamodb-slot-map.ts';
import { fenceSlotShards } from './slot-fence.ts';
import { type SlotLayout, slotLayout } from './slot-groups.ts';

export { deliveryKeys, manifestOfItem } from './delivery-store/items.ts';
export { COMBINED_SETTLE_MAX } from './delivery-store/settlement.ts';

export class DynamoDeliveryStore implements DeliveryStore {
  private readonly table: DeliveryTable;

  private readonly slotMap: DynamoSlotMap;
  private readonly layout: SlotLayout;
  private readonly watermark: RecordsWatermark;

  /** The slot layout (`slot-groups.ts`): tests and the chaos suite vary it to exercise shards and groups. */
  constructor(
    client: DynamoDBClient,
    tableName: string,
    opts: { slotsPerShard?: number; shardsPerGroup?: number } = {},
  ) {
    this.table = { client, table: tableName };
    this.layout = slotLayout({
      ...(opts.slotsPerShard !== undefined ? { perShard: opts.slotsPerShard } : {}),
      ...(opts.shardsPerGroup !== undefined ? { perGroup: opts.shardsPerGroup } : {}),
    });
    this.slotMap = new DynamoSlotMap(client, tableName, this.layout);
    this.watermark = new RecordsWatermark(this.table);
  }

  // Slots: the slot map (`dynamodb-slot-map.ts`) answers for them.
  initSlots(consumerUid: string): Promise<void> {
    return this.slotMap.init(consumerUid);
  }

  prepareSlots(consumerUid: string, bound: SlotBound, lanes: number): Promise<void> {
    return this.slotMap.prepare(consumerUid, bound, lanes);
  }

  async slots(consumerUid: string): Promise<Record<string, number>> {
    return (await this.slotMap.read(consumerUid)).slots;
  }

  dispatchState(consumerUid: string, enough?: (seen: DispatchState) => boolean): Promise<DispatchState> {
    return enough ? this.slotMap.readUntil(consumerUid, enough) : this.slotMap.read(consumerUid);
  }

  // A take answers the wake count too, read beside it (it lives apart from the slots,
  // `consumer-wakes.ts`): the slot's release then compares counts, so only a send after the take
  // keeps an idle lane, never one a few seconds before it.
  takeSlot(
    consumerUid: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
    spread?: { rank: number },
  ): Promise<SlotAnswer> {
    return this.withWakes(consumerUid, this.slotMap.take(consumerUid, batchId, deadline, bound, spread));
  }

  swapSlot(
    consumerUid: string,
    previous: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
  ): Promise<SlotAnswer> {
    return this.withWakes(consumerUid, this.slotMap.swap(consumerUid, previous, batchId, deadline, bound));
  }

  private async withWakes(consumerUid: string, take: Promise<SlotAnswer>): Promise<SlotAnswer> {
    const { client, table } = this.table;
    // The read never fails the take: a slot taken while its answer is thrown away would be held,
    // unused, until its deadline. Without the count, the slot's release compares times instead.
    // It also shows a wake's start lease, which a taken slot ends: the lane is receiving now.
    const [answer, wakes] = await Promise.all([
      take,
      readWakes(client, table, consumerUid).catch((err: unknown) => {
        log.warn('could not read the wake count beside a take; its release compares times', {
          consumerUid,
          err,
        });
        return undefined;
      }),
    ]);
    if (answer.taken && wakes?.starting !== undefined) {
      await endWakeStart(client, table, consumerUid).catch((err: unknown) =>
        // It lapses by itself; until then a send to this consumer leaves the lane to this one.
        log.warn('could not end a wake’s start lease after a take', { consumerUid, err }),
      );
    }
    if (!wakes) return answer;
    const due = wakes.dueLaneAt !== undefined ? { dueLaneAt: wakes.dueLaneAt } : {};
    return { ...answer, state: { ...answer.state, wakes: wakes.wakes, ...due } };
  }

  async releaseSlot(
    consumerUid: string,
    batchId: string,
    opts: { recoveredAt?: number } = {},
  ): Promise<void> {
    await this.slotMap.release(consumerUid, batchId, opts.recoveredAt);
  }

  releaseIdle(consumerUid: string, batchId: string): Promise<IdleRelease> {
    return this.slotMap.releaseIdle(consumerUid, batchId);
  }

  /** One lane start per consumer for messages due at `at` (epoch s) (`DueLaneClaims`). */
  claimDueLane(consumerUid: string, at: number, coverSeconds: number): Promise<boolean> {
    return claimDueLane(this.table.client, this.table.table, consumerUid, at, coverSeconds);
  }

  forgetDueLane(consumerUid: string, at: number): Promise<void> {
    return forgetDueLane(this.table.client, this.table.table, consumerUid, at);
  }

  claimStart(consumerUid: string, now: number, leaseMs: number): Promise<boolean> {
    return claimWakeStart(this.table.client, this.table.table, consumerUid, now, leaseMs);
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

  async revokeUnregistered(consumerUid: string): Promise<number> {
    const revoked = await this.slotMap.revokeUnregistered(consumerUid);
    // A runner lost between a head and its mark in one of them left a batch that never starts.
    for (const batchId of revoked) await takeBackHead(this.table, batchId);
    return revoked.length;
  }

  async fenceGenerations(consumerUid: string, closedBelow: number, maxConcurrency: number): Promise<void> {
    const { client, table } = this.table;
    await fenceSlotShards(client, table, consumerUid, closedBelow, maxConcurrency, this.layout);
  }

  // Registration.
  createBatch(head: BatchHead, manifest: Manifest): Promise<boolean> {
    return createBatch(this.table, this.slotMap, head, manifest);
  }

  markBatchSlot(head: BatchHead): Promise<boolean> {
    return markBatchSlot(this.table, this.slotMap, head);
  }

  takeBackHead(batchId: string): Promise<void> {
    return takeBackHead(this.table, batchId);
  }

  cancelBatch(consumerUid: string, batchId: string): Promise<boolean> {
    return cancelBatch(this.table, this.slotMap, consumerUid, batchId);
  }

  registrationReads(
    queueUid: string,
    commitIds: readonly string[],
    slotsOf?: { consumerUid: string; maxConcurrency: number },
  ): Promise<RegistrationReads> {
    return registrationReads(this.table, this.slotMap, this.watermark, queueUid, commitIds, slotsOf);
  }

  // Batch heads.
  getHead(batchId: string): Promise<BatchHead | undefined> {
    return getHead(this.table, batchId);
  }

  getManifest(head: Pick<BatchHead, 'batchId' | 'manifestRef'>): Promise<Manifest | undefined> {
    return getManifest(this.table, head);
  }

  markDoubtful(batchId: string): Promise<void> {
    return markDoubtful(this.table, batchId);
  }

  async closeBatch(batchId: string, outcome: string, close: BatchClose): Promise<BatchHead | undefined> {
    const out = await closeHead(this.table, batchId, outcome, close);
    // Closed already (by this step's earlier attempt, or by recovery): the head as it is.
    return out.closed ? out.head : this.getHead(batchId);
  }

  markApplied(
    batchId: string,
    pendingDeadLetter: string[],
    opts: { unlessRecovering?: boolean } = {},
  ): Promise<boolean> {
    return markApplied(this.table, batchId, pendingDeadLetter, opts);
  }

  fenceRecovery(batchId: string): Promise<BatchHead | undefined> {
    return fenceRecovery(this.table, batchId);
  }

  claimRelease(
    batchId: string,
    kind: ReleaseKind,
    token: string,
    opts: { takeOver?: boolean } = {},
  ): Promise<ReleaseClaim> {
    return claimRelease(this.table, batchId, kind, token, opts.takeOver === true);
  }

  leaveUnreleased(batchId: string, kind: ReleaseKind, token: string, items: string[]): Promise<void> {
    return leaveUnreleased(this.table, batchId, kind, token, items);
  }

  recentlyClosed(consumerUid: string, limit: number, since: number): Promise<BatchHead[]> {
    return recentlyClosed(this.table, consumerUid, limit, since);
  }

  // Settlement.
  settle(batchId: string, credentialHash: string, call: SettleCall): Promise<SettleResult> {
    return settle(this.table, batchId, credentialHash, call);
  }

  settleMany(batchId: string, credentialHash: string, calls: SettleCall[]): Promise<GroupSettleResult[]> {
    // Through `this.settle`, so a call settled alone goes where a single settlement goes.
    return settleMany(this.table, batchId, credentialHash, calls, (call) =>
      this.settle(batchId, credentialHash, call),
    );
  }

  // Attempts records and dead-letter records.
  getAttempts(queueUid: string, ids: readonly string[]): Promise<Map<string, AttemptsRecord>> {
    return getAttempts(this.table, queueUid, ids);
  }

  putAttempts(queueUid: string, r: AttemptsRecord, expiresAtSeconds: number): Promise<boolean> {
    return putAttempts(this.table, this.watermark, queueUid, r, expiresAtSeconds);
  }

  clearAttempts(queueUid: string, id: string): Promise<void> {
    return clearAttempts(this.table, queueUid, id);
  }

  putDeadLetterRecords(
    deadLetterQueueUid: string,
    records: { copyId: string; record: DeadLetterRecord }[],
    expiresAtSeconds: number,
  ): Promise<void> {
    return putDeadLetterRecords(this.table, deadLetterQueueUid, records, expiresAtSeconds);
  }
}
