import type { ConsumerSpec } from '../forms/queue-consumer/consumer-spec.ts';

/** Where a queue Resource's messages live, as producers and the dispatcher need it. */
export interface QueueTarget {
  queueUid: string;
  /** The queue Resource's name (the batch object's `queue`). */
  queueName: string;
  space: string;
  sqsUrl: string;
  /** The Resource's `deliveryDelaySeconds` (default for sends without `delaySeconds`). */
  defaultDelaySeconds: number;
  /** The Resource's `messageRetentionSeconds`. */
  retentionSeconds: number;
}

export interface QueueDirectory {
  /** A live queue Resource by uid, or undefined. */
  queue(queueUid: string): Promise<QueueTarget | undefined>;
}

/**
 * Commit records make a multi-message send all or nothing: its messages carry the commit id and
 * are delivered only once the record exists; without it they are discarded after a timeout.
 */
export interface CommitStore {
  /** `onlyCopies`: the send's messages SQS may hold more than one copy of (`OnlyCopies`). */
  putCommit(commitId: string, expiresAtSeconds: number, onlyCopies?: OnlyCopies): Promise<void>;
  /**
   * The subset of ids that are committed (consistent read). With `onlyCopies`, the copies their
   * records name are added to it, by commit id.
   */
  committed(commitIds: readonly string[], onlyCopies?: Map<string, OnlyCopies>): Promise<Set<string>>;
}

/**
 * Messages of a committed send that SQS may hold more than one copy of — a `SendMessageBatch`
 * the SDK sent again after an error whose effect was unknown (a lost answer) — by Host message
 * id: the SQS message id of the one copy the answer named. Any other copy is removed unseen.
 */
export type OnlyCopies = Readonly<Record<string, string>>;

/** An active QueueConsumer as the dispatcher sees it. */
export interface ConsumerView {
  consumerUid: string;
  generation: number;
  space: string;
  spec: ConsumerSpec;
  queue: QueueTarget;
  deadLetter: QueueTarget | undefined;
  /** The worker Resource's (space, name), to find its code. */
  worker: { uid: string; space: string; name: string };
}

/** A message as one receive returned it. */
export interface QueueMessage {
  messageId?: string;
  receiptHandle?: string;
  body?: string;
  /** When the queue accepted it (epoch ms, the queue service's clock), if it said. */
  sentAt?: number;
}

/** One entry of a batch request that the queue service did not take, by its index in the request. */
export interface EntryFailure {
  index: number;
  /** The request itself was at fault (a stale receipt handle, say): sending it again cannot help. */
  senderFault: boolean;
  code?: string;
}

/** What one `SendMessageBatch` did. */
export interface SendBatchResult {
  failed: EntryFailure[];
  /** The queue's message id of each entry it took, by index, where the answer named it. */
  queueIds: ReadonlyMap<number, string>;
  /**
   * The request went out more than once (the SDK retried it): an earlier try whose answer was
   * lost may have left copies of its entries in the queue, under other queue message ids.
   */
  resent: boolean;
}

/**
 * The queue service (SQS) as the delivery core uses it: one method per request, so how many
 * requests delivery makes stays visible here. Batch requests take at most `SQS_BATCH_ENTRIES`
 * entries (`sqs-batches.ts`). A call on a queue that no longer exists rejects with
 * `QueueGoneError`; other failures reject with the service's own error.
 */
export interface MessageQueue {
  /** One receive: up to `max` messages, hidden `visibilitySeconds` from their receipt. */
  receive(
    url: string,
    ask: { max: number; waitSeconds: number; visibilitySeconds: number },
    signal?: AbortSignal,
  ): Promise<QueueMessage[]>;
  changeVisibilityBatch(
    url: string,
    entries: readonly { handle: string; seconds: number }[],
  ): Promise<EntryFailure[]>;
  deleteBatch(url: string, handles: readonly string[]): Promise<EntryFailure[]>;
  /**
   * `id` names an entry within the request (default: its index); failures still give the index.
   * `atMostOnce`: as `send`, never sent again once a try may have reached the queue (the call
   * then fails with `SEND_OUTCOME_UNKNOWN`), for copies whose ids nothing else tells apart.
   */
  sendBatch(
    url: string,
    entries: readonly { id?: string; body: string; delaySeconds: number }[],
    opts?: { atMostOnce?: boolean },
  ): Promise<SendBatchResult>;
  /**
   * One message, sent at most once: when an earlier try may have reached the queue (its answer
   * was lost), it is not sent again, and the call fails with an error named
   * `SEND_OUTCOME_UNKNOWN` — one message must never become two copies with one Host id.
   */
  send(url: string, body: string, delaySeconds: number): Promise<void>;
  /** The queue's approximate counts of visible and delayed messages. */
  counts(url: string): Promise<{ visible: number; delayed: number }>;
}

/** The queue does not exist (any more): its Resource was deleted. */
export class QueueGoneError extends Error {
  override name = 'QueueGoneError';
}

/** The error name of a `MessageQueue.send` whose outcome is unknown (it may have been enqueued). */
export const SEND_OUTCOME_UNKNOWN = 'SendOutcomeUnknown';
