/**
 * How a lane receives: rounds of receives that double while the queue has a backlog, the idle
 * wait for a first message, receiving the next batch while a handler runs, and giving back what
 * was received ahead when the lane does not run it.
 */
import { REGISTER_ROOM_MS, type Received, type Slot } from './delivery-service.ts';
import { decodeEnvelope, type Envelope } from './envelope.ts';
import { MESSAGE_LIMITS } from './limits.ts';
import { type MessageQueue, QueueGoneError, type QueueMessage } from './ports.ts';

/** What receiving needs of the runner's dependencies. */
export interface ReceiveDeps {
  messages: MessageQueue;
  clock?: () => number;
  /** How long to wait for a first message before handing the slot back. */
  idleWaitSeconds: number;
  /** Aborted when the Host stops: receiving ends, what was received is run, no new batch starts. */
  signal?: AbortSignal;
  /** Diagnostics (never bodies, never credentials). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
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
export const AHEAD_USABLE_MS = AHEAD_HIDDEN_MS / 2;

export interface Held {
  received: Received;
  body: Uint8Array;
  /** When SQS makes it visible again (`performance.now()`), counted from before the receive was sent. */
  hiddenUntilReal: number;
  /**
   * No wake announced it: sent straight to SQS (no envelope of this Host), or by the producer
   * client without `wake`.
   */
  unannounced?: true;
}

function readMessage(m: QueueMessage, now: number, hiddenUntilReal: number): Held | undefined {
  if (!m.receiptHandle) return undefined;
  const sentAt = m.sentAt;
  const enveloped = decodeEnvelope(m.body);
  const decoded: Envelope = enveloped ?? {
    // Not written by this Host (e.g. sent straight to SQS): delivered as its UTF-8 bytes.
    id: `sqs-${m.messageId}`,
    ts: sentAt ?? now,
    body: new TextEncoder().encode(m.body ?? ''),
  };
  // Whether a wake announced it is the lane's concern only: the Host's record of it is the same.
  const { body, unannounced, ...envelope } = decoded;
  return {
    ...(!enveloped || unannounced ? { unannounced: true as const } : {}),
    received: {
      receiptHandle: m.receiptHandle,
      receivedAt: now,
      ...(sentAt ? { sentAt } : {}),
      ...(m.messageId ? { queueMessageId: m.messageId } : {}),
      envelope,
    },
    body,
    hiddenUntilReal,
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

/** One round of `asks.length` receives at once; what arrived, each answer's count, a failure. */
async function receiveRound(
  slot: Slot,
  deps: ReceiveDeps,
  asks: number[],
  wait: number,
  visibility: number,
  abortable = true,
): Promise<{ got: Held[]; counts: number[]; failed?: { reason: unknown } }> {
  const clock = deps.clock ?? Date.now;
  // SQS counts the visibility from its receipt of the request, after this.
  const sentAtReal = performance.now();
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
    got: messages.flatMap((m) => readMessage(m, clock(), sentAtReal + visibility * 1000) ?? []),
    counts: answers.map((a) => (a.status === 'fulfilled' ? a.value.length : 0)),
    ...(failed ? { failed: { reason: failed.reason } } : {}),
  };
}

/**
 * Receives the lane's next batch while this one's handler runs (see `ReceivedAhead`): what is
 * there now, in rounds of receives that double while they come back full, none long-polling.
 * Hidden for the room a registration has after gathering, as any receive before registration.
 */
export async function receiveAhead(
  slot: Slot,
  deps: ReceiveDeps,
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
  deps: ReceiveDeps,
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

/** What a lane carries from one batch to the next. */
export interface LaneCarry {
  ahead?: ReceivedAhead;
  lastHandlerMs?: number;
  /** The lane's last batch was not full. */
  dry?: true;
  /** Other lanes receiving when the last batch registered, if it read every slot. */
  receiving?: number;
  /** A batch of this lane held a message no wake announced: its queue has such senders. */
  unannounced?: true;
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
 * message instead. A take that saw only its own shard saw none: then the last registration's read
 * of every slot says it. Of lanes that hand over one after another, the first sees the others still
 * running and keeps its wait, so one lane still watches the queue. A send through the Host
 * after the take keeps the lane (`Registration.woken`); messages sent straight to SQS are the
 * supervisor's, as when every lane has rested.
 */
export function leavesIdleWait(slot: Slot, lane: LaneCarry): boolean {
  const receiving = slot.taken?.partial
    ? Math.max(slot.taken.receiving ?? 0, lane.receiving ?? 0)
    : (slot.taken?.receiving ?? 0);
  return lane.dry === true && lane.ahead === undefined && receiving > 0;
}

/**
 * How long a lane waits for a first message (s). Sends through the Host — its API, `env`
 * bindings, and the producer client with `wake` — count a wake, which starts a lane when none is
 * receiving, and a lane's empty registration goes on when a wake came after its take; so a lane
 * whose queue only such sends feed gains nothing by waiting, and on AWS each wait is a worker
 * invocation running. It polls once (`LEFT_IDLE_WAIT_SECONDS`: a long poll, which asks every SQS
 * server) and ends. It waits longer, at most the idle wait, while:
 * - a due lane's claim covers now (`SlotSnapshot.watchUntil`): other lanes were refused on the
 *   promise that one polls when their messages return, until the end of the window;
 * - its batches held messages no wake announced (`LaneCarry.unannounced`: sent straight to SQS,
 *   or by the producer client without `wake`) and no other lane waits instead
 *   (`leavesIdleWait`): a stream of them keeps one lane, as no wake would start the next.
 * The first unannounced message after its queue rested waits for the supervisor's round.
 */
export function idleWaitFor(slot: Slot, lane: LaneCarry, idleWaitSeconds: number, nowMs: number): number {
  const least = Math.min(idleWaitSeconds, LEFT_IDLE_WAIT_SECONDS);
  const watch = slot.taken?.watchUntil;
  const forDue = watch !== undefined ? Math.ceil((watch - nowMs) / 1000) : 0;
  const forUnannounced = lane.unannounced && !leavesIdleWait(slot, lane) ? idleWaitSeconds : 0;
  return Math.max(least, Math.min(idleWaitSeconds, Math.max(forDue, forUnannounced)));
}

/**
 * Gathers one batch in the slot: up to maxBatchSize messages over several receives, waiting at
 * most maxBatchTimeoutSeconds after the first one (0 means what is there now), or the idle wait
 * for a first one. Messages received ahead by the batch before come first while still usable.
 */
export async function gather(
  slot: Slot,
  deps: ReceiveDeps,
  lane: LaneCarry,
): Promise<{ held: Held[]; parallel: number }> {
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
  // The idle wait is SQS's time, not the Host's (a test may move the Host's clock).
  const idleUntil = performance.now() + idleWaitFor(slot, lane, deps.idleWaitSeconds, clock()) * 1000;
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
  return { held, parallel };
}
