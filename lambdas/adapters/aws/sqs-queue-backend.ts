import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  type SQSClient,
  TagQueueCommand,
} from '@aws-sdk/client-sqs';
import type { QueueBackend } from '../../forms/at-least-once-queue/queue-backend.ts';

/** Whether an SQS error says the queue does not exist (both protocol spellings). */
export function isMissingQueue(err: unknown): boolean {
  const name = (err as { name?: string; Code?: string })?.name ?? '';
  return name === 'QueueDoesNotExist' || name === 'AWS.SimpleQueueService.NonExistentQueue';
}

/** SQS's approximate message counts of one queue (GetQueueAttributes). */
export interface QueueStats {
  visible: number;
  inFlight: number;
  delayed: number;
}

const QUEUE_NAME = /^[A-Za-z0-9_-]{1,80}$/;

/**
 * Tags every Host queue carries. `space` is what the worker role's `sqs:ReceiveMessage` is
 * conditioned on (`aws:ResourceTag/takoform:space`), so a worker reaches only its Space's queues.
 */
export const QUEUE_TAGS = { resourceUid: 'takoform:resource-uid', space: 'takoform:space' } as const;

/**
 * One SQS standard queue per AtLeastOnceQueue Resource, named `<prefix><uid>`; IAM is scoped to
 * the prefix, and a worker's receives to queues tagged with its Space. Message size stays at
 * SQS's default: bodies are at most 127000 bytes, base64.
 */
export class SqsQueueBackend implements QueueBackend {
  private readonly sqs: SQSClient;
  private readonly prefix: string;
  private readonly urls = new Map<string, string>();

  constructor(sqs: SQSClient, prefix: string) {
    if (!/^[A-Za-z0-9_-]{0,50}$/.test(prefix))
      throw new Error(`invalid SQS queue name prefix ${JSON.stringify(prefix)}`);
    this.sqs = sqs;
    this.prefix = prefix;
  }

  queueName(uid: string): string {
    const name = `${this.prefix}${uid}`;
    if (!QUEUE_NAME.test(name)) throw new Error('queue name out of SQS bounds');
    return name;
  }

  /** The queue URL, or undefined when the queue does not exist. */
  async queueUrl(uid: string): Promise<string | undefined> {
    const cached = this.urls.get(uid);
    if (cached) return cached;
    try {
      const out = await this.sqs.send(new GetQueueUrlCommand({ QueueName: this.queueName(uid) }));
      if (out.QueueUrl) this.urls.set(uid, out.QueueUrl);
      return out.QueueUrl;
    } catch (err) {
      if (isMissingQueue(err)) return undefined;
      throw err;
    }
  }

  async ensure(uid: string, queue: { space: string; retentionSeconds: number }): Promise<void> {
    const attributes = { MessageRetentionPeriod: String(queue.retentionSeconds) };
    const tags = { [QUEUE_TAGS.resourceUid]: uid, [QUEUE_TAGS.space]: queue.space };
    const existing = await this.queueUrl(uid);
    if (existing) {
      await this.sqs.send(new SetQueueAttributesCommand({ QueueUrl: existing, Attributes: attributes }));
      // Idempotent: a queue created before the Space tag existed (or by a CreateQueue whose
      // outcome was unknown) gets it now, at the next create or update of its Resource.
      await this.sqs.send(new TagQueueCommand({ QueueUrl: existing, Tags: tags }));
      return;
    }
    const out = await this.sqs.send(
      new CreateQueueCommand({ QueueName: this.queueName(uid), Attributes: attributes, tags }),
    );
    if (out.QueueUrl) this.urls.set(uid, out.QueueUrl);
  }

  async inspect(uid: string): Promise<{ messageCount: number } | undefined> {
    const s = await this.stats(uid);
    return s && { messageCount: s.visible + s.inFlight + s.delayed };
  }

  /** SQS's approximate counts of a queue's messages; undefined when it has no SQS queue. */
  async stats(uid: string): Promise<QueueStats | undefined> {
    const url = await this.queueUrl(uid);
    if (!url) return undefined;
    try {
      const out = await this.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
      );
      const a = out.Attributes ?? {};
      const n = (k: keyof typeof a) => Number(a[k] ?? 0) || 0;
      return {
        visible: n('ApproximateNumberOfMessages'),
        inFlight: n('ApproximateNumberOfMessagesNotVisible'),
        delayed: n('ApproximateNumberOfMessagesDelayed'),
      };
    } catch (err) {
      if (isMissingQueue(err)) {
        this.urls.delete(uid);
        return undefined;
      }
      throw err;
    }
  }

  async remove(uid: string): Promise<boolean> {
    const url = await this.queueUrl(uid);
    if (!url) return true;
    try {
      await this.sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    } catch (err) {
      if (!isMissingQueue(err)) throw err;
    }
    this.urls.delete(uid);
    // SQS may take a while to forget a deleted queue: confirmed gone only when it says so.
    return (await this.queueUrl(uid)) === undefined;
  }
}
