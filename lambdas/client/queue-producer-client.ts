import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoCommitStore } from '../adapters/aws/dynamodb-commit-store.ts';
import { sqsMessageQueue } from '../adapters/aws/sqs-message-queue.ts';
import { MESSAGE_LIMITS } from '../delivery/limits.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import { QueueProducer } from '../delivery/producer.ts';
import type { QueueWake } from './lambda-wake.ts';

export interface QueueProducerClientOptions {
  /** A client allowed to `sqs:SendMessage` on the queue. */
  sqs: SQSClient;
  /** A client allowed to `dynamodb:PutItem` on the Host table (commit records of batches). */
  dynamodb: DynamoDBClient;
  /** The Host table's name. */
  tableName: string;
  /** The SQS URL of the queue Resource's queue. */
  queueUrl: string;
  /** The queue Resource's `deliveryDelaySeconds`, used when a send names no delay (default 0). */
  defaultDelaySeconds?: number;
  /**
   * The queue Resource's `messageRetentionSeconds`; it only bounds how long commit records are
   * kept, so the default is the largest retention (1209600 s), which is always safe.
   */
  retentionSeconds?: number;
  /**
   * Tells the Host after each accepted send (`lambdaWake` with the Host's wake function), so the
   * queue's consumer gets a lane at once, as for sends through the Host. Without it the messages
   * say they were not announced: the supervisor's next round (within a minute) starts a lane, which
   * then waits for the next one while they keep coming. A failed wake never fails the send.
   */
  wake?: QueueWake;
}

export interface QueueProducerClient {
  /** Resolves to the Host message id once the message is durable in the queue. */
  send(body: ArrayBuffer | ArrayBufferView | string, options?: { delaySeconds?: number }): Promise<string>;
  /** 1..100 messages, all or nothing; resolves to their ids in input order. */
  sendBatch(
    messages: readonly { body: ArrayBuffer | ArrayBufferView | string; delaySeconds?: number }[],
  ): Promise<string[]>;
}

const MAX_RETENTION_SECONDS = 1_209_600;

function integerIn(value: unknown, min: number, max: number, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(`${name} must be an integer in ${min}..${max}`);
  }
  return value;
}

/**
 * The TypeScript producer client (host-profile §3) for AWS-native producers holding IAM
 * permission on the queue: `send` and `sendBatch` exactly as the AtLeastOnceQueue 0.2.0 binding
 * defines them, with the same rules and rejection names as Worker bindings, because it runs the
 * same `QueueProducer`.
 */
export function createQueueProducerClient(opts: QueueProducerClientOptions): QueueProducerClient {
  if (typeof opts.queueUrl !== 'string' || opts.queueUrl === '') throw new TypeError('queueUrl is required');
  if (typeof opts.tableName !== 'string' || opts.tableName === '')
    throw new TypeError('tableName is required');
  const target: QueueTarget = {
    // Only logs name the queue here: the last path segment of its URL (the SQS queue name).
    queueUid: opts.queueUrl.slice(opts.queueUrl.lastIndexOf('/') + 1),
    queueName: opts.queueUrl.slice(opts.queueUrl.lastIndexOf('/') + 1),
    space: '',
    sqsUrl: opts.queueUrl,
    defaultDelaySeconds: integerIn(
      opts.defaultDelaySeconds ?? 0,
      0,
      MESSAGE_LIMITS.maxDelaySeconds,
      'defaultDelaySeconds',
    ),
    retentionSeconds: integerIn(
      opts.retentionSeconds ?? MAX_RETENTION_SECONDS,
      60,
      MAX_RETENTION_SECONDS,
      'retentionSeconds',
    ),
  };
  const wake = opts.wake;
  const producer = new QueueProducer({
    messages: sqsMessageQueue(opts.sqs),
    commits: new DynamoCommitStore(opts.dynamodb, opts.tableName),
    ...(wake
      ? {
          onSent: (t, due) =>
            // The messages are in the queue: a failed wake leaves them to the supervisor's round.
            wake({ queue: t.queueName, now: due.now, later: due.later.slice(0, 10) }).catch(() => undefined),
        }
      : {}),
  });
  return {
    send: (body, options) => producer.send(target, body, options),
    sendBatch: (messages) => producer.sendBatch(target, messages),
  };
}
