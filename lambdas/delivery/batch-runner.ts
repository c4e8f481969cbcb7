import {
  type AcquireResult,
  type DeadLetterItem,
  type Finalized,
  REGISTER_ROOM_MS,
  type Received,
  type Registration,
  type SealedManifest,
  type Slot,
} from './delivery-service.ts';
import { decodeEnvelope, type Envelope } from './envelope.ts';
import { batchFits } from './lane-kinds.ts';
import { MESSAGE_LIMITS } from './limits.ts';
import { type MessageQueue, QueueGoneError, type QueueMessage } from './ports.ts';
import { coalescingSettle } from './settle-coalescer.ts';
import type {
  BatchDelivery,
  HandlerError,
  InvocationOutcome,
  SettleAnswer,
  SettleCall,
} from './settlement-protocol.ts';
import { BatchUnfinishedError } from './unfinished-batch.ts';

/** The Host's delivery service as the runner reaches it: in-process locally, by Lambda invoke on AWS. */
export interface BatchHostPort {
  /** The lane's next slot, proven by the credential of the batch it just ran. */
  acquire(previous: Slot, credential: string): Promise<AcquireResult>;
  /** `goOn`: the lane goes on, so an empty receive that a send woke takes its next slot at once. */
  register(slot: Slot, received: Received[], opts?: { goOn?: boolean }): Promise<Registration>;
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
    opts?: { next?: boolean; manifest?: SealedManifest; error?: HandlerError },
  ): Promise<Finalized>;
  /** Bodies for the moves `finalize` asked for; resolves once the batch is finished. */
  deadLetter(slot: Slot, credential: string, items: DeadLetterItem[]): Promise<void>;
}

/** Runs the worker's `queue` handler on one batch and reports how it ended. */
export interface QueueInvoker {
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

export interface RunnerDeps {
  messages: MessageQueue;
  host: BatchHostPort;
  invoker: QueueInvoker;
  clock?: () => number;
  /** How long to wait for a first message before handing the slot back. */
  idleWaitSeconds: number;
  /** Aborted when the Host stops: receiving ends, what was received is run, no new batch starts. */
  signal?: AbortSignal;
  /** Diagnostics (never bodies, never credentials). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
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
}

/**
 * Messages a lane received for its next batch while its batch's handler ran. They belong to no
 * slot and have no Host record: no handler runs them until the lane's next slot registers them,
 * and that slot is the one the batch before hands over at finalisation. So the lane never has
 * more than one handler running (the slot map still bounds handlers, DL-02), and a lane that dies
 * leaves them hidden only briefly (`AHEAD_HIDDEN_MS` plus the batch timeout), after which they
 * return by themselves with no attempt counted. Only a lane of a consumer whose slots are all held
 * receives ahead: with a slot free, another lane would run those messages now.
 */
export interface ReceivedAhead {
  held: Held[];
  /** When they were received: the runner's clock (for the batch timeout), and SQS's time. */
  at: number;
  atReal: number;
  /** How long SQS hides them from their receipt (ms). */
  hiddenFor: number;
  /** How many receives at once the round after them makes (`nextParallel`). */
  parallel: number;
}

/** A handler slower than this leaves its lane's next batch to be received after it, not during it. */
export const RECEIVE_AHEAD_MAX_HANDLER_MS = 2_000;
/**
 * Messages received ahead stay hidden this long past the batch timeout: short, since a lane that
 * dies leaves them to come back by themselves (a restart must see them within seconds, RC-01).
 */
export const AHEAD_HIDDEN_MS = 10_000;
/** They are registered only this long after their receipt (else left to come back): room to register. */
const AHEAD_USABLE_MS = AHEAD_HIDDEN_MS / 2;

/** Settlement rejections that prove the Host answered the call (nothing uncertain was written). */
const DEFINITE_REFUSALS: ReadonlySet<string> = new Set([
  'unknown_batch',
  'unknown_message',
  'already_settled',
]);

export interface Held {
  received: Received;
  body: Uint8Array;
}

function readMessage(m: QueueMessage, now: number): Held | undefined {
  if (!m.receiptHandle) return undefined;
  const sentAt = m.sentAt;
  const decoded: Envelope = decodeEnvelope(m.body) ?? {
    // Not written by this Host (e.g. sent straight to SQS): delivered as its UTF-8 bytes.
    id: `sqs-${m.messageId}`,
    ts: sentAt ?? now,
    body: new TextEncoder().encode(m.body ?? ''),
  };
  const { body, ...envelope } = decoded;
  return {
    received: { receiptHandle: m.receiptHandle, receivedAt: now, ...(sentAt ? { sentAt } : {}), envelope },
    body,
  };
}

/** How long the longest-waiting of these messages was in the queue (SQS's send time to receipt). */
function oldestWait(got: Held[]): number {
  let oldest = Number.NEGATIVE_INFINITY;
  for (const { received } of got) {
    if (received.sentAt !== undefined) oldest = Math.max(oldest, received.receivedAt - received.sentAt);
  }
  return oldest;
}

const isAbort = (err: unknown) => (err as Error)?.name === 'AbortError';

/**
 * The sizes of `parallel` receives at once for `want` more messages (each ≤ 10, fewer receives if
 * fewer are needed).
 */
export function receiveSizes(want: number, parallel = 1): number[] {
  const per = MESSAGE_LIMITS.sqsMaxReceive;
  const count = Math.max(1, Math.min(parallel, Math.ceil(want / per)));
  return Array.from({ length: count }, (_, i) => Math.min(per, want - i * per)).filter((n) => n > 0);
}

/** Messages that waited at least this long in the queue before a full receive mean a backlog. */
export const BACKLOG_WAIT_MS = 250;

/**
 * How many receives the next round makes: twice as many while every one comes back full and
 * the messages had been waiting (a backlog), else one. A consumer that keeps up with a stream
 * receives messages within milliseconds of their send, and receives at once would mostly come
 * back short there (measured: 20–29 % more SQS requests per batch at 1,000 msg/s without this
 * test). Doubling, not asking for the whole rest at once, bounds what a backlog that runs out
 * wastes: at most one round.
 */
export function nextParallel(asked: number[], got: number[], want: number, waitedMs: number): number {
  const full = asked.length > 0 && asked.every((max, i) => (got[i] ?? 0) >= max);
  if (!full || !(waitedMs >= BACKLOG_WAIT_MS)) return 1;
  return Math.max(1, Math.min(asked.length * 2, Math.ceil(want / MESSAGE_LIMITS.sqsMaxReceive)));
}

/** A long poll that came back empty with less than this left of the idle wait ends it. */
const EARLY_EMPTY_SLACK_MS = 100;

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

/** One round of `asks.length` receives at once; what arrived, each answer's count, a failure. */
async function receiveRound(
  slot: Slot,
  deps: RunnerDeps,
  asks: number[],
  wait: number,
  visibility: number,
  abortable = true,
): Promise<{ got: Held[]; counts: number[]; failed?: { reason: unknown } }> {
  const clock = deps.clock ?? Date.now;
  const answers = await Promise.allSettled(
    asks.map((max) =>
      deps.messages.receive(
        slot.sqsUrl,
        { max, waitSeconds: wait, visibilitySeconds: visibility },
        deps.signal && abortable ? deps.signal : undefined,
      ),
    ),
  );
  const messages = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value : []));
  const failed = answers.find((a) => a.status === 'rejected');
  return {
    got: messages.flatMap((m) => readMessage(m, clock()) ?? []),
    counts: answers.map((a) => (a.status === 'fulfilled' ? a.value.length : 0)),
    ...(failed ? { failed: { reason: failed.reason } } : {}),
  };
}

/**
 * Receives the lane's next batch while this one's handler runs (see `ReceivedAhead`): what is
 * there now, in rounds of receives that double while they come back full, none long-polling.
 * Hidden for the room a registration has after gathering, as any receive before registration.
 */
async function receiveAhead(
  slot: Slot,
  deps: RunnerDeps,
  parallel: number,
): Promise<ReceivedAhead | undefined> {
  const clock = deps.clock ?? Date.now;
  const at = clock();
  const atReal = performance.now();
  const visibility = Math.ceil((AHEAD_HIDDEN_MS + slot.maxBatchTimeoutSeconds * 1000) / 1000);
  const held: Held[] = [];
  let p = parallel;
  while (held.length < slot.maxBatchSize && !deps.signal?.aborted) {
    const asks = receiveSizes(slot.maxBatchSize - held.length, p);
    // Not aborted by a stop: short polls answer at once, and what they got is then given back.
    const round = await receiveRound(slot, deps, asks, 0, visibility, false);
    held.push(...round.got);
    if (round.failed !== undefined || !asks.every((max, i) => (round.counts[i] ?? 0) >= max)) break;
    p = nextParallel(asks, round.counts, slot.maxBatchSize - held.length, oldestWait(round.got));
  }
  return held.length > 0 ? { held, at, atReal, hiddenFor: visibility * 1000, parallel: p } : undefined;
}

/**
 * Makes messages received ahead visible again at once (a lane that does not run them) — while
 * they are still hidden: once their visibility ended another lane may hold them, and its
 * receipt must not be undone with this one's handle.
 */
export async function giveBack(
  deps: RunnerDeps,
  sqsUrl: string,
  ahead: ReceivedAhead | undefined,
): Promise<void> {
  if (!ahead || performance.now() - ahead.atReal > ahead.hiddenFor - 1_000) return;
  const handles = ahead.held.map((h) => h.received.receiptHandle);
  for (let i = 0; i < handles.length; i += MESSAGE_LIMITS.sqsMaxReceive) {
    const chunk = handles.slice(i, i + MESSAGE_LIMITS.sqsMaxReceive);
    try {
      await deps.messages.changeVisibilityBatch(
        sqsUrl,
        chunk.map((handle) => ({ handle, seconds: 0 })),
      );
    } catch (err) {
      // Best effort: what is not given back returns by itself when its short visibility ends.
      deps.log?.('could not give back messages received ahead; they return by themselves', {
        messages: chunk.length,
        error: (err as Error)?.name,
      });
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
  const clock = deps.clock ?? Date.now;
  const held: Held[] = [];
  let firstAt: number | undefined;
  let parallel = 1;
  // Their visibility runs on SQS's time, not the Host's (a test may move the Host's clock).
  if (lane.ahead && performance.now() - lane.ahead.atReal <= AHEAD_USABLE_MS) {
    held.push(...lane.ahead.held);
    firstAt = lane.ahead.at;
    parallel = lane.ahead.parallel;
  } else {
    await giveBack(deps, slot.sqsUrl, lane.ahead);
  }
  // The idle wait is SQS's time, not the Host's (a test may move the Host's clock). A lane whose
  // queue ran dry leaves it to another lane that is receiving: after a burst, one lane waits for
  // the next message, not every lane (on AWS each wait is a worker invocation running).
  const idleUntil =
    performance.now() +
    Math.min(deps.idleWaitSeconds, leavesIdleWait(slot, lane) ? LEFT_IDLE_WAIT_SECONDS : Infinity) * 1000;
  while (held.length < slot.maxBatchSize && !deps.signal?.aborted) {
    const now = clock();
    let wait: number;
    if (firstAt === undefined) {
      wait = Math.ceil(Math.max(0, idleUntil - performance.now()) / 1000);
    } else {
      const left = slot.maxBatchTimeoutSeconds * 1000 - (now - firstAt);
      if (left <= 0 && slot.maxBatchTimeoutSeconds > 0) break;
      wait = slot.maxBatchTimeoutSeconds === 0 ? 0 : Math.min(20, Math.ceil(left / 1000));
    }
    // A round of several receives is for a backlog that is there now: none of them long-polls.
    wait = parallel > 1 ? 0 : Math.min(20, wait);
    // Invisible until gathering ends plus room to register, not until the slot's deadline.
    const gatherEnds =
      firstAt === undefined
        ? now + (wait + slot.maxBatchTimeoutSeconds) * 1000
        : firstAt + slot.maxBatchTimeoutSeconds * 1000;
    const visibleAgain = Math.min(slot.invisibleUntil, gatherEnds + REGISTER_ROOM_MS);
    const visibility = Math.max(
      1,
      Math.min(MESSAGE_LIMITS.sqsMaxVisibilitySeconds, Math.ceil((visibleAgain - now) / 1000)),
    );
    // One receive at a time until one comes back full; then the queue has a backlog, and the
    // receives go several at once, doubling while they come back full (SQS hands each message to
    // one of them): a batch of 100 from a full queue takes four round trips, not ten.
    const asks = receiveSizes(slot.maxBatchSize - held.length, parallel);
    const { got, counts, failed } = await receiveRound(slot, deps, asks, wait, visibility);
    if (failed !== undefined) {
      // The Host is stopping, or SQS failed past the SDK's retries: gathering ends, and what was
      // received (by the other receives too) is registered and run now. With nothing received
      // the registration frees the slot at once, rather than leaving it to its deadline.
      // A queue is deleted only once no consumer names it (409 dependency_conflict before), so a
      // lane that finds it gone belongs to a consumer that is gone too: it ends without a warning.
      if (!isAbort(failed.reason) && !(failed.reason instanceof QueueGoneError)) {
        deps.log?.('receive failed; the batch is formed from what arrived', {
          batchId: slot.batchId,
          error: (failed.reason as Error)?.name,
        });
      }
      held.push(...got);
      break;
    }
    parallel = nextParallel(asks, counts, slot.maxBatchSize - held.length - got.length, oldestWait(got));
    if (got.length === 0) {
      // SQS answers a long poll empty only once its wait is out; a server that wakes every waiter
      // for one message answers the others empty at once. Only a wait that ran out makes the
      // lane idle, so an early empty answer is followed by a poll for the rest of the wait.
      if (firstAt === undefined && idleUntil - performance.now() > EARLY_EMPTY_SLACK_MS) continue;
      if (firstAt === undefined || slot.maxBatchTimeoutSeconds === 0) break;
      continue;
    }
    firstAt ??= clock();
    held.push(...got);
  }
  const registration = await deps.host.register(
    slot,
    held.map((h) => h.received),
    held.length === 0 && goOn() ? { goOn: true } : undefined,
  );
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
      ? receiveAhead(slot, deps, parallel).catch(() => undefined)
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
    };
  } catch (err) {
    // Whatever failed, messages received ahead go back rather than wait out their visibility.
    await giveBack(deps, slot.sqsUrl, await ahead);
    throw err;
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

/** What a lane carries from one batch to the next. */
export interface LaneCarry {
  ahead?: ReceivedAhead;
  lastHandlerMs?: number;
  /** The lane's last batch was not full. */
  dry?: true;
}

/**
 * How long a lane that leaves the idle wait to another still polls: a long poll (SQS answers a
 * short one from a sample of its servers, so it may miss the last few messages).
 */
export const LEFT_IDLE_WAIT_SECONDS = 1;

/**
 * Whether this gathering leaves the idle wait to another lane (a 1 s poll, then an empty
 * registration ends the lane): the lane's last batch was not full, nothing was received ahead,
 * and its slot's take saw another lane of the consumer receiving, which waits for the next
 * message instead. Of lanes that hand over one after another, the first sees the others still
 * running and keeps its wait, so one lane still watches the queue. A send through the Host
 * after the take keeps the lane (`Registration.woken`); messages sent straight to SQS are the
 * supervisor's, as when every lane has rested.
 */
export function leavesIdleWait(slot: Slot, lane: LaneCarry): boolean {
  return lane.dry === true && lane.ahead === undefined && (slot.taken?.receiving ?? 0) > 0;
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
      carried = {};
      continue;
    }
    if (!run.credential || !goOn()) {
      await giveBack(deps, slot.sqsUrl, run.ahead);
      // A slot handed over for a batch that will not run now (the Host began to stop): an empty
      // registration frees it at once.
      if (run.next?.status === 'acquired') await deps.host.register(run.next.slot, []).catch(() => undefined);
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
    };
  }
}
