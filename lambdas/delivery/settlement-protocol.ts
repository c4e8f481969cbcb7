/**
 * What crosses between a worker's batch object and the Host. Messages are addressed by their
 * index in the batch: the worker-side object maps ids to indexes and answers `unknown_message`
 * itself; the Host checks the batch credential, so a worker can only ever settle its own batches.
 */
export type SettleCall =
  | { kind: 'ack'; index: number }
  | { kind: 'retry'; index: number; delaySeconds?: number }
  | { kind: 'ackAll' }
  | { kind: 'retryAll'; delaySeconds?: number };

/** How the Host answered one call of a group: in effect, or the name of its rejection. */
export type SettleAnswer = 'ok' | 'unknown_batch' | 'already_settled' | 'backend_unavailable';

/** The most settlement calls one `settleMany` request carries (the runner's group bound). */
export const SETTLE_GROUP_LIMIT = 100;

export interface DeliveredMessage {
  id: string;
  timestampMillis: number;
  body: Uint8Array;
  attempts: number;
}

/** One batch as handed to a worker invocation. */
export interface BatchDelivery {
  batchId: string;
  /** Unguessable; proves the holder was handed this batch (DL-09). Never logged. */
  credential: string;
  /** The queue Resource's name. */
  queue: string;
  messages: DeliveredMessage[];
}

/** How an invocation ended, as the dispatcher finalises it (DL-05). */
export type InvocationOutcome =
  /** The handler returned: what is still unsettled is acknowledged. */
  | 'returned'
  /** The handler threw or its Promise rejected: what is still unsettled is retried. */
  | 'threw'
  /** Cut off, crashed or lost: what is still unsettled is retried, never acknowledged. */
  | 'abandoned';

/**
 * What operators see of a handler's error (consumer state): its name and message, bounded. The
 * stack stays in the worker's own log and never reaches a Host API answer.
 */
export interface HandlerError {
  name: string;
  message: string;
}

/** A producer call from inside a worker, through an `env` binding. */
export interface ProduceCall {
  binding: string;
  messages: { body: Uint8Array; delaySeconds?: number }[];
}
