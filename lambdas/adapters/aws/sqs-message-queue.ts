/**
 * The delivery core's `MessageQueue` port over an SQS client: each method is exactly one SQS
 * request, so the requests the bench counts are the ones the core decides to make.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  type EntryFailure,
  type MessageQueue,
  QueueGoneError,
  type QueueMessage,
} from '../../delivery/ports.ts';
import { sendAtMostOnce } from './sqs-one-copy.ts';
import { isMissingQueue } from './sqs-queue-backend.ts';

type Sqs = Pick<SQSClient, 'send'>;

/** A request's failed entries by index; `indexOf` maps an entry's Id back (by default the Id is it). */
function failuresOf(
  out: { Failed?: { Id?: string; SenderFault?: boolean; Code?: string }[] },
  indexOf: (id: string | undefined) => number = Number,
): EntryFailure[] {
  return (out.Failed ?? []).map((f) => ({
    index: indexOf(f.Id),
    senderFault: f.SenderFault === true,
    ...(f.Code ? { code: f.Code } : {}),
  }));
}

function sentAtOf(attributes: Record<string, string> | undefined): number | undefined {
  const sent = Number(attributes?.SentTimestamp);
  return Number.isFinite(sent) && sent > 0 ? sent : undefined;
}

async function request<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (isMissingQueue(err)) throw new QueueGoneError('the queue does not exist', { cause: err });
    throw err;
  }
}

export function sqsMessageQueue(sqs: Sqs): MessageQueue {
  return {
    receive: (url, ask, signal) =>
      request(async () => {
        const out = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: ask.max,
            WaitTimeSeconds: ask.waitSeconds,
            VisibilityTimeout: ask.visibilitySeconds,
            MessageSystemAttributeNames: ['SentTimestamp'],
          }),
          signal ? { abortSignal: signal } : {},
        );
        return (out.Messages ?? []).map((m): QueueMessage => {
          const sentAt = sentAtOf(m.Attributes);
          return {
            ...(m.MessageId !== undefined ? { messageId: m.MessageId } : {}),
            ...(m.ReceiptHandle !== undefined ? { receiptHandle: m.ReceiptHandle } : {}),
            ...(m.Body !== undefined ? { body: m.Body } : {}),
            ...(sentAt !== undefined ? { sentAt } : {}),
          };
        });
      }),
    changeVisibilityBatch: (url, entries) =>
      request(async () =>
        failuresOf(
          await sqs.send(
            new ChangeMessageVisibilityBatchCommand({
              QueueUrl: url,
              Entries: entries.map((e, n) => ({
                Id: String(n),
                ReceiptHandle: e.handle,
                VisibilityTimeout: e.seconds,
              })),
            }),
          ),
        ),
      ),
    deleteBatch: (url, handles) =>
      request(async () =>
        failuresOf(
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: url,
              Entries: handles.map((h, n) => ({ Id: String(n), ReceiptHandle: h })),
            }),
          ),
        ),
      ),
    sendBatch: (url, entries, opts) =>
      request(async () => {
        const ids = entries.map((e, n) => e.id ?? String(n));
        const command = new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: entries.map((e, n) => ({
            Id: ids[n],
            MessageBody: e.body,
            DelaySeconds: e.delaySeconds,
          })),
        });
        const out = await sqs.send(opts?.atMostOnce ? sendAtMostOnce(command) : command);
        const queueIds = new Map<number, string>();
        for (const ok of out.Successful ?? []) {
          const n = ids.indexOf(ok.Id ?? '');
          if (n >= 0 && ok.MessageId) queueIds.set(n, ok.MessageId);
        }
        return {
          failed: failuresOf(out, (id) => ids.indexOf(id ?? '')),
          queueIds,
          // The SDK counts its tries; each one may have reached SQS.
          resent: (out.$metadata?.attempts ?? 1) > 1,
        };
      }),
    send: (url, body, delaySeconds) =>
      request(async () => {
        const out = await sqs.send(
          // One message, no commit record to tell its copies apart: never a second copy.
          sendAtMostOnce(
            new SendMessageCommand({ QueueUrl: url, MessageBody: body, DelaySeconds: delaySeconds }),
          ),
        );
        if (!out.MessageId) throw new Error('SQS returned no MessageId');
      }),
    counts: (url) =>
      request(async () => {
        const out = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'],
          }),
        );
        const a = out.Attributes ?? {};
        return {
          visible: Number(a.ApproximateNumberOfMessages ?? 0) || 0,
          delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0) || 0,
        };
      }),
  };
}
