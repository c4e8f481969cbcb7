/**
 * The SQS side of an AtLeastOnceQueue: one standard queue per Resource, named from its uid, so
 * creating it again after an unknown outcome finds the same queue and never makes a second.
 */
export interface QueueBackend {
  /** The SQS queue name of a queue Resource. */
  queueName(uid: string): string;
  /**
   * Creates the queue or, if it exists, sets its attributes; either way the queue carries its
   * Space as a tag (on AWS, a worker may receive only from queues tagged with its own Space).
   */
  ensure(uid: string, queue: { space: string; retentionSeconds: number }): Promise<void>;
  /** Undefined when the queue does not exist; otherwise its approximate message count. */
  inspect(uid: string): Promise<{ messageCount: number } | undefined>;
  /** Deletes the queue; resolves true once it is confirmed gone. */
  remove(uid: string): Promise<boolean>;
}
