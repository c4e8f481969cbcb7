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
  putCommit(commitId: string, expiresAtSeconds: number): Promise<void>;
  /** The subset of ids that are committed (consistent read). */
  committed(commitIds: readonly string[]): Promise<Set<string>>;
}

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
