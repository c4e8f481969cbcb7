import type { DeferItem } from './deferrals.ts';
import type {
  AcquireResult,
  DeadLetterItem,
  Finalized,
  Received,
  RegisterOptions,
  Registration,
  SealedManifest,
  Slot,
} from './delivery-service.ts';
import { batchFits } from './lane-kinds.ts';
import {
  gather,
  giveBack,
  type Held,
  type LaneCarry,
  RECEIVE_AHEAD_MAX_HANDLER_MS,
  type ReceiveDeps,
  type ReceivedAhead,
  receiveAhead,
} from './lane-receive.ts';
import { coalescingSettle } from './settle-coalescer.ts';
import type {
  BatchDelivery,
  HandlerError,
  InvocationOutcome,
  SettleAnswer,
  SettleCall,
} from './settlement-protocol.ts';
import { BatchUnfinishedError } from './unfinished-batch.ts';

export type { LaneCarry, ReceivedAhead } from './lane-receive.ts';
export {
  AHEAD_HIDDEN_MS,
  BACKLOG_WAIT_MS,
  giveBack,
  idleWaitFor,
  LEFT_IDLE_WAIT_SECONDS,
  leavesIdleWait,
  nextParallel,
  RECEIVE_AHEAD_MAX_HANDLER_MS,
  receiveSizes,
} from './lane-receive.ts';

/** The Host's delivery service as the runner reaches it: in-process locally, by Lambda invoke on AWS. */
export interface BatchHostPort {
  /** The lane's next slot, proven by the credential of the batch it just ran. */
  acquire(previous: Slot, credential: string): Promise<AcquireResult>;
  /**
   * `goOn`: the lane goes on, so an empty receive that a send woke takes its next slot at once.
   * `visibleForMs`: how long the received messages stay hidden from now (the first to return).
   */
  register(slot: Slot, received: Received[], opts?: RegisterOptions): Promise<Registration>;
  settle(batchId: string, credential: string, call: SettleCall): Promise<void>;
  /** Several settle calls of one batch, applied in order; one answer per call. */
  settleMany(batchId: string, credential: string, calls: SettleCall[]): Promise<SettleAnswer[]>;
  /**
   * Closes and applies the batch; returns the ids of messages to move (bodies needed). `next`:
   * the lane goes on, and the Host hands this batch's slot to the next one in the same write.
   */
  finalize(
    slot: Slot,
    credential: string,
    outcome: InvocationOutcome,
    opts?: { next?: boolean; manifest?: SealedManifest; error?: HandlerError; handlerMayRun?: boolean },
  ): Promise<Finalized>;
  /** Bodies for the moes `finalize` asked for; resolves once the batch is finished. */
  deadLetter(slot: Slot, credential: string, items: DeadLetterItem[]): Promise<void>;
  /** Bodies for the messages registration said are due much later (`Registration.defer`). */
  defer(slot: Slot, items: DeferItem[]): Promise<void>;
}

/** Runs the worker's `queue` handler on one batch and reports how it ended. */
export interface QueueInvoker {
  /**
   * A handler this invoker reports `abandoned` (cut off, or lost) is stopped for sure by then:
   * its thread was terminated. Without it (a Lambda function, whose handler runs on until its
   * process exits) the batch keeps its slot until its deadline (DL-02).
   */
  readonly stopsAbandonedHandlers?: boolean;
  /**
   * `slot` is the batch's slot: its handler must not run past `slot.deadline`. `failed` is told
   * the handler's error (name and message, for operators) when it threw or could not start.
   */
  invoke(
    delivery: BatchDelivery,
    settle: (call: SettleCall) => Promise<void>,
    slot: Slot,
    failed?: (error: HandlerError) => void,
  ): Promise<InvocationOutcome>;
}

export interface RunnerDeps extends ReceiveDeps {
  host: BatchHostPort;
  invoker: QueueInvoker;
}

export interface RunResult {
  /** Nothing arrived while waiting: the lane may rest. */
  idle: boolean;
  delivered: number;
  /** The batch credential (empty when nothing was registered); proves the lane to `acquire`. */
  credential?: string;
  /** The lane's next slot, handed over by finalisation when `goOn` said so. */
  next?: AcquireResult;
  /** Messages received for the next batch while this one's handler ran (`receiveAhead`). */
  ahead?: ReceivedAhead;
  /** How long this batch's handler ran (ms). */
  handlerMs?: number;
  /** Fewer messages than a full batch arrived: the queue ran dry (or slow) while gathering. */
  dry?: true;
  /** Other lanes receiving, as the registration read every slot (`Registration.receiving`). */
  receiving?: number;
  /** The batch held a message no wake announced (`LaneCarry.unannounced`). */
  unannounced?: true;
}

/** Settlement rejections that prove the Host answered the call (nothing uncertain was written). */
const DEFINITE_REFUSALS: ReadonlySet<string> = new Set([
  'unknown_batch',
  'unknown_message',
  'already_settled',
]);

/**
 * Finalisation is idempotent (the head closes once; decisions are re-applied as the same
 * writes), so a Host call that failed is tried again: a lane that gave up here would leave its
 * slot and messages waiting for the batch's deadline. A refusal is final.
 */
async function withRetries<T>(call: () => Promise<T>, tries = 4): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (attempt >= tries || (err instanceof Error && DEFINITE_REFUSALS.has(err.name))) throw err;
      await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
    }
  }
}

/**
 * Forms one batch in the slot (up to maxBatchSize messages over several receives, waiting at
 * most maxBatchTimeoutSeconds after the first one — 0 means what is there now), registers it,
 * invokes the handler, finalises and dead-letters. Bodies stay in this process (DL-10); the Host
 * sees ids, attempts and receipt handles only.
 *
 * A lane that goes on after a full batch receives its next one while the handler runs (`ahead`
 * in the answer; passed back in as `ahead` for the next slot), unless its handlers are slow.
 */
export async function runBatch(
  slot: Slot,
  deps: RunnerDeps,
  /** Asked once the handler ended: whether the lane runs another batch after this one. */
  goOn: () => boolean = () => false,
  lane: LaneCarry = {},
): Promise<RunResult> {
  const { held, parallel } = await gather(slot, deps, lane);
  const registration = await deps.host.register(
    slot,
    held.map((h) => h.received),
    held.length === 0
      ? goOn()
        ? { goOn: true }
        : undefined
      : {
          visibleForMs: Math.max(
            0,
            Math.floor(Math.min(...held.map((h) => h.hiddenUntilReal)) - performance.now()),
          ),
        },
  );
  if (registration.defer?.length) await deferLater(slot, deps, held, registration.defer);
  // Idle after a failed receive too: the lane rests instead of spinning while SQS is away —
  // unless a send through the Host came after the slot was taken (it may have missed this receive):
  // then the registration took the lane's next slot, and the lane receives again in this invocation.
  if (held.length === 0) {
    return {
      idle: !registration.woken,
      delivered: 0,
      ...(registration.next ? { next: registration.next } : {}),
    };
  }
  const { credential } = registration;
  if (!credential) return { idle: false, delivered: 0 };
  const bodies = new Map<string, Uint8Array>();
  for (const h of held) if (!bodies.has(h.received.envelope.id)) bodies.set(h.received.envelope.id, h.body);

  const batch = registration.deliver.map((d) => ({ ...(held[d.received] as Held), attempts: d.attempts }));
  // A full batch is a backlog: the next one is received while this handler runs, if every slot
  // is held (else a lane with a free slot would run those messages now, not after this handler),
  // the lane will go on, and its handlers are quick (a slow one would keep them hidden for nothing).
  const ahead =
    batch.length > 0 &&
    held.length >= slot.maxBatchSize &&
    registration.saturated === true &&
    goOn() &&
    !(lane.lastHandlerMs !== undefined && lane.lastHandlerMs > RECEIVE_AHEAD_MAX_HANDLER_MS)
      ? receiveAhead(slot, deps, parallel).catch((err: unknown) => {
          // Receiving ahead is an optimisation: what it got returns by itself when hidden briefly.
          deps.log?.('receiving ahead failed', { batchId: slot.batchId, error: (err as Error)?.name });
          return undefined;
        })
      : undefined;
  let outcome: InvocationOutcome = 'returned';
  let handlerError: HandlerError | undefined;
  let handlerMs: number | undefined;
  try {
    if (batch.length > 0) {
      const delivery: BatchDelivery = {
        batchId: slot.batchId,
        credential,
        queue: slot.queueName,
        messages: batch.map((b) => ({
          id: b.received.envelope.id,
          timestampMillis: b.received.envelope.ts,
          body: b.body,
          attempts: b.attempts,
        })),
      };
      // A settlement the Host refused (the call reached it and was answered) is definite. Any other
      // failure — a lost request, a store that could not even mark the batch — leaves the outcome
      // unknown, and nothing of this batch may then be acknowledged implicitly (DL-08).
      let doubtful = false;
      // The handler's calls are grouped: one Host call in flight per batch (see coalescingSettle).
      const toHost = coalescingSettle({
        one: (call) => deps.host.settle(slot.batchId, credential, call),
        many: (calls) => deps.host.settleMany(slot.batchId, credential, calls),
      });
      const settle = async (call: SettleCall): Promise<void> => {
        try {
          await toHost(call);
        } catch (err) {
          if (!(err instanceof Error && DEFINITE_REFUSALS.has(err.name))) doubtful = true;
          throw err;
        }
      };
      const startedAt = performance.now();
      try {
        // The handler's bound is the deadline registration gave the slot.
        const running = registration.deadline ? { ...slot, deadline: registration.deadline } : slot;
        outcome = await deps.invoker.invoke(delivery, settle, running, (e) => {
          handlerError = e;
        });
      } catch {
        outcome = 'abandoned';
      }
      handlerMs = performance.now() - startedAt;
      // The handler returned, but a settlement's outcome is unknown: finalise as after a throw, so
      // the unsettled rest is retried rather than acknowledged.
      if (outcome === 'returned' && doubtful) outcome = 'threw';
    }
    const finished = await finishBatch(
      slot,
      deps,
      goOn(),
      credential,
      outcome,
      registration,
      handlerError,
      bodies,
    );
    const next = await ahead;
    if (!finished.goesOn) {
      await giveBack(deps, slot.sqsUrl, next);
      return { idle: false, delivered: batch.length };
    }
    return {
      idle: false,
      delivered: batch.length,
      credential,
      ...(finished.next ? { next: finished.next } : {}),
      ...(next ? { ahead: next } : {}),
      ...(handlerMs !== undefined ? { handlerMs } : {}),
      ...(held.length < slot.maxBatchSize ? { dry: true as const } : {}),
      ...(registration.receiving !== undefined ? { receiving: registration.receiving } : {}),
      ...(held.some((h) => h.unannounced) ? { unannounced: true as const } : {}),
    };
  } catch (err) {
    // Whatever failed, messages received ahead go back rather than wait out their visibility.
    await giveBack(deps, slot.sqsUrl, await ahead);
    throw err;
  }
}

/**
 * Hands the Host the bodies of messages due much later, which it sends again as delayed copies
 * (deferrals.ts). A failure costs nothing: they return after the receive's short visibility and
 * are decided again.
 */
async function deferLater(
  slot: Slot,
  deps: RunnerDeps,
  held: Held[],
  defer: NonNullable<Registration['defer']>,
): Promise<void> {
  const items = defer.flatMap((d) => {
    const h = held[d.received];
    if (!h) return [];
    const { id, ts } = h.received.envelope;
    return [{ receiptHandles: d.handles, id, ts, notBefore: d.notBefore, body: h.body }];
  });
  try {
    await deps.host.defer(slot, items);
  } catch (err) {
    deps.log?.('could not defer messages due later; they return and are decided again', {
      batchId: slot.batchId,
      error: (err as Error)?.name,
    });
  }
}

/**
 * Finalises the batch (with the lane's next slot when `next`) and makes its dead-letter moves.
 * `goesOn` is false when the moves failed definitely: the batch is finished, the lane is not.
 */
async function finishBatch(
  slot: Slot,
  deps: RunnerDeps,
  next: boolean,
  credential: string,
  outcome: InvocationOutcome,
  registration: Registration,
  handlerError: HandlerError | undefined,
  bodies: Map<string, Uint8Array>,
): Promise<{ goesOn: boolean; next?: AcquireResult }> {
  let fin: Finalized;
  try {
    fin = await withRetries(() =>
      deps.host.finalize(slot, credential, outcome, {
        next,
        manifest: registration.manifest,
        ...(handlerError ? { error: handlerError } : {}),
        ...(outcome === 'abandoned' && deps.invoker.stopsAbandonedHandlers !== true
          ? { handlerMayRun: true }
          : {}),
      }),
    );
  } catch (err) {
    // The handler has ended: recovery may apply the batch now (unfinished-batch.ts).
    if (err instanceof Error && DEFINITE_REFUSALS.has(err.name)) throw err;
    throw new BatchUnfinishedError(slot.batchId, outcome, err);
  }
  if (fin.deadLetter.length > 0) {
    try {
      await deps.host.deadLetter(
        slot,
        credential,
        fin.deadLetter.flatMap((id) => {
          const body = bodies.get(id);
          return body ? [{ id, body }] : [];
        }),
      );
    } catch (err) {
      // The batch is finalised; its moves stay owed and are made when the messages return.
      // Nothing else of the batch is charged. The handler has ended, so recovery returns them
      // now (unfinished-batch.ts) rather than at the slot's deadline.
      deps.log?.('dead-letter move failed; it is retried when the messages return', {
        batchId: slot.batchId,
        error: (err as Error)?.name,
      });
      if (err instanceof Error && DEFINITE_REFUSALS.has(err.name)) return { goesOn: false };
      throw new BatchUnfinishedError(slot.batchId, outcome, err);
    }
  }
  return { goesOn: true, ...(fin.next ? { next: fin.next } : {}) };
}

export interface LaneLimits {
  /** Batches one invocation may run before it returns to the state machine. */
  maxBatches: number;
  /** Stop taking new batches once this much time has passed (the caller's own time bound). */
  budgetMs: number;
  /**
   * An Express lane's window (epoch ms, `lane-kinds.ts`): a next batch starts only if a whole one
   * — gathering, registration and the handler at its bound — still ends before it.
   */
  until?: number;
}

/** What an InvokeWorker task returns to the state machine. */
export interface LaneResult {
  idle: boolean;
  delivered: number;
  batches: number;
}

/**
 * Runs batches one after another in one invocation: each takes its own slot (so the
 * concurrency bound is unchanged), but the state machine pays its transitions once per
 * invocation instead of once per batch. Returns when the queue is idle, the consumer stops,
 * every slot is taken, or the limits are reached. While a batch's handler runs, the next batch
 * is received (`ReceivedAhead`); a lane that ends gives what it received ahead back.
 */
export async function runLane(first: Slot, deps: RunnerDeps, limits: LaneLimits): Promise<LaneResult> {
  const clock = deps.clock ?? Date.now;
  const started = clock();
  let slot = first;
  let delivered = 0;
  let carried: LaneCarry = {};
  for (let batches = 1; ; batches++) {
    const goOn = () =>
      batches < limits.maxBatches &&
      clock() - started < limits.budgetMs &&
      (limits.until === undefined || batchFits(clock(), limits.until, slot, deps.idleWaitSeconds)) &&
      !deps.signal?.aborted;
    const run = await runBatch(slot, deps, goOn, carried);
    delivered += run.delivered;
    if (run.idle) return { idle: true, delivered, batches };
    if (!run.credential && run.next?.status === 'acquired' && goOn()) {
      // Woken on an empty queue: receive again with the slot the registration took.
      slot = run.next.slot;
      carried = carried.unannounced ? { unannounced: true } : {};
      continue;
    }
    if (!run.credential || !goOn()) {
      await giveBack(deps, slot.sqsUrl, run.ahead);
      // A slot handed over for a batch that will not run now (the Host began to stop): an empty
      // registration frees it at once.
      if (run.next?.status === 'acquired') {
        await deps.host.register(run.next.slot, []).catch((err: unknown) =>
          // Its gathering deadline frees it then (about a minute) if this did not.
          deps.log?.('could not free a slot handed over to a batch that will not run', {
            batchId: run.next?.status === 'acquired' ? run.next.slot.batchId : undefined,
            error: (err as Error)?.name,
          }),
        );
      }
      return { idle: false, delivered, batches };
    }
    const next = run.next ?? (await deps.host.acquire(slot, run.credential));
    if (next.status !== 'acquired') {
      await giveBack(deps, slot.sqsUrl, run.ahead);
      return { idle: false, delivered, batches };
    }
    slot = next.slot;
    carried = {
      ...(run.ahead ? { ahead: run.ahead } : {}),
      ...(run.handlerMs !== undefined ? { lastHandlerMs: run.handlerMs } : {}),
      ...(run.dry ? { dry: true as const } : {}),
      ...(run.receiving !== undefined ? { receiving: run.receiving } : {}),
      ...(run.unannounced || carried.unannounced ? { unannounced: true as const } : {}),
    };
  }
}
