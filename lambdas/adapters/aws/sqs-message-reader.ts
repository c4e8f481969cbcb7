import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';

/** One message as an operator call received it: SQS's view, the body not yet decoded. */
export interface ReceivedCopy {
  sqsMessageId: string;
  body: string;
  handle: string;
  /** SQS's SentTimestamp (epoch ms) and ApproximateReceiveCount, when SQS gave them. */
  sentAt: number | undefined;
  receiveCount: number | undefined;
}

/** SQS batch calls take at most 10 entries. */
const SQS_BATCH = 10;

/** PurgeQueue was called on this queue in the last 60 seconds (SQS allows one per minute). */
export class PurgeInProgressError extends Error {
  override name = 'PurgeInProgressError';
}

function copyOf(m: Message): ReceivedCopy | undefined {
  if (!m.ReceiptHandle || m.Body === undefined) return undefined;
  const attr = m.Attributes ?? {};
  const num = (v: string | undefined) => (v === undefined || !/^\d+$/.test(v) ? undefined : Number(v));
  return {
    sqsMessageId: m.MessageId ?? '',
    body: m.Body,
    handle: m.ReceiptHandle,
    sentAt: num(attr.SentTimestamp),
    receiveCount: num(attr.ApproximateReceiveCount),
  };
}

/** Runs one SQS batch call per 10 handles; the sum of the entries each reported as failed. */
async function failedEntries(
  handles: readonly string[],
  call: (part: readonly string[]) => Promise<number>,
): Promise<number> {
  let failed = 0;
  for (let i = 0; i < handles.length; i += SQS_BATCH) failed += await call(handles.slice(i, i + SQS_BATCH));
  return failed;
}

/**
 * The SQS calls behind the operator endpoints: receiving for a look or a move, giving messages
 * back, deleting and purging. Delivery never goes through here; its receives are the runner's.
 */
export class SqsMessageReader {
  private readonly sqs: SQSClient;

  constructor(sqs: SQSClient) {
    this.sqs = sqs;
  }

  /**
   * Receives up to `max` (≤ 10) messages and hides them for `hideSeconds`. A 1 s long poll, so
   * SQS asks all its servers: a short poll may answer empty while messages wait.
   */
  async receive(url: string, max: number, hideSeconds: number): Promise<ReceivedCopy[]> {
    const out = await this.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: Math.min(Math.max(max, 1), SQS_BATCH),
        VisibilityTimeout: hideSeconds,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['SentTimestamp', 'ApproximateReceiveCount'],
      }),
    );
    return (out.Messages ?? []).flatMap((m) => copyOf(m) ?? []);
  }

  /** Makes received messages visible again at once; returns how many SQS did not take back. */
  release(url: string, handles: readonly string[]): Promise<number> {
    return failedEntries(handles, async (part) => {
      const out = await this.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: url,
          Entries: part.map((handle, i) => ({ Id: String(i), ReceiptHandle: handle, VisibilityTimeout: 0 })),
        }),
      );
      return out.Failed?.length ?? 0;
    });
  }

  /** Deletes received messages; returns how many SQS failed to delete. */
  delete(url: string, handles: readonly string[]): Promise<number> {
    return failedEntries(handles, async (part) => {
      const out = await this.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: part.map((handle, i) => ({ Id: String(i), ReceiptHandle: handle })),
        }),
      );
      return out.Failed?.length ?? 0;
    });
  }

  /** Deletes every message of the queue, in flight ones included (SQS: once per 60 s). */
  async purge(url: string): Promise<void> {
    try {
      await this.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
    } catch (err) {
      const name = (err as { name?: string })?.name ?? '';
      if (name === 'PurgeQueueInProgress' || name === 'AWS.SimpleQueueService.PurgeQueueInProgress') {
        throw new PurgeInProgressError('a purge of this queue ran in the last 60 seconds');
      }
      throw err;
    }
  }
}
