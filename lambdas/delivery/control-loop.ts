/**
 * The delivery control loop: when lane executions start, how many, when they end, how an idle
 * consumer wakes and when recovery runs. One module for AWS and the local Host: the step Lambda,
 * the batch host, the producer paths and the supervisor call it on AWS, and the local Host calls
 * it from the same places, with a launcher that runs the same state machine in process.
 *
 * A *lane* is one execution of the dispatcher state machine (`dispatcher-definition.ts`): it takes
 * a slot, runs batches through the worker, and repeats until its queue is idle. Lanes are cheap to
 * start and end by themselves, so the loop never needs to count them exactly; the slot map alone
 * bounds how many batches run (DL-02: `size(slots) < maxConcurrency`, in the store). Lanes start:
 *
 * - **on send** (`wake`): a send through the Host to a consumer with no lane receiving starts one;
 * - **on backlog** (`register`): a lane whose receive filled its batch starts one more lane while
 *   a slot is free — before its handler runs, so slow handlers scale as fast as quick ones — and
 *   the lanes double per batch round until the backlog or maxConcurrency is reached (not from the
 *   first batch of a supervisor round's lanes, which already cover the backlog they saw);
 * - **by the supervisor** (`supervise`, every minute on AWS): for a visible backlog no lane is
 *   receiving — messages sent straight to SQS, and lanes lost to failures;
 * - **by hand-over**: a lane that ran `ROUNDS_PER_EXECUTION` rounds starts its successor and ends,
 *   which bounds every execution's history;
 * - **on update** (`superviseConsumer` with `activated`): the executor's update starts the new
 *   generation's lanes for a backlog, and the old generation's lanes go on as its lanes.
 *
 * Lanes end when their queue is idle (nothing arrived during the idle wait), when every slot is
 * taken (the holders are lanes themselves), or when the consumer stops.
 */
import { newToken } from '../engine/ids.ts';
import { forEachBounded } from '../shared/bounded.ts';
import { log } from '../shared/log.ts';
import type {
  AcquireResult,
  DeliveryService,
  InheritedLane,
  Received,
  RegisterOptions,
  Registration,
  Slot,
} from './delivery-service.ts';
import type { DispatchState } from './delivery-store.ts';
import { dispatcherInput } from './dispatcher-definition.ts';
import { type DueLaneClaims, DueLaneStarts } from './due-lanes.ts';
import { EXPRESS_MAX_START_AFTER_SECONDS, expressLaneUntil, type LaneKind } from './lane-kinds.ts';
import { laneBatchId } from './slots.ts';
import { unfinishedBatchOf } from './unfinished-batch.ts';

/** What an execution of the dispatcher state machine starts from (`dispatcherInput`). */
export interface LaneInput {
  consumerUid: string;
  generation: number;
  /** Rounds (worker invocations) this execution has run; it hands over at the bound. */
  round: number;
  idle: boolean;
  /** Seconds to wait before the first AcquireSlot (a lane for messages hidden until then). */
  startAfter?: number;
  /**
   * The sealed context of the lane that started this one (`InheritedLane`), or `{}`: always
   * present, since the state machine's paths must resolve; read by the first AcquireSlot only.
   */
  inherit: Record<string, unknown>;
}

/** Starts dispatcher executions: Step Functions on AWS, the in-process runner locally. */
export interface LaneLauncher {
  /**
   * `exists` when an execution of that name runs or ran (names make Standard starts idempotent;
   * Express ones are not checked). `kind` picks the state machine (`lane-kinds.ts`); a launcher
   * without an Express one starts every lane on Standard.
   */
  start(name: string, input: LaneInput, kind?: LaneKind): Promise<'started' | 'exists'>;
}

/**
 * What AcquireSlot sends of the lane's state (`lane.$: '$'`): the execution's input in its first
 * round, the state the step's last answer rebuilt after it (other fields are ignored).
 */
export interface LaneState {
  consumerUid: string;
  generation: number;
  round?: number;
  startAfter?: number;
  inherit?: unknown;
}

/** The execution a lane runs in (`$$.Execution`): with the round it names the round's first slot. */
export interface LaneExecution {
  id: string;
  startTime?: string;
}

/** The dispatcher step Lambda's actions (what the state machine's Host tasks send). */
export type DispatcherStepInput =
  /** `startedAt`: an Express lane's execution start (`$$.Execution.StartTime`). */
  | { action: 'acquire'; lane: LaneState; startedAt?: string; execution?: LaneExecution }
  /** An execution of the definition before `lane` (running through a deploy). */
  | { action: 'acquire'; consumerUid: string; generation: number; inherit?: unknown }
  | {
      action: 'recover';
      consumerUid: string;
      batchId: string;
      /** The failed InvokeWorker's `{Error, Cause}` (the Catch's output). */
      failure?: { Error?: string; Cause?: string };
      /**
       * From an Express lane, which cannot wait for a kept slot: a Standard lane of this
       * generation waits instead.
       */
      express?: { generation: number };
    }
  | { action: 'handover'; consumerUid: string; generation: number };

/** AcquireSlot's answer: the lane's state for its next states (`laneAfterAcquire`). */
export type AcquireAnswer =
  | ((
      | AcquireResult
      | { status: 'wait'; waitSeconds: number }
      /** The lane went on in another execution (an Express lane's window ran out). */
      | { status: 'handedOver'; handedOver: boolean }
    ) & { lane: NextLaneState; laneUntil?: number })
  | AcquireResult;

/** The lane's state the definition rebuilds from AcquireSlot's answer. */
export interface NextLaneState {
  consumerUid: string;
  generation: number;
  round: number;
  inherit: Record<string, unknown>;
}

/**
 * The lane's state after AcquireSlot: a lane that must wait first (`startAfter`) waits with its
 * context kept; otherwise the round is counted and the starting lane's context is used up (later
 * rounds read afresh). The wait counts as a round too: it is one in the execution's history, and
 * an Express lane late after it was late by choice, not by a slow start (`acquireForLane`).
 */
export function laneAfterAcquire(lane: LaneState): { wait?: number; next: NextLaneState } {
  if (lane.startAfter !== undefined && lane.startAfter > 0) {
    const inherit = isRecord(lane.inherit) ? lane.inherit : {};
    return { wait: lane.startAfter, next: { ...roundCounted(lane), inherit } };
  }
  return { next: roundCounted(lane) };
}

/**
 * The lane's state after an AcquireSlot that did not wait (whatever it answered): its round
 * counted, the starting lane's context used up.
 */
export function roundCounted(lane: LaneState): NextLaneState {
  const { consumerUid, generation } = lane;
  return { consumerUid, generation, round: (lane.round ?? 0) + 1, inherit: {} };
}

/**
 * The lane's next state after a take: a lane whose consumer was updated took its slot for the
 * new generation (`SlotDesk.acquire`), and goes on as a lane of that generation.
 */
function laneOfSlot(next: NextLaneState, r: AcquireResult): NextLaneState {
  return r.status === 'acquired' && r.slot.generation !== next.generation
    ? { ...next, generation: r.slot.generation }
    : next;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export type DispatcherStepResult =
  | AcquireAnswer
  | { recovered: true; waitSeconds: number }
  | { handedOver: boolean };

/** A lane waiting for a slot kept by a failed invocation waits at most this long per round. */
export const MAX_HELD_WAIT_SECONDS = 3_600;

/** Lanes for a backlog: enough for `visible` messages, within maxConcurrency, minus those held. */
export function lanesForBacklog(p: {
  visible: number;
  maxBatchSize: number;
  maxConcurrency: number;
  held: number;
}): number {
  if (p.visible <= 0) return 0;
  const wanted = Math.min(p.maxConcurrency, Math.ceil(p.visible / Math.max(1, p.maxBatchSize)));
  return Math.max(0, wanted - p.held);
}

/** A full batch is evidence of a backlog: one more lane while a slot is free. */
export function lanesAfterBatch(p: { full: boolean; room: boolean }): number {
  return p.full && p.room ? 1 : 0;
}

/**
 * Slots taken by lanes that are still receiving (not yet holding a registered batch). One whose
 * receive window has passed — `tailMs` before its deadline — belongs to a lane that is
 * registering or gone (its invocation died, or its registration and release failed while
 * DynamoDB was down): it receives nothing more, so it covers no backlog.
 */
export function gatheringSlots(state: DispatchState, now = Number.NEGATIVE_INFINITY, tailMs = 0): number {
  return Object.entries(state.slots).filter(
    ([b, deadline]) => !state.registered[b] && deadline - tailMs > now,
  ).length;
}

/**
 * A send wakes the consumer only when no lane is receiving or about to (a lane a wake started
 * that has not taken its slot yet) and a slot is free.
 */
export function lanesOnWake(state: DispatchState, maxConcurrency: number, now: number, tailMs = 0): number {
  const starting = state.starting !== undefined && state.starting > now;
  return !starting &&
    gatheringSlots(state, now, tailMs) === 0 &&
    Object.keys(state.slots).length < maxConcurrency
    ? 1
    : 0;
}

/** How long a wake's start lease lasts if its lane never takes a slot (a failed start). */
export const WAKE_START_LEASE_MS = 30_000;

/**
 * Messages due within this long get a lane of their own; later ones (up to SQS's 12 h) are left
 * to the supervisor's minute, so a waiting execution never lasts long.
 */
export const WAKE_LATER_MAX_SECONDS = 900;
/**
 * Lane starts of one consumer's round in flight at once. With the round's parallel visits
 * (`SUPERVISE_PARALLEL`) at most 16 × 8 starts are in flight: a bounded burst on Step Functions'
 * account-wide StartExecution bucket, whose throttles the SDK retries.
 */
export const LANE_START_PARALLEL = 8;

/** Distinct return times one call starts lanes for. */
export const WAKE_LATER_MAX_LANES = 3;

const consumerKey = (consumerUid: string, generation: number) => `${consumerUid}-g${generation}`;

/**
 * Execution names (≤ 80 characters of `[A-Za-z0-9_-]`). A wake's lane is named by the wake count
 * that started it; a supervisor round's by the second it was scheduled for (not the second it ran
 * in), so a repeated round (EventBridge delivers at least once) starts each lane once.
 */
export const laneNames = {
  wake: (c: string, g: number, wakes: number) => `${consumerKey(c, g)}-w${wakes}`,
  supervisor: (c: string, g: number, now: number, i: number) =>
    `${consumerKey(c, g)}-t${Math.floor(now / 1000)}-${i}`,
  spawn: (c: string, g: number) => `${consumerKey(c, g)}-s${newToken(12)}`,
  later: (c: string, g: number, dueSecond: number) => `${consumerKey(c, g)}-d${dueSecond}`,
  handover: (c: string, g: number) => `${consumerKey(c, g)}-h${newToken(12)}`,
};

/** The consumer of a queue, as a send's wake needs it (cached briefly by the caller's choice). */
export type ConsumerOfQueue = (
  queueUid: string,
) => Promise<{ consumerUid: string; generation: number; maxConcurrency: number } | undefined>;

export interface ControlLoopOptions {
  service: DeliveryService;
  launcher: LaneLauncher;
  consumerOfQueue?: ConsumerOfQueue;
  clock?: () => number;
  dueLanes?: DueLaneClaims;
}

export class ControlLoop {
  private readonly o: ControlLoopOptions;
  private readonly clock: () => number;

  /** Lanes for messages due later: one per second from this process, and one per consumer's window. */
  private readonly dueStarts: DueLaneStarts;

  constructor(opts: ControlLoopOptions) {
    this.o = opts;
    this.clock = opts.clock ?? Date.now;
    this.dueStarts = new DueLaneStarts(opts.dueLanes);
  }

  /** The Host tasks of the state machine (AcquireSlot, RecoverBatch, HandOver). */
  async step(input: DispatcherStepInput): Promise<DispatcherStepResult> {
    switch (input.action) {
      case 'acquire':
        return 'lane' in input
          ? this.acquireForLane(input.lane, input.startedAt, input.execution)
          : this.o.service.acquire(input.consumerUid, input.generation, input.inherit);
      case 'recover': {
        const { heldUntil } = await this.o.service.recoverLane(
          input.consumerUid,
          input.batchId,
          unfinishedBatchOf(input.failure),
        );
        const wait = heldUntil === undefined ? 0 : Math.ceil((heldUntil - this.clock()) / 1000) + 1;
        const waitSeconds = Math.max(0, Math.min(MAX_HELD_WAIT_SECONDS, wait));
        if (input.express && waitSeconds > 0) {
          // The Express lane ends (its definition does not wait); a Standard lane waits for the
          // kept slot's deadline and goes on, as a Standard lane itself would.
          const { generation } = input.express;
          await this.launch(
            laneNames.handover(input.consumerUid, generation),
            input.consumerUid,
            generation,
            'kept slot',
            waitSeconds,
            undefined,
            'standard',
          );
        }
        return { recovered: true, waitSeconds };
      }
      case 'handover': {
        const started = await this.launch(
          laneNames.handover(input.consumerUid, input.generation),
          input.consumerUid,
          input.generation,
          'hand-over',
        );
        return { handedOver: started };
      }
    }
  }

  /**
   * AcquireSlot: the lane's next state (`laneAfterAcquire`) with a slot, a wait, or — in an
   * Express lane (`startedAt`) — a hand-over when a whole batch no longer fits its window, or a
   * wait would not: the lane goes on in a new execution of the kind its consumer fits, with the
   * context just read.
   */
  private async acquireForLane(
    lane: LaneState,
    startedAt?: string,
    execution?: LaneExecution,
  ): Promise<AcquireAnswer> {
    const { wait, next } = laneAfterAcquire(lane);
    const batchId = laneBatchId(execution, lane.round ?? 0);
    const { consumerUid, generation } = lane;
    const inherit = isRecord(lane.inherit) ? lane.inherit : {};
    const until = startedAt === undefined ? undefined : (expressLaneUntil(startedAt) ?? 0);
    // The lane ends here and goes on in a new execution of `kind`.
    const elsewhere = async (
      reason: string,
      kind: LaneKind,
      startAfter?: number,
      context?: InheritedLane,
    ) => {
      const name = laneNames.handover(consumerUid, generation);
      const handedOver = await this.launch(name, consumerUid, generation, reason, startAfter, context, kind);
      return { status: 'handedOver' as const, handedOver, lane: next };
    };
    if (wait !== undefined) {
      if (until === undefined || wait <= EXPRESS_MAX_START_AFTER_SECONDS) {
        return { status: 'wait', waitSeconds: wait, lane: next };
      }
      const context = Object.keys(inherit).length > 0 ? (inherit as InheritedLane) : undefined;
      return elsewhere('long wait', 'standard', wait, context);
    }
    if (until === undefined) {
      const r = await this.o.service.acquire(consumerUid, generation, inherit, batchId);
      return { ...r, lane: laneOfSlot(next, r) };
    }
    const r = await this.o.service.acquireWithin(consumerUid, generation, inherit, until, batchId);
    // A lane that could not take its first slot inside a fresh window (its AcquireSlot came late:
    // throttled, or a cold start past the room) goes on in Standard, so hand-overs never repeat.
    // After its own wait (round 1) a lane hands over to the kind its consumer fits: the new lane
    // starts without a wait, so if it too comes late, it is the one that goes to Standard.
    if (r.status === 'elsewhere') {
      const kind = (lane.round ?? 0) === 0 ? 'standard' : r.kind;
      // Of the generation it read (an updated consumer's new one), as the lane it hands over to.
      const name = laneNames.handover(consumerUid, r.inherit.generation);
      const handedOver = await this.launch(
        name,
        consumerUid,
        r.inherit.generation,
        'window',
        undefined,
        r.inherit,
        kind,
      );
      return { status: 'handedOver', handedOver, lane: next };
    }
    return r.status === 'acquired'
      ? { ...r, laneUntil: until, lane: laneOfSlot(next, r) }
      : { ...r, lane: next };
  }

  /**
   * Registers a lane's batch. A receive that filled the batch (maxBatchSize) is evidence of a
   * backlog: while a slot is free, one more lane starts, before this batch's handler runs.
   */
  async register(slot: Slot, received: Received[], opts?: RegisterOptions): Promise<Registration> {
    const r = await this.o.service.register(slot, received, opts);
    const full = received.length >= slot.maxBatchSize;
    if (r.credential && lanesAfterBatch({ full, room: r.room === true })) {
      try {
        // The new lane takes over this lane's context: no reads of attachment, queue and worker.
        await this.launch(
          laneNames.spawn(slot.consumerUid, slot.generation),
          slot.consumerUid,
          slot.generation,
          'backlog',
          undefined,
          this.o.service.inheritableLane(slot),
        );
      } catch (err) {
        // Scaling is an optimisation: this batch runs either way.
        log.warn('could not start another lane for a backlog', { consumerUid: slot.consumerUid, err });
      }
    }
    return r;
  }

  /**
   * After a send through the Host (HTTP extension, `env` bindings): the queue's consumer gets a
   * lane within the time a lane takes to start, rather than at the supervisor's next minute — for
   * messages due now (`now`), and for delayed ones when SQS makes them visible (`later`, their
   * delays in seconds). A failure here never fails the send (the supervisor still starts a lane
   * for the backlog).
   */
  async wake(queueUid: string, later: readonly number[] = [], now = true): Promise<void> {
    try {
      const consumer = await this.o.consumerOfQueue?.(queueUid);
      if (!consumer) return;
      // Sent with a delay: lanes when they become visible, as for retries (no lane idles for them).
      if (later.length > 0) await this.wakeLater(consumer.consumerUid, consumer.generation, [...later]);
      if (!now) return;
      const counted = await this.o.service.countWake(consumer.consumerUid);
      // The first shard of a consumer with several shows a lane receiving there, or else says
      // nothing of the others: then they are read before a lane is started, until one shows a
      // lane receiving (which then sees this send: `releaseIdle`).
      const tail = this.o.service.receiveTailMs;
      const receiving = (seen: DispatchState) => gatheringSlots(seen, this.clock(), tail) > 0;
      const state =
        counted.partial && lanesOnWake(counted, consumer.maxConcurrency, this.clock(), tail) > 0
          ? {
              ...(await this.o.service.dispatchState(consumer.consumerUid, receiving)),
              wakes: counted.wakes,
              ...(counted.starting !== undefined ? { starting: counted.starting } : {}),
            }
          : counted;
      if (lanesOnWake(state, consumer.maxConcurrency, this.clock(), tail) === 0) return;
      // Of concurrent sends to an idle consumer, one starts the lane.
      if (!(await this.o.service.claimStart(consumer.consumerUid, WAKE_START_LEASE_MS))) return;
      await this.launch(
        laneNames.wake(consumer.consumerUid, consumer.generation, state.wakes ?? 0),
        consumer.consumerUid,
        consumer.generation,
        'send',
      );
    } catch (err) {
      log.warn('could not wake the consumer of a queue; the supervisor will', { queueUid, err });
    }
  }

  /**
   * One supervision round for a consumer: recover batches whose deadline passed, then start lanes
   * for a visible backlog that no lane is receiving. Returns how many lanes it started. `roundAt`
   * (epoch ms) names the round's lanes: the same round run twice starts nothing new. `activated`:
   * the round of a generation that just became active, whose receiving lanes, if any, may be the
   * old generation's (their registrations are refused now): they do not cover the backlog.
   */
  async superviseConsumer(
    c: { consumerUid: string; generation: number; maxBatchSize: number; maxConcurrency: number },
    visibleNow: () => Promise<number>,
    roundAt: number = this.clock(),
    opts: { activated?: boolean } = {},
  ): Promise<{ recovered: number; started: number; visible: number }> {
    const recovered = await this.o.service.recoverExpired(c.consumerUid, { bound: c.maxConcurrency });
    // Read after recovery, which may have returned messages to the queue.
    const visible = await visibleNow();
    const state = await this.o.service.dispatchState(c.consumerUid);
    const covered = !opts.activated && gatheringSlots(state, this.clock(), this.o.service.receiveTailMs) > 0;
    if (visible <= 0 || covered) return { recovered, started: 0, visible };
    const count = lanesForBacklog({
      visible,
      maxBatchSize: c.maxBatchSize,
      maxConcurrency: c.maxConcurrency,
      held: Object.keys(state.slots).length,
    });
    let started = 0;
    // One read of the lane context for every lane of the round, instead of one per lane start;
    // if that read fails, each lane reads its own, as before. The lanes are a cohort: together
    // they cover the backlog, so their first batches start no more lanes (each would find the
    // slots of the others, still starting, free), and their takes begin in different shards.
    const cohort =
      count > 1
        ? await this.o.service.sealedCohort(c.consumerUid, c.generation, count).catch((err: unknown) => {
            log.warn('could not seal a cohort; each of its lanes reads its own context', {
              consumerUid: c.consumerUid,
              err,
            });
            return undefined;
          })
        : undefined;
    if (cohort) {
      // A cohort of lanes fills the map at once: its shards exist before the lanes' takes.
      const bound = { max: c.maxConcurrency, generation: c.generation };
      await this.o.service.prepareSlots(c.consumerUid, bound, count).catch((err) => {
        log.warn('could not prepare the slot map; the lanes create what they need', { err });
      });
    }
    // Up to 250 lanes: one start after another took a round longer than its minute.
    const ranks = Array.from({ length: count }, (_, i) => i);
    await forEachBounded(ranks, LANE_START_PARALLEL, async (i) => {
      const name = laneNames.supervisor(c.consumerUid, c.generation, roundAt, i);
      if (await this.launch(name, c.consumerUid, c.generation, 'backlog', undefined, cohort?.[i])) started++;
    });
    return { recovered, started, visible };
  }

  /**
   * Messages of a consumer's queue were hidden until later (retry delays, commit waits, postponed
   * moves): a lane starts for each distinct second they return in (the earliest few), so they are
   * delivered when due rather than at the supervisor's next minute. Lanes are named by that
   * second, so a batch of retries with one delay starts one lane.
   */
  async wakeLater(consumerUid: string, generation: number, seconds: number[]): Promise<void> {
    const now = this.clock();
    const due = [...new Set(seconds.filter((x) => x > 0 && x <= WAKE_LATER_MAX_SECONDS))]
      .sort((a, b) => a - b)
      .slice(0, WAKE_LATER_MAX_LANES);
    for (const after of due) {
      const at = Math.floor(now / 1000) + after;
      const name = laneNames.later(consumerUid, generation, at);
      // A lane started for the same second, or by another process for a moment just before it
      // that still polls then, covers it (`due-lanes.ts`).
      const claim = await this.dueStarts.claim(name, consumerUid, at, now);
      if (claim === 'covered') continue;
      try {
        await this.launch(name, consumerUid, generation, 'due', after);
      } catch (err) {
        await this.dueStarts.forget(name, consumerUid, at, claim);
        log.warn('could not start a lane for messages due later; the supervisor will', { consumerUid, err });
      }
    }
  }

  private async launch(
    name: string,
    consumerUid: string,
    generation: number,
    reason: string,
    startAfter?: number,
    inherit?: InheritedLane,
    kind: LaneKind = this.kindOfLane(startAfter, inherit),
  ) {
    const out = await this.o.launcher.start(
      name,
      dispatcherInput(consumerUid, generation, 0, startAfter, inherit),
      kind,
    );
    if (out === 'started') log.debug('lane starts', { consumerUid, generation, reason, name, kind });
    return out === 'started';
  }

  /**
   * A lane starts on Express when its consumer is known to fit (the context it inherits says so),
   * or is not known (its first AcquireSlot moves it to Standard if it does not fit); on Standard
   * when it would wait too long for Express first, or its consumer is known not to fit.
   */
  private kindOfLane(startAfter?: number, inherit?: InheritedLane): LaneKind {
    if (startAfter !== undefined && startAfter > EXPRESS_MAX_START_AFTER_SECONDS) return 'standard';
    return inherit ? this.o.service.laneKindOf(inherit) : 'express';
  }
}
