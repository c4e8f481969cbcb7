import { createHash, createHmac } from 'node:crypto';
import { newToken } from '../engine/ids.ts';
import type { AttachmentStore } from '../forms/queue-consumer/attachments.ts';
import type { ConsumerSpec } from '../forms/queue-consumer/consumer-spec.ts';
import { crashPoint } from '../shared/crash-points.ts';
import { log } from '../shared/log.ts';
import { digestOf } from './batch-digest.ts';
import { BatchRecovery, laneRootOf, type RecoverOptions } from './batch-recovery.ts';
import {
  type AttemptsRecord,
  type BatchHead,
  type DeliveryStore,
  type DispatchState,
  type Manifest,
  type ManifestEntry,
  ManifestNotWritten,
  type SettlementCode,
} from './delivery-store.ts';
import { type Envelope, encodeEnvelope } from './envelope.ts';
import { type BatchBounds, batchFits, type LaneKind, laneKindFor } from './lane-kinds.ts';
import { MESSAGE_LIMITS, NamedError, recordExpiry } from './limits.ts';
import type { CommitStore, MessageQueue, QueueDirectory, QueueTarget } from './ports.ts';
import { changeVisibility, deleteMessages, returnNow, type Visibility } from './queue-requests.ts';
import type { HandlerError, InvocationOutcome, SettleAnswer, SettleCall } from './settlement-protocol.ts';
import {
  laneSealValid,
  manifestSeal,
  manifestSealValid,
  sameMac,
  sealLane,
  sealSlot,
  slotSealValid,
} from './slot-seal.ts';
import { bySendLimits } from './sqs-batches.ts';
import type { UnfinishedBatch } from './unfinished-batch.ts';

/** How a moved message's last delivery ended, for its dead-letter record (`threw`, `returned/retry`). */
function lastOutcomeOf(head: BatchHead, manifest: Manifest, id: string): string {
  const index = manifest.entries.findIndex((m) => m.id === id);
  // A move in the manifest was out of retries when it arrived: its last delivery was earlier.
  if (index < 0) return 'out of retries on arrival';
  const code = head.settled[String(index)] ?? head.all;
  const outcome = head.outcome ?? 'abandoned';
  return code?.startsWith('r') ? `${outcome}/retry` : outcome;
}

/** A slot taken for one batch: everything the runner needs, nothing secret besides the credential. */
export interface Slot {
  batchId: string;
  consumerUid: string;
  generation: number;
  queueUid: string;
  queueName: string;
  sqsUrl: string;
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  /** The batch must be finalised by then; after it, recovery retries what is unsettled. */
  deadline: number;
  /** Received messages stay invisible until then, so recovery always runs before they return. */
  invisibleUntil: number;
  workerUid: string;
  workerSpace: string;
  workerName: string;
  /** Where the worker's code runs (a Lambda function ARN on AWS, `local` here). */
  workerFunction: string;
  /**
   * The consumer's wake count when the slot was taken: a lane whose queue was empty ends only if
   * no send through the Host came after it (see `DispatchState`).
   */
  wakeSeq?: number;
  /**
   * The slot map as the take's write answered it, as far as registration needs it, if it
   * registers within half the grace (the grace argument in ARCHITECTURE.md). Absent on slots
   * sealed by an older Host: registration reads the map.
   */
  taken?: SlotSnapshot;
  /** The consumer generation's settings the Host applies to this batch. */
  maxConcurrency: number;
  maxRetries: number;
  retryDelaySeconds: number;
  /** The worker's invocation bound (ms): the Host's, or the function's own if shorter. */
  handlerMs: number;
  /**
   * When the attachment, queue and worker behind these fields were read (the Host's clock); a
   * lane started with this context takes it over only while it is fresh (`InheritedLane`).
   * Absent on slots sealed by an older Host.
   */
  contextReadAt?: number;
  /**
   * The lane was started with others that together cover the backlog seen then (a supervisor
   * round): its first batch starts no further lane, as those lanes have not all taken a slot yet.
   */
  cohort?: true;
  /**
   * The Host's HMAC of every other field (`slot-seal.ts`): with it the Host trusts the slot
   * without reading the attachment, queue and worker again; without it the slot is refused.
   */
  seal: string;
}

export interface SlotSnapshot {
  /** When the slot was taken (the Host's clock). */
  at: number;
  /** Slots held then, this one included, less those the take recovered. */
  held: number;
  /** The other slots whose deadline had passed by then and that the take did not recover. */
  due: Record<string, number>;
  /**
   * Other lanes receiving then (slots taken, no batch registered, deadline ahead), in the shard
   * answered: a lane whose queue ran dry leaves the idle wait to them (`runBatch`). Absent on
   * slots of an older Host.
   */
  receiving?: number;
  /**
   * The take saw only its own shard of the consumer's slots (maxConcurrency above one shard):
   * `held` and `due` are of that shard, and the registration reads every shard instead.
   */
  partial?: true;
}

/** A registration's reads (`registrationReads`), with every slot when they were asked for. */
interface RegistrationRead {
  committed: Set<string>;
  outstanding: number;
  held?: number;
  slots?: Record<string, number>;
  recoveredAt?: number;
}

/** What a lane knows of its consumer generation: the slot minus what is per batch. */
type LaneContext = Omit<
  Slot,
  'batchId' | 'deadline' | 'invisibleUntil' | 'wakeSeq' | 'taken' | 'cohort' | 'seal'
>;

/**
 * A lane context sealed for a lane the Host starts from a running one (another lane for a
 * backlog): that lane's first acquire takes it over instead of reading the attachment, queue and
 * worker again — three reads per lane start — while it is younger than `INHERITED_LANE_MAX_AGE_MS`
 * counted from the read itself, so a chain of lanes never stretches one read. A stop or update
 * meanwhile is caught where it is for every batch: the registration's check of the generation.
 */
export type InheritedLane = LaneContext & {
  /** The lane’s rank in the cohort it was started with (`DeliveryService.sealedCohort`). */
  cohort?: number;
  seal: string;
};
export const INHERITED_LANE_MAX_AGE_MS = 30_000;
/** How far ahead of this function's clock another function's may run before its reads are doubted. */
const SKEW_ALLOWANCE_MS = 5_000;

const laneContextOf = ({
  batchId,
  deadline,
  invisibleUntil,
  wakeSeq,
  taken,
  cohort,
  seal,
  ...context
}: Slot): LaneContext => context;

/**
 * The id of a lane's next batch: derived from the batch before it, so a retried hand-over of the
 * slot (a lost answer) finds the slot it already took instead of taking a second one.
 */
export function nextBatchId(batchId: string): string {
  const suffix = createHash('sha256').update(`next:${batchId}`).digest('base64url').slice(0, 12);
  return `${laneRootOf(batchId)}.${suffix}`;
}

export interface FinalizeOptions {
  /** The batch's sealed slot (the runner's copy): the Host then need not read its records. */
  slot?: Slot;
  /** The lane goes on: hand the slot to its next batch (`Finalized.next`). */
  next?: boolean;
  /** The manifest registration handed to the runner, sealed: read from the table without it. */
  manifest?: SealedManifest;
  /** The handler's error, when it threw (for the consumer's recent batches; never its stack). */
  error?: HandlerError;
}

export interface Finalized {
  /** Ids of messages to move to the dead-letter queue (the runner sends their bodies). */
  deadLetter: string[];
  /** The lane's next slot, when asked for and nothing is owed a move. */
  next?: AcquireResult;
}

export type AcquireResult =
  /** `held` of `capacity` (maxConcurrency) slots are taken with this one: the loop's scaling input. */
  | { status: 'acquired'; slot: Slot; held: number; capacity: number }
  | { status: 'busy' }
  | { status: 'stop' };

/**
 * Messages gathered for a batch stay invisible this long past the end of gathering (and a slot
 * lasts this long past it): room enough to register. Registration then holds both until the
 * handler's bound; until it does, the messages of a runner that dies come back by themselves.
 */
export const REGISTER_ROOM_MS = 30_000;

/** A message as the runner received it from SQS. */
export interface Received {
  receiptHandle: string;
  receivedAt: number;
  /** SQS's SentTimestamp: when the queue accepted the message, by SQS's clock, not a producer's. */
  sentAt?: number;
  envelope: Omit<Envelope, 'body'>;
}

export interface Registration {
  /** The batch credential, handed only to the runner (never through the state machine). */
  credential: string;
  /** The slot's deadline from registration on: the handler must end before it. */
  deadline?: number;
  /** Indexes into the received list, in batch order, with their attempt numbers. */
  deliver: { received: number; attempts: number }[];
  /** The queue was empty, but a send through the Host came after the slot was taken. */
  woken?: boolean;
  /**
   * Woken, for a lane that goes on: its next slot, taken in the same call. It knows the wake
   * count read then, so its own empty receive is woken only by a later send (exactly, in any shard).
   */
  next?: AcquireResult;
  /**
   * Fewer than maxConcurrency slots were held when it registered: another lane may start.
   * Decided for a full receive (maxBatchSize messages), the only case the control loop asks.
   */
  room?: boolean;
  /**
   * Every slot was held, by the latest count registration had: no other lane could start on
   * more messages now, so the runner may receive its next batch while this one runs.
   */
  saturated?: boolean;
  /**
   * Received messages that already had their last delivery. They belong to the batch and are
   * moved when it is finalised (the runner holds their bodies).
   */
  moves: number;
  /** What registration recorded, sealed: the runner hands it back to `finalize` (no read then). */
  manifest?: SealedManifest;
}

/** A batch's manifest with the Host's seal (`slot-seal.ts`). */
export type SealedManifest = Manifest & { seal: string };

/** A body the runner holds for a dead-letter move the Host asked for (by message id). */
export interface DeadLetterItem {
  id: string;
  body: Uint8Array;
}

export interface DeliveryServiceOptions {
  store: DeliveryStore;
  messages: MessageQueue;
  directory: QueueDirectory;
  commits: CommitStore;
  attachments: AttachmentStore;
  getWorker(uid: string): Promise<{ space: string; name: string; deleted: boolean } | undefined>;
  /** Where a worker's code runs: a Lambda ARN on AWS, `local` for the local Host. */
  workerFunction(space: string, name: string): Promise<string | undefined>;
  /** Derives batch credentials (HMAC of the batch id), so none is stored or passed around. */
  credentialKey: Buffer;
  clock?: () => number;
  /** The longest a worker invocation may run (the Host's bound). */
  workerTimeoutMs: number;
  /**
   * The worker's own invocation bound where it has one (a Lambda function's timeout, from its
   * registration); a slot's deadline uses the smaller of the two, so a crashed worker's slot is
   * held no longer than its invocation could have lasted.
   */
  workerTimeoutMsOf?(space: string, name: string): Promise<number | undefined>;
  /** How long a lane waits for a first message before giving its slot back. */
  idleWaitSeconds?: number;
  /** Time after a slot deadline within which recovery is guaranteed to have run. */
  graceMs?: number;
  /**
   * Added to a slot's deadline beyond idle wait + batch timeout + worker timeout: room for
   * registration, finalisation and clock skew (default 30 s). The fault-injection suite shortens it.
   */
  slotMarginMs?: number;
  /** Multi-message sends not committed after this long are discarded (their producer failed). */
  commitTimeoutMs?: number;
  /**
   * Told when the Host hid messages of a consumer's queue until a later time (a retry delay, a
   * wait for a commit, a postponed move, a `notBefore`) and when it moved messages to a queue:
   * the control loop starts lanes then, rather than at the supervisor's next minute. Must not throw.
   */
  delivery?: DeliveryEvents;
}

/** What the delivery service tells the control loop. */
export interface DeliveryEvents {
  /** Messages of this consumer's queue become visible again after these many seconds. */
  hidden(consumerUid: string, generation: number, seconds: number[]): Promise<void>;
  /** Messages were sent to this queue (a dead-letter move). */
  sent(queueUid: string): Promise<void>;
  /** A finished batch acknowledged (deleted) this many messages of the queue (the console's chart). */
  acknowledged?(queueUid: string, count: number): void;
}

const hashCredential = (c: string) => createHash('sha256').update(c).digest('hex');

/**
 * The longest visibility SQS still accepts for a message received at `receivedAt`: 12 hours from
 * its receive, less what has passed (rounded up) and a second for the receive's own round trip,
 * which SQS counts from before the runner saw the answer.
 */
const visibilityLeft = (receivedAt: number, now: number) =>
  Math.max(1, MESSAGE_LIMITS.sqsMaxVisibilitySeconds - Math.ceil((now - receivedAt) / 1000) - 1);

/**
 * Receipt handles are used only until this long before the batch's messages may become visible
 * again (or half the grace, if shorter): after that a handle may be stale, and decisions are
 * written as attempts records instead.
 */
const HANDLE_SAFETY_MS = 5_000;
/** Complete commits a Host process remembers (ids of about 20 bytes: well under 1 MB). */
const COMMITS_REMEMBERED = 20_000;
/** A dead-letter move SQS refused is tried again when the message returns, this much later. */
const MOVE_RETRY_SECONDS = 10;

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
  private readonly o: Required<DeliveryServiceOptions>;
  /** Commits known to be complete (see `committed`). */
  private readonly commitsSeen = new Set<string>();
  private readonly recovery: BatchRecovery;

  constructor(opts: DeliveryServiceOptions) {
    this.o = {
      clock: Date.now,
      idleWaitSeconds: 20,
      graceMs: 60_000,
      slotMarginMs: 30_000,
      commitTimeoutMs: 15 * 60_000,
      workerTimeoutMsOf: async () => undefined,
      delivery: { hidden: async () => {}, sent: async () => {} },
      ...opts,
    };
    this.recovery = new BatchRecovery({
      store: this.o.store,
      now: () => this.now(),
      finalize: (batchId, outcome) => this.finalize(batchId, outcome, 'recovery'),
    });
  }

  private now(): number {
    return this.o.clock();
  }

  /** The credential of a batch: unguessable without the Host's key (DL-09). */
  credentialOf(batchId: string): string {
    return createHmac('sha256', this.o.credentialKey).update(batchId).digest('base64url');
  }

  /** Whether `credential` is the one of `batchId`; compared by hash, so timing reveals nothing. */
  private ownsBatch(head: BatchHead, credential: string): boolean {
    return head.credentialHash === hashCredential(credential);
  }

  /** The head of a batch the caller proves to hold (its credential); `unknown_batch` otherwise. */
  private async ownedHead(batchId: string, credential: string): Promise<BatchHead> {
    const head = await this.o.store.getHead(batchId);
    if (!head || !this.ownsBatch(head, credential))
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    return head;
  }

  /**
   * Finalisation requested by a runner: only with the batch's credential. Returns the ids of the
   * messages to move to the dead-letter queue, whose bodies the runner then sends (`deadLetter`).
   */
  async finalizeAsRunner(
    batchId: string,
    credential: string,
    outcome: InvocationOutcome,
    opts: FinalizeOptions = {},
  ): Promise<Finalized> {
    // A sealed slot brings the consumer's settings and queue; without one they are read.
    const slot = opts.slot ? this.trusted(opts.slot) : undefined;
    if (slot && slot.batchId !== batchId) throw new NamedError('unknown_batch', 'not a batch of this runner');
    const manifest = this.trustedManifest(batchId, opts.manifest);
    // Closing is conditional on the credential: the write that checks ownership is the close.
    const head = await this.o.store.closeBatch(batchId, outcome, {
      at: this.now(),
      credentialHash: hashCredential(credential),
      error: opts.error,
    });
    if (!head || !this.ownsBatch(head, credential))
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    return this.apply(head, 'live', slot, opts.next === true, manifest);
  }

  /** The runner's copy of a manifest if the Host sealed it for this batch, else undefined (read it). */
  private trustedManifest(batchId: string, sealed: SealedManifest | undefined): Manifest | undefined {
    if (!sealed) return undefined;
    const { seal, ...manifest } = sealed;
    if (!manifestSealValid(this.o.credentialKey, batchId, manifest, seal)) {
      throw new NamedError('unknown_batch', 'not a manifest of this batch');
    }
    return manifest;
  }

  private async consumer(consumerUid: string) {
    const a = await this.o.attachments.get(consumerUid);
    if (!a) return undefined;
    return a;
  }

  private async queueTarget(uid: string): Promise<QueueTarget | undefined> {
    return this.o.directory.queue(uid);
  }

  /**
   * AcquireSlot, a lane's first slot of a worker invocation: reads the consumer generation, its
   * queue and worker once, and seals what it learned into the slot; the lane's later slots and
   * the runner's calls carry it (`acquireNext`, `register`, `finalizeAsRunner`).
   */
  async acquire(consumerUid: string, generation: number, inherited?: unknown): Promise<AcquireResult> {
    const inheritedLane = this.inheritedContext(consumerUid, generation, inherited);
    const context = inheritedLane?.context ?? (await this.laneContext(consumerUid, generation));
    if (!context) return { status: 'stop' };
    return this.take(context, `b${newToken(18)}`, inheritedLane?.cohort);
  }

  /**
   * AcquireSlot in an Express lane (`lane-kinds.ts`): a slot only while a whole batch of the
   * consumer still ends before `until`, the lane's window; otherwise nothing is taken and the
   * answer says where the lane goes on — the kind of lane the consumer fits, with the context
   * just read, sealed, so that lane reads nothing again.
   */
  async acquireWithin(
    consumerUid: string,
    generation: number,
    inherited: unknown,
    until: number,
  ): Promise<AcquireResult | { status: 'elsewhere'; kind: LaneKind; inherit: InheritedLane }> {
    const inheritedLane = this.inheritedContext(consumerUid, generation, inherited);
    const context = inheritedLane?.context ?? (await this.laneContext(consumerUid, generation));
    if (!context) return { status: 'stop' };
    if (!batchFits(this.now(), until, context, this.o.idleWaitSeconds)) {
      return {
        status: 'elsewhere',
        kind: laneKindFor(context, this.o.idleWaitSeconds),
        inherit: sealLane(this.o.credentialKey, context),
      };
    }
    return this.take(context, `b${newToken(18)}`, inheritedLane?.cohort);
  }

  /** The kind of lane a consumer runs on, from a slot or lane context of it. */
  laneKindOf(bounds: BatchBounds): LaneKind {
    return laneKindFor(bounds, this.o.idleWaitSeconds);
  }

  /** The context to seal into the input of a lane started from this slot's lane; none for old slots. */
  inheritableLane(slot: Slot): InheritedLane | undefined {
    const sealed = this.trusted(slot);
    if (sealed.contextReadAt === undefined) return undefined;
    return sealLane(this.o.credentialKey, laneContextOf(sealed));
  }

  /**
   * Fresh lane contexts, sealed for the `size` lanes a supervisor round is about to start: one
   * read of attachment, queue and worker for all of them. They are a *cohort* (`Slot.cohort`),
   * and each knows its rank in it, so that their takes begin in different shards of the slot
   * map. Undefined when the consumer generation is not the active one (its lanes would stop anyway).
   */
  async sealedCohort(
    consumerUid: string,
    generation: number,
    size: number,
  ): Promise<InheritedLane[] | undefined> {
    const context = await this.laneContext(consumerUid, generation);
    if (!context) return undefined;
    return Array.from({ length: size }, (_, rank) =>
      sealLane(this.o.credentialKey, { ...context, cohort: rank }),
    );
  }

  /** An inherited context the Host sealed for this consumer generation and that is still fresh. */
  private inheritedContext(
    consumerUid: string,
    generation: number,
    lane: unknown,
  ): { context: LaneContext; cohort?: number } | undefined {
    if (typeof lane !== 'object' || lane === null || !('seal' in lane)) return undefined;
    if (!laneSealValid(this.o.credentialKey, lane)) {
      log.warn('a lane brought a context the Host did not seal; read instead', { consumerUid });
      return undefined;
    }
    const { seal, cohort, ...context } = lane as InheritedLane;
    if (context.consumerUid !== consumerUid || context.generation !== generation) return undefined;
    const age = this.now() - (context.contextReadAt ?? Number.NEGATIVE_INFINITY);
    // A read from the future (another function's clock ahead) is not trusted either.
    return age >= -SKEW_ALLOWANCE_MS && age <= INHERITED_LANE_MAX_AGE_MS
      ? { context, ...(Number.isSafeInteger(cohort) ? { cohort } : {}) }
      : undefined;
  }

  /** The consumer generation as a lane needs it; undefined when it stopped or changed. */
  private async laneContext(consumerUid: string, generation: number): Promise<LaneContext | undefined> {
    const readAt = this.now();
    const a = await this.consumer(consumerUid);
    if (a?.state !== 'active' || a.generation !== generation) return undefined;
    const queue = await this.queueTarget(a.spec.queue.resourceUid);
    const worker = await this.o.getWorker(a.spec.worker.resourceUid);
    if (!queue || !worker || worker.deleted) return undefined;
    const workerFunction = await this.o.workerFunction(worker.space, worker.name);
    if (!workerFunction) return undefined;
    const own = await this.o.workerTimeoutMsOf(worker.space, worker.name);
    return {
      contextReadAt: readAt,
      consumerUid,
      generation,
      queueUid: queue.queueUid,
      queueName: queue.queueName,
      sqsUrl: queue.sqsUrl,
      maxBatchSize: a.spec.maxBatchSize,
      maxBatchTimeoutSeconds: a.spec.maxBatchTimeoutSeconds,
      workerUid: a.spec.worker.resourceUid,
      workerSpace: worker.space,
      workerName: worker.name,
      workerFunction,
      maxConcurrency: a.spec.maxConcurrency,
      maxRetries: a.spec.maxRetries,
      retryDelaySeconds: a.spec.retryDelaySeconds,
      handlerMs: own !== undefined ? Math.min(own, this.o.workerTimeoutMs) : this.o.workerTimeoutMs,
    };
  }

  /** The slot deadline while gathering: idle wait + batch timeout + room to register + margin. */
  private gatheringDeadline(context: LaneContext, now: number): number {
    // Until registration the slot covers gathering only: a lane lost before its handler starts
    // (or whose registration failed) frees its slot within about a minute, not a worker timeout.
    // Registration extends the deadline to the handler's bound.
    return (
      now +
      (this.o.idleWaitSeconds + context.maxBatchTimeoutSeconds) * 1000 +
      REGISTER_ROOM_MS +
      this.o.slotMarginMs
    );
  }

  /**
   * A sealed slot for a batch that holds `deadline` in the slot map, taken at `takenAt` by the
   * write that answered `state`; `recovered` are the expired slots the take recovered itself.
   */
  private slotFor(
    context: LaneContext & { cohort?: true },
    batchId: string,
    deadline: number,
    state: DispatchState,
    takenAt: number,
    recovered: ReadonlySet<string> = new Set(),
    seenWakes?: number,
  ): Slot {
    const wakeSeq = state.wakes ?? seenWakes;
    const receiving = Object.entries(state.slots).filter(
      ([id, until]) => id !== batchId && until > takenAt && !state.registered[id],
    ).length;
    const due: Record<string, number> = {};
    for (const [id, until] of Object.entries(state.slots)) {
      if (id !== batchId && until <= takenAt && !recovered.has(id)) due[id] = until;
    }
    const held = Object.keys(state.slots).filter((id) => !recovered.has(id)).length;
    return sealSlot(this.o.credentialKey, {
      ...context,
      batchId,
      deadline,
      invisibleUntil: deadline + this.o.graceMs,
      ...(wakeSeq !== undefined ? { wakeSeq } : {}),
      taken: { at: takenAt, held, due, receiving, ...(state.partial ? { partial: true as const } : {}) },
    });
  }

  /**
   * Takes a slot if fewer than maxConcurrency are held. Slots whose deadline passed count against
   * the bound until recovered: the answer shows them, they are recovered, and a refused take is
   * tried once more.
   */
  /** `cohort`: the lane's rank in the cohort it was started with, if it was. */
  /** `seenWakes`: the consumer's wake count read before this take (for a slot outside shard 0). */
  private async take(
    context: LaneContext,
    batchId: string,
    cohort?: number,
    seenWakes?: number,
  ): Promise<AcquireResult> {
    const now = this.now();
    const deadline = this.gatheringDeadline(context, now);
    const max = context.maxConcurrency;
    const spread = cohort !== undefined ? { rank: cohort } : undefined;
    let out = await this.o.store.takeSlot(context.consumerUid, batchId, deadline, max, spread);
    const expired = Object.entries(out.state.slots)
      .filter(([id, until]) => id !== out.batchId && until <= now)
      .map(([id]) => id);
    for (const id of expired) {
      await this.recoverBatch(context.consumerUid, id, { expired: out.state.slots[id] as number });
    }
    if (!out.taken && expired.length > 0) {
      out = await this.o.store.takeSlot(context.consumerUid, batchId, deadline, max, spread);
    }
    if (!out.taken) return { status: 'busy' };
    const slot = this.slotFor(
      cohort !== undefined ? { ...context, cohort: true } : context,
      out.batchId,
      deadline,
      out.state,
      now,
      new Set(expired),
      seenWakes,
    );
    return { status: 'acquired', held: (slot.taken as SlotSnapshot).held, capacity: max, slot };
  }

  /** The sealed slot's fields, or `unknown_batch` if the Host did not seal it as it is. */
  private trusted(slot: Slot): Slot {
    if (!slotSealValid(this.o.credentialKey, slot)) {
      throw new NamedError('unknown_batch', 'not a slot of this Host');
    }
    return slot;
  }

  /** Whether `credential` is the one the Host derived for `batchId` (constant time). */
  credentialMatches(batchId: string, credential: string): boolean {
    return sameMac(this.credentialOf(batchId), credential);
  }

  /**
   * A lane's next slot in the same invocation (after a batch that ended with dead-letter moves,
   * or when the runner did not ask `finalize` for it). The sealed slot and the credential of the
   * batch it just ran prove the caller is this consumer's runner; the consumer generation is
   * read once more, so a stopped or changed consumer ends its lanes here.
   */
  async acquireNext(previous: Slot, credential: string): Promise<AcquireResult> {
    const slot = this.trusted(previous);
    if (!this.credentialMatches(slot.batchId, credential)) {
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    }
    if (!(await this.stillActive(slot))) return { status: 'stop' };
    return this.take(laneContextOf(slot), nextBatchId(slot.batchId));
  }

  /** Whether the slot's consumer generation is still the active one. */
  private async stillActive(slot: Slot): Promise<boolean> {
    const a = await this.consumer(slot.consumerUid);
    return a?.state === 'active' && a.generation === slot.generation;
  }

  /**
   * The consumer's slots a registration must recover before it reads attempts records. Within
   * half the grace of the take, the slot's sealed snapshot says it (the grace argument in
   * ARCHITECTURE.md): a batch whose messages can be back in the queue now was registered before
   * the take, and its deadline had passed by then. Later, the slot map is read after the receive,
   * and a slot no longer in it (revoked: its consumer is stopping) gives its messages back. A
   * snapshot of one shard (`partial`) says nothing of the others: then every shard is read, with
   * the attempts count and commits in the same request (`reads`), which stand unless a recovery
   * may have written records between the items' reads (`register`).
   */
  private async slotsAtRegistration(
    slot: Slot,
    now: number,
    received: Received[],
    giveBack: () => Promise<unknown>,
  ): Promise<{ held: number; due: Record<string, number>; read: boolean; reads?: RegistrationRead }> {
    if (slot.taken !== undefined && !slot.taken.partial && now - slot.taken.at <= this.o.graceMs / 2)
      return { ...slot.taken, read: false };
    let slots: Record<string, number>;
    let reads: RegistrationRead | undefined;
    if (slot.taken?.partial) {
      const startedAt = this.now();
      const read = await this.registrationReads(slot.queueUid, received, {
        consumerUid: slot.consumerUid,
        maxConcurrency: slot.maxConcurrency,
      });
      slots = read.slots ?? {};
      // A recovery that freed a slot after this read began may have written attempts records
      // after the count was read (the items of one read are not read at one instant).
      const raced = read.recoveredAt !== undefined && read.recoveredAt >= startedAt - SKEW_ALLOWANCE_MS;
      if (!raced) reads = read;
    } else {
      slots = await this.o.store.slots(slot.consumerUid);
    }
    if (slots[slot.batchId] === undefined) {
      await giveBack();
      throw new NamedError('unknown_batch', 'no such slot is open');
    }
    const due = Object.entries(slots).filter(([id, d]) => id !== slot.batchId && d <= now);
    return {
      held: Object.keys(slots).length,
      due: Object.fromEntries(due),
      read: true,
      ...(reads && due.length === 0 ? { reads } : {}),
    };
  }

  /**
   * Whether another lane may start (the control loop asks only after a full receive). A snapshot
   * from before the gathering can be stale by the lanes started meanwhile, so where it shows room
   * a full batch confirms it with the slot map as read after the receive (`heldAfterReceive`,
   * read with the registration's other reads), as the loop had before the snapshot. A cohort's
   * first batch has none: the lanes started with it may not all hold their slot yet.
   */
  private roomFor(
    slot: Slot,
    slots: { held: number; read: boolean },
    received: number,
    heldAfterReceive: number | undefined,
  ): boolean {
    if (slots.held >= slot.maxConcurrency || slot.cohort) return false;
    if (slots.read) return true;
    if (received < slot.maxBatchSize) return false;
    return heldAfterReceive !== undefined && heldAfterReceive < slot.maxConcurrency;
  }

  /**
   * Decides, for each received message, whether it is delivered now, later, or dead-lettered.
   * The slot is trusted only with its seal (DL-09); that its consumer generation is still the
   * active one is a condition of the registration's transaction, not a read before it.
   */
  async register(claimed: Slot, received: Received[], opts: { goOn?: boolean } = {}): Promise<Registration> {
    const nothing: Registration = { credential: '', deliver: [], moves: 0 };
    const sealed = this.trusted(claimed);
    const giveBack = () =>
      this.changeVisibility(
        sealed.sqsUrl,
        received.map((r) => ({ handle: r.receiptHandle, seconds: 0 })),
      );
    if (received.length === 0) return this.releaseEmpty(sealed, opts.goOn === true);
    const now = this.now();
    // Late recovery: a batch abandoned by a lost runner has its messages back in the queue from
    // its deadline + grace on. Recovering such slots before reading attempts records means such a
    // message is never counted from records its recovery has not written yet.
    const slots = await this.slotsAtRegistration(sealed, now, received, giveBack);
    for (const [batchId, d] of Object.entries(slots.due)) {
      await this.recoverBatch(sealed.consumerUid, batchId, { expired: d });
    }
    // From registration on the slot lasts as long as the handler may run, and its messages stay
    // hidden a grace period longer (only the Host's own records decide how long).
    const running = now + sealed.handlerMs + this.o.slotMarginMs;
    // Not sealed (an empty seal never verifies): this copy with the new deadline stays in here.
    const slot: Slot = { ...sealed, deadline: running, invisibleUntil: running + this.o.graceMs, seal: '' };
    const spec = { maxRetries: sealed.maxRetries, maxConcurrency: sealed.maxConcurrency };
    // Whether another lane may start is asked only after a full receive whose snapshot showed
    // room (`roomFor`); the slot map is then read in the same request as the reads below.
    const askRoom =
      !slots.read && !slot.cohort && slots.held < slot.maxConcurrency && received.length >= slot.maxBatchSize;
    const { committed, outstanding, held } =
      slots.reads ??
      (await this.registrationReads(
        slot.queueUid,
        received,
        askRoom ? { consumerUid: slot.consumerUid, maxConcurrency: slot.maxConcurrency } : undefined,
      ));
    const records =
      outstanding > 0
        ? await this.o.store.getAttempts(
            slot.queueUid,
            received.map((r) => r.envelope.id),
          )
        : new Map<string, AttemptsRecord>();

    // An SQS duplicate of a message in this batch rides with its first copy: one decision, and
    // every copy is deleted, hidden or returned with it.
    const copies = new Map<string, { first: number; handles: string[] }>();
    for (const [i, r] of received.entries()) {
      const c = copies.get(r.envelope.id);
      if (c) c.handles.push(r.receiptHandle);
      else copies.set(r.envelope.id, { first: i, handles: [r.receiptHandle] });
    }
    const hide: Visibility[] = [];
    const remove: string[] = [];
    /** Acknowledged messages seen again: their records go once their copies are deleted. */
    const removeAcked: { id: string; handles: string[] }[] = [];
    const deliver: Registration['deliver'] = [];
    const entries: ManifestEntry[] = [];
    const moves: ManifestEntry[] = [];
    for (const { first, handles } of copies.values()) {
      const r = received[first] as Received;
      const e = r.envelope;
      if (e.commit && !committed.has(e.commit)) {
        // Timed by SQS's clock: a producer's clock (the customer's machine) may be off.
        if (now - (r.sentAt ?? e.ts) > this.o.commitTimeoutMs) remove.push(...handles);
        else for (const handle of handles) hide.push({ handle, seconds: 2 });
        continue;
      }
      const rec = records.get(e.id);
      if (rec?.acked) {
        remove.push(...handles);
        removeAcked.push({ id: e.id, handles });
        continue;
      }
      const notBefore = Math.max(e.notBefore ?? 0, rec?.notBefore ?? 0);
      if (notBefore > now) {
        const seconds = Math.min(visibilityLeft(r.receivedAt, now), Math.ceil((notBefore - now) / 1000));
        for (const handle of handles) hide.push({ handle, seconds });
        continue;
      }
      const attempts = (rec?.attempts ?? 0) + 1;
      const entry = { id: e.id, ts: e.ts, hadRecord: rec !== undefined, handles, receivedAt: r.receivedAt };
      if (attempts > 1 + spec.maxRetries) {
        moves.push({ ...entry, attempts: rec?.attempts ?? 0 });
        continue;
      }
      deliver.push({ received: first, attempts });
      entries.push({ ...entry, attempts });
    }
    await this.changeVisibility(slot.sqsUrl, hide);
    await this.o.delivery.hidden(
      slot.consumerUid,
      slot.generation,
      hide.map((h) => h.seconds),
    );
    const notRemoved = await this.deleteMessages(slot.sqsUrl, remove);
    for (const d of removeAcked) {
      // A copy that could not be deleted comes back: its record must still say it is done.
      if (!d.handles.some((h) => notRemoved.has(h))) await this.o.store.clearAttempts(slot.queueUid, d.id);
    }
    const delivered = entries;
    const moved = moves;
    if (delivered.length === 0 && moved.length === 0) return this.releaseEmpty(sealed, false);
    const credential = this.credentialOf(slot.batchId);
    const head: BatchHead = {
      batchId: slot.batchId,
      consumerUid: slot.consumerUid,
      queueUid: slot.queueUid,
      generation: slot.generation,
      credentialHash: hashCredential(credential),
      size: delivered.length,
      closed: false,
      outcome: undefined,
      applied: false,
      settled: {},
      all: undefined,
      deadline: slot.deadline,
      invisibleUntil: slot.invisibleUntil,
      doubtful: false,
      pendingDeadLetter: [],
      digest: digestOf({ entries: delivered, moves: moved }, spec.maxRetries),
    };
    // Head, manifest and the slot's `registered` mark in one transaction, on condition that the
    // consumer generation is still active. A slot revoked at the stop boundary (QC-08), a stop or
    // an update of the consumer, or a head that exists already make it fail, and then this batch
    // never starts.
    let created: boolean;
    try {
      created = await this.o.store.createBatch(head, { entries: delivered, moves: moved });
    } catch (err) {
      // The batch was registered before (a replayed call): refused, and its messages stay with it.
      if (err instanceof NamedError) throw err;
      if (err instanceof ManifestNotWritten) {
        // Nothing of the batch was registered: its messages go back as they came, and its slot,
        // which holds no batch, is freed now rather than when gathering would have ended.
        await this.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        await this.recoverBatch(slot.consumerUid, slot.batchId, { ended: true }).catch(() => undefined);
        throw err;
      }
      // The transaction may have committed with its answer lost: then the batch exists and its
      // messages must not go back (another batch would deliver them with the same attempt).
      const committed = await this.batchExists(slot.batchId);
      if (!committed) {
        // Not registered (or not known to be): what was held for this batch goes back now, so
        // it is not hidden until the deadline of a batch that may not exist.
        await this.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
        throw err;
      }
      created = true;
    }
    if (!created) {
      await this.changeVisibility(slot.sqsUrl, returnNow([...delivered, ...moved]));
      // A slot the consumer's stop or update left behind: freed now (a no-op if it was revoked).
      await this.o.store.releaseSlot(slot.consumerUid, slot.batchId);
      return nothing;
    }
    // The runner received with a short visibility, so the messages of a runner that dies before
    // registration return by themselves. Registered, they are held past the deadline — after the
    // records exist, so that a crash between the two leaves a batch recovery can return at once,
    // never messages hidden for a whole worker timeout with nothing that knows them.
    const lost = await this.holdUntil(slot, [...delivered, ...moved], now);
    if (lost.size > 0) {
      // SQS refused even the retries: such a copy may come back while its handler runs (a
      // duplicate delivery, which at-least-once allows; recovery still knows its handles).
      log.warn('could not hold messages of a registered batch', {
        batchId: slot.batchId,
        messages: lost.size,
      });
    }
    crashPoint('delivery.after-register');
    const manifest: Manifest = { entries: delivered, moves: moved };
    return {
      credential,
      deadline: slot.deadline,
      deliver,
      moves: moved.length,
      room: this.roomFor(slot, slots, received.length, held),
      saturated: (slots.read || held === undefined ? slots.held : held) >= slot.maxConcurrency,
      manifest: { ...manifest, seal: manifestSeal(this.o.credentialKey, slot.batchId, manifest) },
    };
  }

  /**
   * A slot whose receive brought nothing to deliver: freed in one write. A send through the Host
   * after the slot was taken may have missed this receive: the lane then takes another slot
   * instead of ending (`woken`) — here, for a lane that goes on, so it receives again in the same
   * invocation rather than through another round of the state machine.
   */
  private async releaseEmpty(slot: Slot, goOn: boolean): Promise<Registration> {
    const after = await this.o.store.releaseIdle(slot.consumerUid, slot.batchId);
    // A slot that knows the wake count (taken in the first shard, or after a woken release)
    // compares counts; one in another shard, whose take did not see the count, the last wake's
    // time with the take's (a wake just before it only costs one more receive).
    const woken =
      slot.wakeSeq !== undefined && after.wakes !== undefined
        ? after.wakes > slot.wakeSeq
        : slot.taken !== undefined &&
          after.lastWakeAt !== undefined &&
          after.lastWakeAt >= slot.taken.at - SKEW_ALLOWANCE_MS;
    const nothing: Registration = { credential: '', deliver: [], moves: 0, ...(woken ? { woken } : {}) };
    if (!woken || !goOn || !(await this.stillActive(slot))) return nothing;
    // Without a count to compare, a slot outside the first shard is woken by any send within the
    // skew allowance before its take; its successor carries the count read now instead, so the
    // same send does not wake the lane again and again.
    const next = await this.take(laneContextOf(slot), nextBatchId(slot.batchId), undefined, after.wakes);
    return { ...nothing, next };
  }

  /**
   * The queue's count of attempts records, and the commits of multi-message sends among
   * `received` that are complete, in one read. A commit, once written, stays: those seen are
   * remembered (a bounded set), so the batches of one large send read its commit once.
   */
  private async registrationReads(
    queueUid: string,
    received: Received[],
    slotsOf: { consumerUid: string; maxConcurrency: number } | undefined,
  ): Promise<RegistrationRead> {
    const ids = [...new Set(received.flatMap((r) => (r.envelope.commit ? [r.envelope.commit] : [])))];
    const committed = new Set(ids.filter((c) => this.commitsSeen.has(c)));
    const missing = () => ids.filter((c) => !committed.has(c));
    const read = await this.o.store.registrationReads(queueUid, missing(), slotsOf);
    for (const c of read.committed) committed.add(c);
    if (committed.size < ids.length) {
      // A receive can overtake the producer's commit write by milliseconds: look once more.
      await new Promise((r) => setTimeout(r, 250));
      for (const c of await this.o.commits.committed(missing())) committed.add(c);
    }
    if (this.commitsSeen.size + committed.size > COMMITS_REMEMBERED) this.commitsSeen.clear();
    for (const c of committed) this.commitsSeen.add(c);
    return {
      committed,
      outstanding: read.outstanding,
      ...(read.held !== undefined ? { held: read.held } : {}),
      ...(read.slots !== undefined ? { slots: read.slots } : {}),
      ...(read.recoveredAt !== undefined ? { recoveredAt: read.recoveredAt } : {}),
    };
  }

  /**
   * Whether a batch’s head exists, asked a few times over ~12 s: after a lost answer the table
   * may be unreachable for a moment (a restarting stand-in, a network blip). False when it
   * cannot be told.
   */
  private async batchExists(batchId: string): Promise<boolean> {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        return (await this.o.store.getHead(batchId)) !== undefined;
      } catch {
        await new Promise((r) => setTimeout(r, 400 * 2 ** attempt));
      }
    }
    return false;
  }

  /**
   * Extends the visibility of a batch's messages to the slot's `invisibleUntil`. Returns the ids
   * whose copies could not all be extended (they may return early).
   */
  private async holdUntil(slot: Slot, owned: ManifestEntry[], now: number): Promise<Set<string>> {
    const lost = new Set<string>();
    const items = owned.flatMap((m) => {
      const seconds = Math.min(
        visibilityLeft(m.receivedAt ?? now, now),
        Math.ceil((slot.invisibleUntil - now) / 1000),
      );
      return (m.handles ?? []).map((handle) => ({ handle, seconds: Math.max(1, seconds), id: m.id }));
    });
    const failed = await this.changeVisibility(slot.sqsUrl, items);
    for (const i of items) if (failed.has(i.handle)) lost.add(i.id);
    return lost;
  }

  /** One settlement call from a worker (DL-03, DL-04, DL-08, DL-09). */
  async settle(batchId: string, credential: string, call: SettleCall): Promise<void> {
    const hash = hashCredential(credential);
    let result: Awaited<ReturnType<DeliveryStore['settle']>>;
    try {
      result = await this.o.store.settle(batchId, hash, call);
    } catch (err) {
      if (err instanceof NamedError) throw err;
      log.warn('settlement could not be recorded', { batchId, err });
      await this.o.store.markDoubtful(batchId).catch(() => undefined);
      throw new NamedError(
        'backend_unavailable',
        'the settlement could not be recorded; it is not in effect',
      );
    }
    crashPoint('delivery.after-settle');
    if (result === 'unknown_batch')
      throw new NamedError('unknown_batch', 'this batch is not open for settlement');
    if (result === 'already_settled')
      throw new NamedError('already_settled', 'this message is already settled');
  }

  /**
   * A group of settlement calls of one batch, applied in order with the answers `settle` would
   * give each in turn, in as few writes as the store can (DL-03, DL-04, DL-08, DL-09). A call
   * whose write failed answers `backend_unavailable` and marks the batch doubtful.
   */
  async settleMany(batchId: string, credential: string, calls: SettleCall[]): Promise<SettleAnswer[]> {
    const hash = hashCredential(credential);
    let results: Awaited<ReturnType<DeliveryStore['settleMany']>>;
    let cause: unknown;
    try {
      results = await this.o.store.settleMany(batchId, hash, calls);
    } catch (err) {
      if (err instanceof NamedError) throw err;
      cause = err;
      results = calls.map(() => 'write_failed');
    }
    const failed = results.filter((r) => r === 'write_failed').length;
    if (failed > 0) {
      log.warn('settlements could not be recorded', { batchId, failed, ...(cause ? { err: cause } : {}) });
      await this.o.store.markDoubtful(batchId).catch(() => undefined);
    }
    if (results.includes('ok')) crashPoint('delivery.after-settle');
    return results.map((r) => (r === 'write_failed' ? 'backend_unavailable' : r));
  }

  /**
   * Closes the batch and applies every decision with the receipt handles registration recorded.
   * `live`: the runner still holds the bodies, so messages out of retries (and the batch's moves)
   * are returned as ids to move. `recovery` (the runner is gone): they are returned to the queue
   * instead, their attempts recorded, so registration moves them when they come back. Once the
   * messages may be visible again, handles may be stale: decisions are then written as attempts
   * records only, which take effect when the messages are received again.
   */
  async finalize(
    batchId: string,
    outcome: InvocationOutcome,
    mode: 'live' | 'recovery',
    error?: HandlerError,
  ): Promise<{ deadLetter: string[] }> {
    const closed = await this.o.store.closeBatch(batchId, outcome, { at: this.now(), error });
    // A recovery fences the batch before it acts, and decides from the head as of the fence: a
    // runner whose finalisation outlived the slot's deadline can then take no move on that
    // recovery also returns, and keeps the records of moves it made (`moveToDeadLetter`).
    const head = closed && mode === 'recovery' ? await this.o.store.fenceRecovery(batchId) : closed;
    if (!head) return { deadLetter: [] };
    return this.apply(head, mode, undefined, false);
  }

  /**
   * Applies a closed batch's decisions (see `finalize`). `slot`, when the runner brought its
   * sealed slot, stands in for reading the consumer and queue. `next`: the lane goes on, so the
   * batch's slot is handed to its next batch in the same write that frees it.
   */
  private async apply(
    head: BatchHead,
    mode: 'live' | 'recovery',
    slot: Slot | undefined,
    next: boolean,
    known?: Manifest,
  ): Promise<Finalized> {
    const batchId = head.batchId;
    const manifest: Manifest = known ?? (await this.o.store.getManifest(head)) ?? { entries: [], moves: [] };
    if (head.applied) {
      if (mode === 'live') return { deadLetter: pendingIds(head, manifest) };
      await this.returnPending(head, manifest);
      return { deadLetter: [] };
    }
    const spec = slot ?? (await this.consumer(head.consumerUid))?.spec;
    const queue = slot ?? (await this.queueTarget(head.queueUid));
    const now = this.now();
    const usable = queue !== undefined && this.handlesValid(head, now);
    const handlesOf = (m: ManifestEntry) => (usable ? (m.handles ?? []) : []);
    const expires = recordExpiry(now);
    const effective = head.outcome === 'returned' && !head.doubtful ? 'returned' : 'retry-rest';
    const toDelete: { entry: ManifestEntry; handle: string }[] = [];
    const toHide: Visibility[] = [];
    const deadLetter: string[] = [];
    const owesMove = (m: ManifestEntry, handles: string[]) => {
      if (mode === 'live' && handles.length > 0) deadLetter.push(m.id);
      else toHide.push(...returnNow([{ ...m, handles }]));
    };

    for (const [i, m] of manifest.entries.entries()) {
      const code: SettlementCode =
        head.settled[String(i)] ?? head.all ?? (effective === 'returned' ? 'a' : 'r');
      const handles = handlesOf(m);
      if (code === 'a') {
        if (handles.length > 0) for (const handle of handles) toDelete.push({ entry: m, handle });
        else
          await this.o.store.putAttempts(
            head.queueUid,
            { id: m.id, attempts: m.attempts, acked: true },
            expires,
          );
        continue;
      }
      // The attempts record is durable before the message can be seen again (exact attempts).
      if (m.attempts >= 1 + (spec?.maxRetries ?? 0)) {
        // Out of retries: the next step is the dead-letter move, which needs the body.
        await this.o.store.putAttempts(head.queueUid, { id: m.id, attempts: m.attempts }, expires);
        owesMove(m, handles);
        continue;
      }
      const delay = code.length > 1 ? Number(code.slice(1)) : (spec?.retryDelaySeconds ?? 0);
      await this.o.store.putAttempts(
        head.queueUid,
        { id: m.id, attempts: m.attempts, notBefore: delay > 0 ? now + delay * 1000 : undefined },
        expires,
      );
      const seconds = Math.max(0, Math.min(delay, visibilityLeft(m.receivedAt ?? now, now)));
      for (const handle of handles) toHide.push({ handle, seconds });
      log.info('message retried', {
        consumerUid: head.consumerUid,
        messageId: m.id,
        attempts: m.attempts,
        delaySeconds: delay,
        ...(mode === 'recovery' ? { recovery: true } : {}),
      });
    }
    for (const m of manifest.moves) owesMove(m, handlesOf(m));
    if (queue) {
      const { failed, unsent } = await this.deletions(
        queue.sqsUrl,
        toDelete.map((d) => d.handle),
      );
      // The runner finalises again (then the recovery): an acknowledged copy SQS kept in an
      // outage would otherwise stay in flight until the batch's hold ends (16 minutes at the
      // defaults; the oldest-message alarm counts it). Recovery, with no runner to try again,
      // leaves such a copy to be deleted on sight.
      if (unsent > 0 && mode === 'live') {
        throw new Error(`SQS did not take ${unsent} deletes of acknowledged messages; applied again`);
      }
      let acknowledged = 0;
      for (const m of new Set(toDelete.map((d) => d.entry))) {
        if ((m.handles ?? []).some((h) => failed.has(h))) {
          await this.o.store.putAttempts(
            head.queueUid,
            { id: m.id, attempts: m.attempts, acked: true },
            expires,
          );
        } else {
          acknowledged += 1;
          if (m.hadRecord) await this.o.store.clearAttempts(head.queueUid, m.id);
        }
      }
      this.o.delivery.acknowledged?.(head.queueUid, acknowledged);
      crashPoint('delivery.mid-finalize');
      await this.releaseVisibility(queue.sqsUrl, toHide, 'retried messages');
      await this.o.delivery.hidden(
        head.consumerUid,
        head.generation,
        toHide.map((h) => h.seconds),
      );
    }
    if (deadLetter.length > 0) {
      // The moves still need the bodies: the slot stays until the runner sent them — unless a
      // recovery took the batch over meanwhile; it returns them (moved on return) and frees the slot.
      if (!(await this.o.store.markApplied(batchId, deadLetter, { unlessRecovering: true }))) {
        return { deadLetter: [] };
      }
      return { deadLetter };
    }
    // Nothing is owed: freeing the slot ends the batch, and nothing reads `applied` of a batch
    // without a slot (were this call repeated, its writes are the same ones again).
    if (mode === 'recovery' || !slot) await this.o.store.markApplied(batchId, []);
    if (next && slot) {
      const handed = await this.handOver(slot);
      return { deadLetter, next: handed };
    }
    await this.o.store.releaseSlot(
      head.consumerUid,
      batchId,
      mode === 'recovery' ? { recoveredAt: now } : {},
    );
    return { deadLetter };
  }

  /**
   * Frees a finished batch's slot and takes the lane's next one in the same write (the count of
   * held slots is unchanged, so the bound still holds: DL-02).
   */
  private async handOver(slot: Slot): Promise<AcquireResult> {
    const context = laneContextOf(slot);
    const now = this.now();
    const batchId = nextBatchId(slot.batchId);
    const deadline = this.gatheringDeadline(context, now);
    const out = await this.o.store.swapSlot(
      slot.consumerUid,
      slot.batchId,
      batchId,
      deadline,
      slot.maxConcurrency,
    );
    if (!out.taken) return { status: 'busy' };
    const next = this.slotFor(context, out.batchId, out.state.slots[out.batchId] ?? deadline, out.state, now);
    return {
      status: 'acquired',
      held: (next.taken as SlotSnapshot).held,
      capacity: slot.maxConcurrency,
      slot: next,
    };
  }

  /** Whether the manifest's receipt handles are still certain to be the current ones. */
  private handlesValid(head: BatchHead, now: number): boolean {
    return now < head.invisibleUntil - Math.min(HANDLE_SAFETY_MS, this.o.graceMs / 2);
  }

  /**
   * The runner left before moving these: back to the queue (attempts recorded), moved on return.
   * The head is fenced (`finalize`) before they go back: a runner still moving them (its move
   * outlived the slot's deadline) reads that after its delete and keeps their records.
   */
  private async returnPending(head: BatchHead, manifest: Manifest): Promise<void> {
    const pending = new Set(pendingIds(head, manifest));
    const queue = await this.queueTarget(head.queueUid);
    if (queue && pending.size > 0 && this.handlesValid(head, this.now())) {
      const owed = [...manifest.entries, ...manifest.moves].filter((m) => pending.has(m.id));
      await this.releaseVisibility(queue.sqsUrl, returnNow(owed), 'owed moves');
    }
    await this.o.store.markApplied(head.batchId, []);
    await this.o.store.releaseSlot(head.consumerUid, head.batchId, { recoveredAt: this.now() });
  }

  /**
   * The runner's half of a dead-letter move: bodies for messages the Host itself asked to move
   * (by id, from `finalize`); ids, attempts and receipt handles come from the Host's records,
   * never from the caller. `last` ends the batch and frees its slot.
   */
  async deadLetterAsRunner(
    batchId: string,
    credential: string,
    items: DeadLetterItem[],
    last: boolean,
  ): Promise<void> {
    const head = await this.ownedHead(batchId, credential);
    const manifest: Manifest = (await this.o.store.getManifest(head)) ?? { entries: [], moves: [] };
    const pending = new Set(pendingIds(head, manifest));
    if (!head.applied || head.recovering || items.some((i) => !pending.has(i.id))) {
      throw new NamedError('unknown_batch', 'these messages are not owed a move by this batch');
    }
    const byId = new Map([...manifest.entries, ...manifest.moves].map((m) => [m.id, m]));
    const bodies = new Map(items.map((i) => [i.id, i.body]));
    await this.moveToDeadLetter(
      head,
      [...bodies].map(([id, body]) => ({
        entry: byId.get(id) as ManifestEntry,
        body,
        lastOutcome: lastOutcomeOf(head, manifest, id),
      })),
    );
    if (last) {
      // Owed moves the runner did not send go back to the queue and are moved on their return.
      const left = [...pending].filter((id) => !bodies.has(id)).map((id) => byId.get(id) as ManifestEntry);
      const queue = await this.queueTarget(head.queueUid);
      if (queue && left.length > 0)
        await this.releaseVisibility(queue.sqsUrl, returnNow(left), 'unsent moves');
      await this.o.store.markApplied(batchId, []);
      await this.o.store.releaseSlot(head.consumerUid, batchId);
    }
  }

  /**
   * Moves messages to the consumer's dead-letter queue as new messages (new id, new timestamp,
   * attempts 1), durably there before the originals are removed; drops them without one (DL-07).
   * A message whose move fails stays in its queue with its record and is moved when it returns;
   * the rest of the batch is not affected. Without an attachment nothing is moved or dropped.
   */
  private async moveToDeadLetter(
    head: BatchHead,
    items: { entry: ManifestEntry; body: Uint8Array; lastOutcome: string }[],
  ): Promise<void> {
    if (items.length === 0) return;
    const a = await this.consumer(head.consumerUid);
    const queue = await this.queueTarget(head.queueUid);
    if (!queue) return; // the queue is gone, and its messages with it
    const keep = (kept: ManifestEntry[], why: string) => {
      if (kept.length === 0) return Promise.resolve(new Set<string>());
      log.warn(`dead-letter move postponed: ${why}`, {
        consumerUid: head.consumerUid,
        messages: kept.length,
        retryInSeconds: MOVE_RETRY_SECONDS,
      });
      const hidden = this.changeVisibility(
        queue.sqsUrl,
        kept.flatMap((m) => (m.handles ?? []).map((handle) => ({ handle, seconds: MOVE_RETRY_SECONDS }))),
      );
      return hidden.then(async (failed) => {
        await this.o.delivery.hidden(head.consumerUid, head.generation, [MOVE_RETRY_SECONDS]);
        return failed;
      });
    };
    if (!a) {
      // The consumer was deleted meanwhile: its messages stay where they are (QC-08).
      await keep(
        items.map((i) => i.entry),
        'the consumer is gone',
      );
      return;
    }
    const dlqUid = a.spec.deadLetterQueue?.resourceUid;
    const dlq = dlqUid ? await this.queueTarget(dlqUid) : undefined;
    if (dlqUid && !dlq) {
      await keep(
        items.map((i) => i.entry),
        'the dead-letter queue is not available',
      );
      return;
    }
    let done: ManifestEntry[] = items.map((i) => i.entry);
    if (dlq) {
      done = [];
      const now = this.now();
      const outgoing = items.map((item) => {
        const delay = dlq.defaultDelaySeconds;
        const env: Envelope = { id: `m${newToken(16)}`, ts: now, body: item.body };
        if (delay > MESSAGE_LIMITS.sqsMaxDelaySeconds) env.notBefore = now + delay * 1000;
        return {
          entry: item.entry,
          copyId: env.id,
          lastOutcome: item.lastOutcome,
          body: encodeEnvelope(env),
          delay: Math.min(delay, MESSAGE_LIMITS.sqsMaxDelaySeconds),
        };
      });
      // Where each copy came from, for operators (`dlq peek`); written first, so a copy never
      // exists without it. A record whose copy is never sent is harmless and expires.
      try {
        await this.o.store.putDeadLetterRecords(
          dlq.queueUid,
          outgoing.map((o) => ({
            copyId: o.copyId,
            record: {
              sourceQueueUid: queue.queueUid,
              sourceQueueName: queue.queueName,
              originalId: o.entry.id,
              attempts: o.entry.attempts,
              lastOutcome: o.lastOutcome,
              movedAt: now,
            },
          })),
          Math.ceil(now / 1000) + dlq.retentionSeconds + dlq.defaultDelaySeconds + 86_400,
        );
      } catch (err) {
        // An aid for operators, not part of the move: the move goes on without it.
        log.warn('dead-letter records could not be written', { consumerUid: head.consumerUid, err });
      }
      const refused: ManifestEntry[] = [];
      // Split by bytes as well as by count: ten large bodies exceed one request's payload limit.
      for (const part of bySendLimits(outgoing, (o) => o.body)) {
        try {
          const failed = new Set(
            (
              await this.o.messages.sendBatch(
                dlq.sqsUrl,
                part.map((o) => ({ body: o.body, delaySeconds: o.delay })),
              )
            ).map((f) => f.index),
          );
          for (const [n, o] of part.entries()) {
            if (failed.has(n)) {
              refused.push(o.entry);
              continue;
            }
            done.push(o.entry);
            log.info('message moved to the dead-letter queue', {
              consumerUid: head.consumerUid,
              messageId: o.entry.id,
              attempts: o.entry.attempts,
              deadLetterQueueUid: dlq.queueUid,
              copyId: o.copyId,
            });
          }
        } catch (err) {
          log.warn('the dead-letter queue refused a request', { consumerUid: head.consumerUid, err });
          refused.push(...part.map((o) => o.entry));
        }
      }
      crashPoint('delivery.after-dead-letter-send');
      if (done.length > 0) await this.o.delivery.sent(dlq.queueUid);
      await keep(refused, 'the dead-letter queue refused messages');
    } else {
      for (const m of done)
        log.info('message dropped after its last delivery (the consumer has no dead-letter queue)', {
          consumerUid: head.consumerUid,
          queueUid: head.queueUid,
          messageId: m.id,
          attempts: m.attempts,
        });
    }
    const failed = await this.deleteMessages(
      queue.sqsUrl,
      done.flatMap((m) => m.handles ?? []),
    );
    // A recovery that ran while this move waited on SQS (past the slot's deadline) may have
    // returned an original before its delete, which then removed nothing (a receipt handle of a
    // message received again deletes nothing, on SQS as on its stand-in). Recovery fences the
    // batch before it returns anything, so the head read after the delete tells.
    const fresh = await this.o.store.getHead(head.batchId);
    const owed = new Set(fresh && !fresh.recovering ? fresh.pendingDeadLetter : []);
    const expires = recordExpiry(this.now());
    for (const m of done) {
      if ((m.handles ?? []).some((h) => failed.has(h)) || !owed.has(m.id)) {
        // The original could not be removed and will come back: its fate is final (moved or
        // dropped), so it is deleted on sight, never delivered again as a first attempt (DL-07).
        await this.o.store.putAttempts(
          head.queueUid,
          { id: m.id, attempts: m.attempts, acked: true },
          expires,
        );
      } else await this.o.store.clearAttempts(head.queueUid, m.id);
    }
  }

  /** Recovery of lost batches (`batch-recovery.ts`): at their deadline, a failed lane, a restart. */
  recoverExpired(consumerUid: string): Promise<number> {
    return this.recovery.recoverExpired(consumerUid);
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
  dispatchState(consumerUid: string) {
    return this.o.store.dispatchState(consumerUid);
  }

  /** Before `lanes` lanes of a cohort start: the slot map is ready for their takes. */
  prepareSlots(consumerUid: string, maxConcurrency: number, lanes: number): Promise<void> {
    return this.o.store.prepareSlots(consumerUid, maxConcurrency, lanes);
  }

  /** Counts a send through the Host to the consumer's queue; returns the state after it. */
  countWake(consumerUid: string) {
    return this.o.store.wake(consumerUid, this.now());
  }

  /** One wake at a time starts a lane: the lease lasts until that lane takes a slot. */
  claimStart(consumerUid: string, leaseMs: number) {
    return this.o.store.claimStart(consumerUid, this.now(), leaseMs);
  }

  /** The running batches of a consumer and their deadlines (for operators and tests). */
  slotsOf(consumerUid: string): Promise<Record<string, number>> {
    return this.o.store.slots(consumerUid);
  }

  /** Batches that started and have not ended (QC-08): expired ones are recovered first. */
  async inFlightBatches(consumerUid: string): Promise<number> {
    await this.recoverExpired(consumerUid);
    await this.o.store.revokeUnregistered(consumerUid);
    return Object.keys(await this.o.store.slots(consumerUid)).length;
  }

  /** Changes visibility; returns the handles whose change SQS did not confirm. */
  private async changeVisibility(url: string, items: Visibility[]): Promise<Set<string>> {
    return (await changeVisibility(this.o.messages, url, items)).failed;
  }

  /**
   * Returns messages to the queue (or hides them for a retry delay) where leaving them hidden
   * would stall them: until the batch's hold ends, which at the default worker timeout is more
   * than 15 minutes. When SQS did not take a change (an outage, not a refused handle), this
   * throws before the batch is marked applied, so the runner reports the batch unfinished and
   * recovery applies it again, at once and until SQS takes it.
   */
  private async releaseVisibility(url: string, items: Visibility[], what: string): Promise<void> {
    const { unsent } = await changeVisibility(this.o.messages, url, items);
    if (unsent > 0)
      throw new Error(`SQS did not take ${unsent} visibility changes (${what}); applied again later`);
  }

  /** Deletes by receipt handle (retrying entries SQS failed); returns the handles not deleted. */
  private async deleteMessages(url: string, handles: string[]): Promise<Set<string>> {
    return (await deleteMessages(this.o.messages, url, handles)).failed;
  }

  /** `deleteMessages`, also counting the deletes SQS did not take (an outage, not a refused handle). */
  private deletions(url: string, handles: string[]) {
    return deleteMessages(this.o.messages, url, handles);
  }
}

/** The ids still owed a dead-letter move (heads of older Host versions kept manifest indexes). */
function pendingIds(head: BatchHead, manifest: Manifest): string[] {
  return head.pendingDeadLetter.flatMap((p: string | number) =>
    typeof p === 'number' ? (manifest.entries[p]?.id ?? []) : p,
  );
}

export type { ConsumerSpec };
