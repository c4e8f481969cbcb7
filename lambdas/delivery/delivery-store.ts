import { NamedError } from './limits.ts';
import type { OnlyCopies } from './ports.ts';
import type { HandlerError, SettleCall } from './settlement-protocol.ts';

/** A settlement code in a batch head: `a` acknowledged, `r` retry with the consumer's delay, `r<n>` retry after n s. */
export type SettlementCode = 'a' | `r${string}`;

export function codeOf(call: SettleCall): SettlementCode {
  if (call.kind === 'ack' || call.kind === 'ackAll') return 'a';
  return call.delaySeconds === undefined ? 'r' : `r${call.delaySeconds}`;
}

/**
 * One received message as the manifest keeps it: no body, but the receipt handles of every copy
 * SQS handed to this batch (a duplicate receive rides with its first copy), so the Host itself —
 * not the runner — can delete, re-hide or return it, also when the runner is gone.
 */
export interface ManifestEntry {
  id: string;
  ts: number;
  attempts: number;
  /** Whether an attempts record existed at delivery (it must be cleared when the message ends). */
  hadRecord: boolean;
  /** Receipt handles of this batch's copies. Absent only in manifests of older Host versions. */
  handles?: string[];
  /** When the runner received the first copy (SQS's 12-hour visibility bound counts from it). */
  receivedAt?: number;
}

/**
 * The Host's own record of one message it moved to a dead-letter queue: where it came from and
 * why. Kept in the Host's table, never in the copy's body, so the batch object a dead-letter
 * consumer's handler sees stays exactly as the Form specifies.
 */
export interface DeadLetterRecord {
  /** The queue Resource the message ran out of retries on, and its name then. */
  sourceQueueUid: string;
  sourceQueueName: string;
  /** The message id it had there (the copy has a new id). */
  originalId: string;
  /** Deliveries counted there (1 + maxRetries). */
  attempts: number;
  /** How its last delivery ended: the batch outcome and this message's settlement, e.g. `threw`, `returned/retry`. */
  lastOutcome: string;
  /** When the copy was sent, epoch ms. */
  movedAt: number;
}

/** What registration recorded for a batch: the delivered messages and the dead-letter moves. */
export interface Manifest {
  /** Delivered, in batch order (settlement indexes). */
  entries: ManifestEntry[];
  /** Received with their last delivery already made: moved with the bodies the runner holds. */
  moves: ManifestEntry[];
}

export interface BatchClose {
  at: number;
  credentialHash?: string;
  error?: HandlerError;
}

export interface BatchHead {
  batchId: string;
  consumerUid: string;
  queueUid: string;
  generation: number;
  credentialHash: string;
  /** Delivered messages (settlement indexes are 0..size-1). */
  size: number;
  closed: boolean;
  outcome: string | undefined;
  applied: boolean;
  /** Per-message settlements by index. */
  settled: Record<string, SettlementCode>;
  /** A batch-level settlement covering every index not in `settled`. */
  all: SettlementCode | undefined;
  deadline: number;
  /** Until then the batch's messages stay invisible (receipt handles stay valid). */
  invisibleUntil: number;
  /** Set when a settlement write may have failed: the remainder is then never implicitly acked (DL-08). */
  doubtful: boolean;
  /** Decisions applied except these dead-letter moves (message ids), which still need the bodies. */
  pendingDeadLetter: string[];
  /**
   * A recovery took the batch over (`fenceRecovery`): a runner still at work on it may no longer
   * take moves on (`markApplied` with `unlessRecovering`), and those it made keep their records.
   */
  recovering?: boolean;
  /** What registration knew of the batch, for operators' recent batches (heads of older Hosts: none). */
  digest?: BatchDigest;
  /** Which manifest item is this batch's: the store names it by its content (heads of older Hosts: none). */
  manifestRef?: string;
  /** Set by the close: when, by whom (the runner with its credential, or the Host), the handler's error. */
  closedAt?: number;
  closedBy?: 'runner' | 'host';
  error?: HandlerError;
}

/**
 * The part of a batch's summary that does not depend on its settlements: with the head's
 * settlements it gives the batch's line in consumer state without reading the manifest.
 */
export interface BatchDigest {
  /** Delivered plus moved on receipt. */
  messages: number;
  moves: number;
  /** Delivered messages (indexes) on their last attempt: not acknowledged, they are out of retries. */
  lastTry: number[];
  attempts: { min: number; max: number } | null;
  /** Earliest receive among its messages, epoch ms; null when none was timed. */
  firstReceivedAt: number | null;
}

/** What a finalisation releases with a batch's handles: its retried messages, or the moves it owed. */
export type ReleaseKind = 'retried' | 'owed';

/** A claim on a batch's release (`DeliveryStore.claimRelease`); items name a handle as `<id>:<copy>`. */
export type ReleaseClaim = { release: 'all' } | { release: 'some'; items: string[] } | { release: 'none' };

/** Per-message delivery state kept only while needed (after a retry or an unclean end). */
export interface AttemptsRecord {
  id: string;
  attempts: number;
  notBefore?: number;
  /** The message was acknowledged but its SQS copy may still come back: delete it on sight. */
  acked?: boolean;
}

/**
 * A consumer's slots (`DISPATCH#` items: one, or shards of at most ten slots each). `wakes`
 * counts sends through the Host (kept apart from the slots, answered by `wake` only): a lane that
 * found its queue empty ends only if no wake came after it took its slot, so a send racing a
 * lane's idle end is never left for the supervisor.
 */
export interface DispatchState {
  slots: Record<string, number>;
  registered: Record<string, boolean>;
  /** The wake count, in the answers of `wake` and of a take (read beside the take's write). */
  wakes?: number;
  /** A lane started by a wake has not taken its slot yet (until then; a lease). */
  starting?: number;
  /** When the last wake was counted (epoch ms, the waker's clock). */
  lastWakeAt?: number;
  /**
   * The second (epoch s) the last lane for messages due later was claimed for, in a take's
   * answer: lanes polling then watch the queue for the claim's window (`SlotSnapshot.watchUntil`).
   */
  dueLaneAt?: number;
  /** When a recovery last freed a slot in the shards answered (epoch ms, the recovery's clock). */
  recoveredAt?: number;
  /** The answer of a write: it shows the shard written, not every slot of the consumer. */
  partial?: true;
}

/**
 * What a take or hand-over is bounded by: its consumer generation and that generation's
 * maxConcurrency. Slots of every generation count against it (an update that lowers the bound
 * starts nothing while the old generation's batches fill it).
 */
export interface SlotBound {
  max: number;
  generation: number;
}

/** A take's or hand-over's answer: whether it took the slot, as which batch id, and the state seen. */
export interface SlotAnswer {
  taken: boolean;
  state: DispatchState;
  /** The batch id as held: a slot's shard is part of its id. */
  batchId: string;
}

export type SettleResult = 'ok' | 'already_settled' | 'unknown_batch';
/**
 * One call of a group as the store applied it: `write_failed` when its write failed (its outcome
 * is unknown) or was not attempted because an earlier write of the group failed.
 */
export type GroupSettleResult = SettleResult | 'write_failed';

/** What a registration reads before it decides (`DeliveryStore.registrationReads`). */
export interface RegistrationReads {
  /** Above 0 while the queue may hold attempts records (the received messages' are then read). */
  outstanding: number;
  committed: Set<string>;
  /** The copies those commits name (`OnlyCopies`) by commit id, when any does. */
  onlyCopies?: Map<string, OnlyCopies>;
  /** Slots of the consumer, when asked for (`slotsOf`). */
  held?: number;
  /** Every slot of the consumer with its deadline, when asked for. */
  slots?: Record<string, number>;
  /** Those of them that hold a batch, when asked for. */
  registered?: Record<string, boolean>;
  /** When a recovery last freed one of them (`DispatchState.recoveredAt`). */
  recoveredAt?: number;
}

/** Durable delivery state (DynamoDB on AWS and locally). */
/** What `releaseIdle` answers: the wake count and time after it, or that the slot holds a batch. */
export interface IdleRelease {
  wakes?: number;
  lastWakeAt?: number;
  /** The last due lane's claimed second (epoch s), read with the count (`DispatchState.dueLaneAt`). */
  dueLaneAt?: number;
  registered?: true;
}

export interface DeliveryStore {
  // Concurrency slots: one entry per running batch with its deadline (DL-02).
  initSlots(consumerUid: string): Promise<void>;
  /** Before `lanes` lanes start together (`takeSlot`'s `spread`): the map is ready for their takes. */
  prepareSlots(consumerUid: string, bound: SlotBound, lanes: number): Promise<void>;
  slots(consumerUid: string): Promise<Record<string, number>>;
  /** The slot map, which slots hold a registered batch, and the wake count. */
  /**
   * With `enough`, the slots are read a part at a time, and the read stops (its state `partial`)
   * once what it read satisfies `enough`: a send that finds one lane receiving need not read
   * every slot of a consumer at maxConcurrency 250.
   */
  dispatchState(consumerUid: string, enough?: (seen: DispatchState) => boolean): Promise<DispatchState>;
  /**
   * Takes a slot if fewer than `bound.max` are held, by any generation; refused for a generation
   * older than one that took slots since. Answers with the state after the take, or as it was
   * when every slot was taken (its expired slots are then worth recovering); the batch id comes
   * back with the slot's shard in it.
   */
  takeSlot(
    consumerUid: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
    /** The take's rank among lanes started together: they begin in different parts of the map. */
    spread?: { rank: number },
  ): Promise<SlotAnswer>;
  /**
   * Frees `previous` and takes `batchId` (in `previous`'s shard) in one write, if the count of
   * held slots then stays within `bound`; refused (and `previous` freed all the same) otherwise.
   * Without `previous` held (recovered meanwhile) it is a take, and bounded as one. Repeating a
   * hand-over that was made answers `taken` again.
   */
  swapSlot(
    consumerUid: string,
    previous: string,
    batchId: string,
    deadline: number,
    bound: SlotBound,
  ): Promise<SlotAnswer>;
  /** Frees a slot; `recoveredAt` stamps a recovery's release (see `register`). */
  releaseSlot(consumerUid: string, batchId: string, opts?: { recoveredAt?: number }): Promise<void>;
  /**
   * Frees a slot whose receive brought nothing; the wake count (first shard) and time after it.
   * A slot that holds a batch (another runner of it registered one) stays: `registered`.
   */
  releaseIdle(consumerUid: string, batchId: string): Promise<IdleRelease>;
  /** Counts one wake (a message was sent through the Host) at `now`; returns the state after it. */
  wake(consumerUid: string, now: number): Promise<DispatchState>;
  /**
   * Takes the consumer's start lease until `now + leaseMs` unless another holds it: one wake at a
   * time starts a lane. The lane's first slot ends the lease (`acquireSlot`). The lease is kept
   * beside the wake count, never on a slot shard that registrations write.
   */
  claimStart(consumerUid: string, now: number, leaseMs: number): Promise<boolean>;
  /** Releases a slot that holds no batch; false when it was registered (or is gone) meanwhile. */
  releaseUnregistered(consumerUid: string, batchId: string): Promise<boolean>;
  /** Marks a slot as holding a batch (its messages are about to be delivered); false if revoked. */
  markRegistered(consumerUid: string, batchId: string): Promise<boolean>;
  /** Every consumer that has a slot map (for recovery when the local Host starts). */
  consumersWithSlots(): Promise<string[]>;
  /**
   * Removes slots that hold no batch yet (idle lanes), so a stop boundary need not wait for them;
   * a head a lost runner wrote for one of them, before its mark, is taken back (`takeBackHead`).
   */
  revokeUnregistered(consumerUid: string): Promise<number>;
  /**
   * From now on no batch of a generation below `closedBelow` registers, in any slot the consumer
   * has or a generation bounded by `maxConcurrency` may take (a stop fences every generation, an
   * update those before its own). Never lowers a fence; safe to repeat.
   */
  fenceGenerations(consumerUid: string, closedBelow: number, maxConcurrency: number): Promise<void>;

  // Batches.
  /**
   * Writes manifest and head and marks the slot registered with its new deadline
   * (`head.deadline`) before any handler runs, on condition that no stop or update fenced
   * `head.generation` off (`fenceGenerations`). False (and the head taken back) when the slot was
   * revoked or recovered meanwhile or the consumer stopped or changed; `BatchRegisteredAlready` when the
   * batch was registered before, by another call; `ManifestNotWritten` when the manifest could not
   * be written (it is written first: then no head exists, and the batch never starts). Safe to
   * repeat with the same head and manifest: a repeat finds its own writes.
   */
  createBatch(head: BatchHead, manifest: Manifest): Promise<boolean>;
  /**
   * The slot's mark for a batch whose head is written (`createBatch`'s last write, on its own for
   * a registration that must make sure of it): true once the slot holds the batch; false when the
   * slot was revoked, recovered or fenced off, and then the head is taken back. Safe to repeat.
   */
  markBatchSlot(head: BatchHead): Promise<boolean>;
  /**
   * Deletes the head of a batch that never started — its slot was freed unmarked, so no handler
   * got its credential — if one exists and is open. Never fails the caller: a head left is open,
   * unmarked and read by nothing until it expires.
   */
  takeBackHead(batchId: string): Promise<void>;
  /**
   * Takes back a registration whose credential never left the Host (its messages may have
   * returned to the queue before it was done): head and slot go together, while the batch is
   * open. False when it was closed meanwhile.
   */
  cancelBatch(consumerUid: string, batchId: string): Promise<boolean>;
  getHead(batchId: string): Promise<BatchHead | undefined>;
  /** The manifest registration recorded with this head (undefined if none was written). */
  getManifest(head: Pick<BatchHead, 'batchId' | 'manifestRef'>): Promise<Manifest | undefined>;
  /** First settlement wins; refused once the batch is closed or for a wrong credential. */
  settle(batchId: string, credentialHash: string, call: SettleCall): Promise<SettleResult>;
  /**
   * Applies `calls` in order with exactly the results of calling `settle` for each in turn, in as
   * few writes as that allows; one result per call.
   */
  settleMany(batchId: string, credentialHash: string, calls: SettleCall[]): Promise<GroupSettleResult[]>;
  markDoubtful(batchId: string): Promise<void>;
  /**
   * Closes the batch once, at `at`; returns the head as closed (by this call or an earlier one).
   * With `credentialHash` (the runner's close), only a batch of that credential is closed (another
   * is returned as it is). The close also lists the batch among its consumer's recent batches.
   */
  closeBatch(batchId: string, outcome: string, close: BatchClose): Promise<BatchHead | undefined>;
  /** The consumer's batches closed at or after `since`, newest first, at most `limit`. */
  recentlyClosed(consumerUid: string, limit: number, since: number): Promise<BatchHead[]>;
  /**
   * Records that decisions are applied, but for the dead-letter moves still pending. With
   * `unlessRecovering`, only if no recovery fenced the batch; false when one did.
   */
  markApplied(
    batchId: string,
    pendingDeadLetter: string[],
    opts?: { unlessRecovering?: boolean },
  ): Promise<boolean>;
  /** Marks the batch as taken over by a recovery, before it acts; the head after the mark. */
  fenceRecovery(batchId: string): Promise<BatchHead | undefined>;
  /**
   * Claims, for the caller named by `token`, the one release of a batch's messages of one kind
   * (`ReleaseKind`) with the manifest's receipt handles. A finalisation repeated after a release
   * began must not replay it: the messages may have been received again since, and a handle is
   * then older than their last receive. `all`: nothing was released before; `some`: a claimant
   * whose release SQS did not take in full left these items (`leaveUnreleased`); `none`: another
   * caller holds the claim. A repeated call with the same token answers as the first.
   * `takeOver`: every earlier claimant is known to be gone and no lane received since (the local
   * Host starting after a dead run), so a claim it held is taken: `all` unless it left `some`.
   */
  claimRelease(
    batchId: string,
    kind: ReleaseKind,
    token: string,
    opts?: { takeOver?: boolean },
  ): Promise<ReleaseClaim>;
  /** The claimant's release left `items` untaken by SQS: the next claimant releases only those. */
  leaveUnreleased(batchId: string, kind: ReleaseKind, token: string, items: string[]): Promise<void>;

  // Attempts records, and whether a queue may hold any.
  /**
   * What a registration reads before it decides, in one request: whether the queue may hold
   * attempts records, which of `commitIds` (multi-message sends) are committed and,
   * with `slotsOf`, every slot of that consumer (all its shards).
   */
  registrationReads(
    queueUid: string,
    commitIds: readonly string[],
    slotsOf?: { consumerUid: string; maxConcurrency: number },
  ): Promise<RegistrationReads>;
  getAttempts(queueUid: string, ids: readonly string[]): Promise<Map<string, AttemptsRecord>>;
  /**
   * Creates or replaces a record, after making the queue's `outstanding` answer cover it (records
   * may exist until it expires). Attempts only ever
   * grow: false, and nothing written, when the record holds more attempts (a later delivery of
   * the message wrote it, so this decision is stale) — but for an acknowledgement, which then
   * marks that record `acked`, keeping its count.
   */
  putAttempts(queueUid: string, record: AttemptsRecord, expiresAtSeconds: number): Promise<boolean>;
  clearAttempts(queueUid: string, id: string): Promise<void>;

  /** Records of dead-letter copies by the copy's message id, kept until `expiresAtSeconds`. */
  putDeadLetterRecords(
    deadLetterQueueUid: string,
    records: { copyId: string; record: DeadLetterRecord }[],
    expiresAtSeconds: number,
  ): Promise<void>;
}

/**
 * A batch's manifest could not be written (`createBatch`), so its head was not written either:
 * the batch never starts, and no handler got its credential.
 */
export class ManifestNotWritten extends Error {
  readonly batchId: string;

  constructor(batchId: string, cause: unknown) {
    super(`the manifest of batch ${batchId} could not be written`, { cause });
    this.name = 'ManifestNotWritten';
    this.batchId = batchId;
  }
}

/**
 * The batch's head exists already (`createBatch`): an earlier registration of the same slot wrote
 * it — the runner's own earlier call, whose answer was lost, or another runner's. Refused as
 * `unknown_batch` unless registration recognises the call as a repeat of that earlier one
 * (`registration-repeat.ts`).
 */
export class BatchRegisteredAlready extends NamedError {
  constructor(batchId: string) {
    super('unknown_batch', `batch ${batchId} is registered already`);
  }
}
