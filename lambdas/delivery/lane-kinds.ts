/**
 * Which state machine a lane runs on. Standard executions are billed per state transition; Express
 * ones per request and duration, at a small fraction of that for lanes that run seconds to
 * minutes (issue 13: orchestration was most of a burst's cost), but an Express execution ends
 * after five minutes whatever it is doing. So a lane runs on Express only where everything it
 * starts fits its window: every batch it starts — gathering (idle wait + batch timeout),
 * registration and the handler up to the worker's bound — must end before the window does. The
 * Host holds to that in two places: AcquireSlot takes a slot in an Express lane only while a
 * whole batch still fits (else it hands the lane over), and the runner starts a lane's next batch
 * only while one fits (`laneUntil`). Consumers whose batch does not fit run on Standard, as before.
 *
 * Nothing depends on an Express execution ending well: if one is cut off anyway (throttled
 * invokes retried past the room), its worker invocation still finalises its batches, the slot map
 * still bounds concurrency (DL-02), and a batch whose runner also died is recovered at its
 * deadline by the next AcquireSlot, registration or supervisor round; only the lane's next round
 * is lost, and the supervisor starts lanes for what is left.
 */

export type LaneKind = 'standard' | 'express';

/** Step Functions ends an Express execution after 5 minutes. */
export const EXPRESS_MAX_MS = 300_000;
/** Left at the window's start for AcquireSlot itself. */
const START_ROOM_MS = 5_000;
/**
 * Left at the window's end: the last AcquireSlot, which hands the lane over, and a worker invoke
 * retried for throttling (the definition's worker retrier waits ≈ 25 s at most).
 */
const END_ROOM_MS = 25_000;
/** A batch's registration and finalisation, beside its gathering and handler. */
const BATCH_ROOM_MS = 5_000;
/** A lane that waits before its first slot (`startAfter`) runs on Express only for waits this short. */
export const EXPRESS_MAX_START_AFTER_SECONDS = 60;

/** What of a consumer decides how long one of its batches may take. */
export interface BatchBounds {
  /** The worker's invocation bound (ms). */
  handlerMs: number;
  maxBatchTimeoutSeconds: number;
}

/** Lambda's bound on one invocation: a worker function's timeout. */
export const LAMBDA_MAX_MS = 900_000;
/** The longest gathering any consumer has: the Host's idle wait (at most 20 s) and a batch timeout (at most 60 s). */
export const MAX_GATHERING_MS = (20 + 60) * 1000;
/** Kept free at the end of a worker invocation for the last batch's finalisation. */
export const RUNTIME_MARGIN_MS = 5_000;
/**
 * The longest handler bound a worker can have: a handler gets its whole bound counted from its own
 * start, so a batch of any consumer (gathering, registration, the handler) must fit one Lambda
 * invocation, which a worker function runs for up to `LAMBDA_MAX_MS`.
 */
export const MAX_HANDLER_MS = LAMBDA_MAX_MS - MAX_GATHERING_MS - BATCH_ROOM_MS - RUNTIME_MARGIN_MS;

/** The longest a batch may take from the moment its lane starts it. */
export function batchSpanMs(c: BatchBounds, idleWaitSeconds: number): number {
  return (idleWaitSeconds + c.maxBatchTimeoutSeconds) * 1000 + BATCH_ROOM_MS + c.handlerMs;
}

/** Whether a fresh Express lane of this consumer can run at least one whole batch. */
export function fitsExpress(c: BatchBounds, idleWaitSeconds: number): boolean {
  return START_ROOM_MS + batchSpanMs(c, idleWaitSeconds) <= EXPRESS_MAX_MS - END_ROOM_MS;
}

/** The kind a lane of this consumer starts on: Express where a batch fits its window. */
export function laneKindFor(c: BatchBounds, idleWaitSeconds: number): LaneKind {
  return fitsExpress(c, idleWaitSeconds) ? 'express' : 'standard';
}

/**
 * When an Express lane must have started its last batch's end: its execution's start (Step
 * Functions' `$$.Execution.StartTime`) plus the window, less the room its end needs. Undefined
 * for a start time that does not parse (the lane is then treated as out of time).
 */
export function expressLaneUntil(startedAt: string): number | undefined {
  const t = Date.parse(startedAt);
  return Number.isFinite(t) ? t + EXPRESS_MAX_MS - END_ROOM_MS : undefined;
}

/** Whether a batch started now still ends before `until`. */
export function batchFits(now: number, until: number, c: BatchBounds, idleWaitSeconds: number): boolean {
  return now + batchSpanMs(c, idleWaitSeconds) <= until;
}
