/**
 * Concurrency slots: a lane takes one before it receives (never more than maxConcurrency are
 * held, DL-02), learns its consumer generation, queue and worker once and seals them into the
 * slot, and hands the slot to its next batch in the write that frees it.
 */
import { createHash } from 'node:crypto';
import { newToken } from '../engine/ids.ts';
import { log } from '../shared/log.ts';
import { laneRootOf } from './batch-recovery.ts';
import { type DeliveryContext, SKEW_ALLOWANCE_MS } from './delivery-context.ts';
import type { DispatchState } from './delivery-store.ts';
import { type BatchBounds, batchFits, type LaneKind, laneKindFor } from './lane-kinds.ts';
import { NamedError } from './limits.ts';
import { laneSealValid, sameMac, sealLane, sealSlot } from './slot-seal.ts';

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
   * registers within half the grace (the grace argument in docs/design/control-loop.md). Absent on slots
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
   * A lane for messages due later was claimed for a second at or before the take, and other lanes
   * due within the idle wait after it were refused on the promise that a lane still polls then:
   * this lane waits for a first message until this time (epoch ms), however its queue is fed
   * (`idleWaitFor`). Absent otherwise.
   */
  watchUntil?: number;
  /**
   * The take saw only its own shard of the consumer's slots (maxConcurrency above one shard):
   * `held` and `due` are of that shard, and the registration reads every shard instead.
   */
  partial?: true;
}

/** What a lane knows of its consumer generation: the slot minus what is per batch. */
export type LaneContext = Omit<
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

export const laneContextOf = ({
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

/**
 * The id of a lane's first batch in a round: derived from its execution and the round, so an
 * AcquireSlot that Step Functions runs again after a lost answer (its take committed) finds the
 * slot its first try took. A random id took a second slot, and the first was held unused until
 * its gathering deadline: with maxConcurrency 1, the consumer had no lane for about two minutes.
 * The start time tells apart two executions of one name (Express names repeat).
 */
export function laneBatchId(
  execution: { id?: unknown; startTime?: unknown } | undefined,
  round: number,
): string | undefined {
  if (typeof execution?.id !== 'string' || execution.id === '') return undefined;
  const digest = createHash('sha256')
    .update(`lane:${execution.id}:${String(execution.startTime ?? '')}:${round}`)
    .digest('base64url');
  return `b${digest.slice(0, 24)}`;
}

/**
 * The id an AcquireSlot takes its slot under: the lane's derived id (`laneBatchId`), the same
 * when Step Functions runs the step again, so the take finds the slot its earlier try took — but
 * another once the lane goes on as the generation that replaced its own (`laneContext`,
 * `orNewer`). With one id across generations, a retry under the new bound found the slot its try
 * had taken under the old one and held it as its own: a batch of the new generation (bound 1)
 * ran in the old generation's shard beside three of the old batches (chaos seed 46).
 */
function takeId(batchId: string | undefined, requested: number, context: LaneContext): string {
  if (batchId === undefined) return `b${newToken(18)}`;
  return context.generation === requested ? batchId : `${batchId}-g${context.generation}`;
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

/**
 * Until when a lane taking its slot at `takenAt` watches the queue for a due lane's claim (see
 * `SlotSnapshot.watchUntil`): the claim covers the idle wait from its second on. A claim still
 * ahead is its own lane's to keep, which takes its slot then; one a second early counts, for
 * clocks a little apart.
 */
export function dueWatchUntil(
  dueLaneAt: number | undefined,
  takenAt: number,
  idleWaitSeconds: number,
): number | undefined {
  if (dueLaneAt === undefined) return undefined;
  const from = dueLaneAt * 1000;
  const until = from + idleWaitSeconds * 1000;
  return from <= takenAt + 1_000 && until > takenAt ? until : undefined;
}

/** Lanes receiving in a read of slots: taken, no batch registered, deadline ahead (`own` aside). */
export function receivingLanes(
  read: { slots?: Record<string, number>; registered?: Record<string, boolean> },
  own: string,
  now: number,
): number {
  const registered = read.registered ?? {};
  return Object.entries(read.slots ?? {}).filter(
    ([id, until]) => id !== own && until > now && !registered[id],
  ).length;
}

export class SlotDesk {
  private readonly c: DeliveryContext;

  constructor(c: DeliveryContext) {
    this.c = c;
  }

  /**
   * AcquireSlot, a lane's first slot of a worker invocation: reads the consumer generation, its
   * queue and worker once, and seals what it learned into the slot; the lane's later slots and
   * the runner's calls carry it (`acquireNext`, `register`, `finalizeAsRunner`). A lane whose
   * consumer was updated meanwhile goes on as a lane of the new generation (the slot says which):
   * as the old generation's batches end, their lanes take the places the new bound has, so a
   * consumer with a backlog does not wait for the supervisor after an update.
   */
  async acquire(
    consumerUid: string,
    generation: number,
    inherited?: unknown,
    batchId?: string,
  ): Promise<AcquireResult> {
    const inheritedLane = this.inheritedContext(consumerUid, generation, inherited);
    const context = inheritedLane?.context ?? (await this.laneContext(consumerUid, generation, true));
    if (!context) return { status: 'stop' };
    return this.take(context, takeId(batchId, generation, context), inheritedLane?.cohort);
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
    batchId?: string,
  ): Promise<AcquireResult | { status: 'elsewhere'; kind: LaneKind; inherit: InheritedLane }> {
    const inheritedLane = this.inheritedContext(consumerUid, generation, inherited);
    const context = inheritedLane?.context ?? (await this.laneContext(consumerUid, generation, true));
    if (!context) return { status: 'stop' };
    if (!batchFits(this.c.now(), until, context, this.c.o.idleWaitSeconds)) {
      return {
        status: 'elsewhere',
        kind: laneKindFor(context, this.c.o.idleWaitSeconds),
        inherit: sealLane(this.c.o.credentialKey, context),
      };
    }
    return this.take(context, takeId(batchId, generation, context), inheritedLane?.cohort);
  }

  /** The kind of lane a consumer runs on, from a slot or lane context of it. */
  laneKindOf(bounds: BatchBounds): LaneKind {
    return laneKindFor(bounds, this.c.o.idleWaitSeconds);
  }

  /** The context to seal into the input of a lane started from this slot's lane; none for old slots. */
  inheritableLane(slot: Slot): InheritedLane | undefined {
    const sealed = this.c.trusted(slot);
    if (sealed.contextReadAt === undefined) return undefined;
    return sealLane(this.c.o.credentialKey, laneContextOf(sealed));
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
      sealLane(this.c.o.credentialKey, { ...context, cohort: rank }),
    );
  }

  /** An inherited context the Host sealed for this consumer generation and that is still fresh. */
  private inheritedContext(
    consumerUid: string,
    generation: number,
    lane: unknown,
  ): { context: LaneContext; cohort?: number } | undefined {
    if (typeof lane !== 'object' || lane === null || !('seal' in lane)) return undefined;
    if (!laneSealValid(this.c.o.credentialKey, lane)) {
      log.warn('a lane brought a context the Host did not seal; read instead', { consumerUid });
      return undefined;
    }
    const { seal, cohort, ...context } = lane as InheritedLane;
    if (context.consumerUid !== consumerUid || context.generation !== generation) return undefined;
    const age = this.c.now() - (context.contextReadAt ?? Number.NEGATIVE_INFINITY);
    // A read from the future (another function's clock ahead) is not trusted either.
    return age >= -SKEW_ALLOWANCE_MS && age <= INHERITED_LANE_MAX_AGE_MS
      ? { context, ...(Number.isSafeInteger(cohort) ? { cohort } : {}) }
      : undefined;
  }

  /**
   * The consumer generation as a lane needs it; undefined when it stopped or changed — unless
   * `orNewer`, for a lane that goes on as a lane of the generation that replaced its own.
   */
  private async laneContext(
    consumerUid: string,
    generation: number,
    orNewer = false,
  ): Promise<LaneContext | undefined> {
    const readAt = this.c.now();
    const a = await this.c.consumer(consumerUid);
    if (a?.state !== 'active' || a.generation < generation) return undefined;
    if (a.generation !== generation && !orNewer) return undefined;
    const queue = await this.c.queueTarget(a.spec.queue.resourceUid);
    const worker = await this.c.o.getWorker(a.spec.worker.resourceUid);
    if (!queue || !worker || worker.deleted) return undefined;
    const workerFunction = await this.c.o.workerFunction(worker.space, worker.name);
    if (!workerFunction) return undefined;
    const own = await this.c.o.workerTimeoutMsOf(worker.space, worker.name);
    return {
      contextReadAt: readAt,
      consumerUid,
      generation: a.generation,
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
      handlerMs: own !== undefined ? Math.min(own, this.c.o.workerTimeoutMs) : this.c.o.workerTimeoutMs,
    };
  }

  /** The slot deadline while gathering: idle wait + batch timeout + room to register + margin. */
  private gatheringDeadline(context: LaneContext, now: number): number {
    // Until registration the slot covers gathering only: a lane lost before its handler starts
    // (or whose registration failed) frees its slot within about a minute, not a worker timeout.
    // Registration extends the deadline to the handler's bound.
    return (
      now +
      (this.c.o.idleWaitSeconds + context.maxBatchTimeoutSeconds) * 1000 +
      REGISTER_ROOM_MS +
      this.c.o.slotMarginMs
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
    const receiving = receivingLanes(state, batchId, takenAt);
    const due: Record<string, number> = {};
    for (const [id, until] of Object.entries(state.slots)) {
      if (id !== batchId && until <= takenAt && !recovered.has(id)) due[id] = until;
    }
    const held = Object.keys(state.slots).filter((id) => !recovered.has(id)).length;
    const watchUntil = dueWatchUntil(state.dueLaneAt, takenAt, this.c.o.idleWaitSeconds);
    return sealSlot(this.c.o.credentialKey, {
      ...context,
      batchId,
      deadline,
      invisibleUntil: deadline + this.c.o.graceMs,
      ...(wakeSeq !== undefined ? { wakeSeq } : {}),
      taken: {
        at: takenAt,
        held,
        due,
        receiving,
        ...(watchUntil !== undefined ? { watchUntil } : {}),
        ...(state.partial ? { partial: true as const } : {}),
      },
    });
  }

  /**
   * Takes a slot if fewer than maxConcurrency are held. Slots whose deadline passed count against
   * the bound until recovered: the answer shows them, they are recovered, and a refused take is
   * tried once more.
   */
  /** `cohort`: the lane's rank in the cohort it was started with, if it was. */
  /** `seenWakes`: the consumer's wake count read before this take (for a slot outside shard 0). */
  async take(
    context: LaneContext,
    batchId: string,
    cohort?: number,
    seenWakes?: number,
  ): Promise<AcquireResult> {
    const now = this.c.now();
    const deadline = this.gatheringDeadline(context, now);
    const max = context.maxConcurrency;
    const bound = { max, generation: context.generation };
    const spread = cohort !== undefined ? { rank: cohort } : undefined;
    let out = await this.c.o.store.takeSlot(context.consumerUid, batchId, deadline, bound, spread);
    const expired = Object.entries(out.state.slots)
      .filter(([id, until]) => id !== out.batchId && until <= now)
      .map(([id]) => id);
    for (const id of expired) {
      await this.c.recoverBatch(context.consumerUid, id, { expired: out.state.slots[id] as number });
    }
    if (!out.taken && expired.length > 0) {
      out = await this.c.o.store.takeSlot(context.consumerUid, batchId, deadline, bound, spread);
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

  /** Whether `credential` is the one the Host derived for `batchId` (constant time). */
  credentialMatches(batchId: string, credential: string): boolean {
    return sameMac(this.c.credentialOf(batchId), credential);
  }

  /**
   * A lane's next slot in the same invocation (after a batch that ended with dead-letter moves,
   * or when the runner did not ask `finalize` for it). The sealed slot and the credential of the
   * batch it just ran prove the caller is this consumer's runner; the consumer generation is
   * read once more, so a stopped or changed consumer ends its lanes here.
   */
  async acquireNext(previous: Slot, credential: string): Promise<AcquireResult> {
    const slot = this.c.trusted(previous);
    if (!this.credentialMatches(slot.batchId, credential)) {
      throw new NamedError('unknown_batch', 'not a batch of this runner');
    }
    if (!(await this.stillActive(slot))) return { status: 'stop' };
    return this.take(laneContextOf(slot), nextBatchId(slot.batchId));
  }

  /** Whether the slot's consumer generation is still the active one. */
  async stillActive(slot: Slot): Promise<boolean> {
    const a = await this.c.consumer(slot.consumerUid);
    return a?.state === 'active' && a.generation === slot.generation;
  }

  /**
   * Frees a finished batch's slot and takes the lane's next one in the same write (the count of
   * held slots is unchanged, so the bound still holds: DL-02).
   */
  async handOver(slot: Slot): Promise<AcquireResult> {
    const context = laneContextOf(slot);
    const now = this.c.now();
    const batchId = nextBatchId(slot.batchId);
    const deadline = this.gatheringDeadline(context, now);
    const out = await this.c.o.store.swapSlot(slot.consumerUid, slot.batchId, batchId, deadline, {
      max: slot.maxConcurrency,
      generation: slot.generation,
    });
    if (!out.taken) return { status: 'busy' };
    const next = this.slotFor(context, out.batchId, out.state.slots[out.batchId] ?? deadline, out.state, now);
    return {
      status: 'acquired',
      held: (next.taken as SlotSnapshot).held,
      capacity: slot.maxConcurrency,
      slot: next,
    };
  }
}
