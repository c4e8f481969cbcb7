/**
 * The Host side of delivery, as the control loop, the batch host and the Forms reach it. It
 * composes the parts, each in its own module: slots (slots.ts), registration (registration.ts),
 * settlement (settlement.ts), finalisation (finalization.ts), dead-letter moves
 * (dead-letter-moves.ts) and recovery (batch-recovery.ts), over the context they share
 * (delivery-context.ts).
 */
import type { ConsumerSpec } from '../forms/queue-consumer/consumer-spec.ts';
import { BatchRecovery, type RecoverOptions } from './batch-recovery.ts';
import { type DeadLetterItem, DeadLetterMoves } from './dead-letter-moves.ts';
import { type DeferItem, Deferrals } from './deferrals.ts';
import { DeliveryContext, type DeliveryServiceOptions } from './delivery-context.ts';
import type { DispatchState, SlotBound } from './delivery-store.ts';
import { type Finalized, type FinalizeOptions, Finalizer } from './finalization.ts';
import type { BatchBounds, LaneKind } from './lane-kinds.ts';
import { type Received, type RegisterOptions, Registrar, type Registration } from './registration.ts';
import { Settlements } from './settlement.ts';
import type { HandlerError, InvocationOutcome, SettleAnswer, SettleCall } from './settlement-protocol.ts';
import { type AcquireResult, type InheritedLane, REGISTER_ROOM_MS, type Slot, SlotDesk } from './slots.ts';
import type { UnfinishedBatch } from './unfinished-batch.ts';

export type { DeadLetterItem } from './dead-letter-moves.ts';
export type { DeliveryEvents, DeliveryServiceOptions } from './delivery-context.ts';
export type { Finalized, FinalizeOptions } from './finalization.ts';
export type { Received, RegisterOptions, Registration, SealedManifest } from './registration.ts';
export {
  type AcquireResult,
  INHERITED_LANE_MAX_AGE_MS,
  type InheritedLane,
  nextBatchId,
  REGISTER_ROOM_MS,
  type Slot,
  type SlotSnapshot,
} from './slots.ts';
export type { ConsumerSpec };

/**
 * The Host side of delivery: concurrency slots, batch registration with exact attempt counts,
 * first-wins settlement, finalisation and dead-lettering. The Step Functions tasks and the local
 * runner call these methods; the worker never touches the Host's tables.
 *
 * What a runner says is never taken on trust: registration takes only the slot id from it, and
 * every later call needs the batch credential and acts only on what registration recorded (ids,
 * attempts, receipt handles). Only message bodies come from the runner, which alone holds them.
 */
export class DeliveryService {
  private readonly c: DeliveryContext;
  private readonly slots: SlotDesk;
  private readonly registrar: Registrar;
  private readonly settlements: Settlements;
  private readonly finalizer: Finalizer;
  private readonly moves: DeadLetterMoves;
  private readonly deferrals: Deferrals;
  private readonly recovery: BatchRecovery;

  constructor(opts: DeliveryServiceOptions) {
    this.c = new DeliveryContext(opts, (consumerUid, batchId, o) =>
      this.recoverBatch(consumerUid, batchId, o),
    );
    this.slots = new SlotDesk(this.c);
    this.registrar = new Registrar(this.c, this.slots);
    this.settlements = new Settlements(this.c);
    this.finalizer = new Finalizer(this.c, this.slots);
    this.moves = new DeadLetterMoves(this.c);
    this.deferrals = new Deferrals(this.c);
    this.recovery = new BatchRecovery({
      store: this.c.o.store,
      now: () => this.c.now(),
      finalize: (batchId, outcome, opts) => this.finalize(batchId, outcome, 'recovery', undefined, opts),
    });
  }

  /** The credential of a batch: unguessable without the Host's key (DL-09). */
  credentialOf(batchId: string): string {
    return this.c.credentialOf(batchId);
  }

  /** Whether `credential` is the one the Host derived for `batchId` (constant time). */
  credentialMatches(batchId: string, credential: string): boolean {
    return this.slots.credentialMatches(batchId, credential);
  }

  /** AcquireSlot, a lane's first slot of a worker invocation (`SlotDesk.acquire`). */
  acquire(
    consumerUid: string,
    generation: number,
    inherited?: unknown,
    batchId?: string,
  ): Promise<AcquireResult> {
    return this.slots.acquire(consumerUid, generation, inherited, batchId);
  }

  /** AcquireSlot in an Express lane: a slot only while a whole batch still fits its window. */
  acquireWithin(
    consumerUid: string,
    generation: number,
    inherited: unknown,
    until: number,
    batchId?: string,
  ) {
    return this.slots.acquireWithin(consumerUid, generation, inherited, until, batchId);
  }

  /** The kind of lane a consumer runs on, from a slot or lane context of it. */
  laneKindOf(bounds: BatchBounds): LaneKind {
    return this.slots.laneKindOf(bounds);
  }

  /** How long a lane that finds its queue empty keeps polling before it rests. */
  get idleWaitSeconds(): number {
    return this.c.o.idleWaitSeconds;
  }

  /**
   * How long before its deadline a slot that holds no batch has stopped receiving: its gathering
   * deadline leaves room to register and a margin after the receive window (`gatheringDeadline`).
   */
  get receiveTailMs(): number {
    return REGISTER_ROOM_MS + this.c.o.slotMarginMs;
  }

  /** The context to seal into the input of a lane started from this slot's lane. */
  inheritableLane(slot: Slot): InheritedLane | undefined {
    return this.slots.inheritableLane(slot);
  }

  /** Fresh lane contexts, sealed for the lanes a supervisor round is about to start. */
  sealedCohort(consumerUid: string, generation: number, size: number): Promise<InheritedLane[] | undefined> {
    return this.slots.sealedCohort(consumerUid, generation, size);
  }

  /** A lane's next slot in the same invocation, proven by the batch it just ran. */
  acquireNext(previous: Slot, credential: string): Promise<AcquireResult> {
    return this.slots.acquireNext(previous, credential);
  }

  /** Registers what a lane received as a batch (`Registrar.register`). */
  register(claimed: Slot, received: Received[], opts: RegisterOptions = {}): Promise<Registration> {
    return this.registrar.register(claimed, received, opts);
  }

  /** One settlement call from a worker (DL-03, DL-04, DL-08, DL-09). */
  settle(batchId: string, credential: string, call: SettleCall): Promise<void> {
    return this.settlements.settle(batchId, credential, call);
  }

  /** A group of settlement calls of one batch, applied in order. */
  settleMany(batchId: string, credential: string, calls: SettleCall[]): Promise<SettleAnswer[]> {
    return this.settlements.settleMany(batchId, credential, calls);
  }

  /** Finalisation requested by a runner: only with the batch's credential. */
  finalizeAsRunner(
    batchId: string,
    credential: string,
    outcome: InvocationOutcome,
    opts: FinalizeOptions = {},
  ): Promise<Finalized> {
    return this.finalizer.finalizeAsRunner(batchId, credential, outcome, opts);
  }

  /** Closes the batch and applies every decision (`Finalizer.finalize`). */
  finalize(
    batchId: string,
    outcome: InvocationOutcome,
    mode: 'live' | 'recovery',
    error?: HandlerError,
    opts: { claimantsGone?: boolean } = {},
  ): Promise<{ deadLetter: string[] }> {
    return this.finalizer.finalize(batchId, outcome, mode, error, opts);
  }

  /** The runner's half of a dead-letter move: the bodies of messages the Host asked to move. */
  deadLetterAsRunner(
    batchId: string,
    credential: string,
    items: DeadLetterItem[],
    last: boolean,
  ): Promise<void> {
    return this.moves.deadLetterAsRunner(batchId, credential, items, last);
  }

  /** The runner's half of a deferral: bodies of messages registration found due much later. */
  deferAsRunner(slot: Slot, items: DeferItem[]): Promise<{ deferred: number }> {
    return this.deferrals.deferAsRunner(slot, items);
  }

  /** Recovery of lost batches (`batch-recovery.ts`): at their deadline, a failed lane, a restart. */
  recoverExpired(consumerUid: string, opts?: { bound?: number }): Promise<number> {
    return this.recovery.recoverExpired(consumerUid, opts);
  }

  recoverAfterRestart(): Promise<number> {
    return this.recovery.recoverAfterRestart();
  }

  recoverBatch(consumerUid: string, batchId: string, opts?: RecoverOptions): Promise<{ heldUntil?: number }> {
    return this.recovery.recoverBatch(consumerUid, batchId, opts);
  }

  recoverLane(
    consumerUid: string,
    batchId: string,
    unfinished?: UnfinishedBatch,
  ): Promise<{ heldUntil?: number }> {
    return this.recovery.recoverLane(consumerUid, batchId, unfinished);
  }

  /** The consumer's slot map, registered marks and wake count (for the control loop). */
  dispatchState(consumerUid: string, enough?: (seen: DispatchState) => boolean) {
    return this.c.o.store.dispatchState(consumerUid, enough);
  }

  /** Before `lanes` lanes of a cohort start: the slot map is ready for their takes. */
  prepareSlots(consumerUid: string, bound: SlotBound, lanes: number): Promise<void> {
    return this.c.o.store.prepareSlots(consumerUid, bound, lanes);
  }

  /** Counts a send through the Host to the consumer's queue; returns the state after it. */
  countWake(consumerUid: string) {
    return this.c.o.store.wake(consumerUid, this.c.now());
  }

  /** One wake at a time starts a lane: the lease lasts until that lane takes a slot. */
  claimStart(consumerUid: string, leaseMs: number) {
    return this.c.o.store.claimStart(consumerUid, this.c.now(), leaseMs);
  }

  /** The running batches of a consumer and their deadlines (for operators and tests). */
  slotsOf(consumerUid: string): Promise<Record<string, number>> {
    return this.c.o.store.slots(consumerUid);
  }

  /**
   * Frees the consumer's slots that hold no batch (a generation about to be replaced: none of its
   * slots can hold one afterwards). A registration that wins the race keeps its slot.
   */
  async freeUnregistered(consumerUid: string): Promise<void> {
    await this.c.o.store.revokeUnregistered(consumerUid);
  }

  /**
   * Keeps generations below `closedBelow` from registering any batch from now on: an update's
   * replaced generation, or every generation at a stop (`STOPPED`).
   */
  fenceGenerations(consumerUid: string, closedBelow: number, maxConcurrency: number): Promise<void> {
    return this.c.o.store.fenceGenerations(consumerUid, closedBelow, maxConcurrency);
  }

  /** Batches that started and have not ended (QC-08): expired ones are recovered first. */
  async inFlightBatches(consumerUid: string): Promise<number> {
    await this.recoverExpired(consumerUid);
    await this.c.o.store.revokeUnregistered(consumerUid);
    return Object.keys(await this.c.o.store.slots(consumerUid)).length;
  }
}
