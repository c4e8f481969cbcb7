/**
 * The SQS stand-in hands out receipt handles of SQS's length (issue 13: the batch records hold
 * every handle, so short ones would understate the Host's write sizes and cost). The long handles
 * must work exactly as fauxqs's own do for every call that takes one; anything else is refused or
 * accepted as fauxqs does.
 */
import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
} from '@aws-sdk/client-sqs';
import { describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import {
  AWS_RECEIPT_HANDLE_LENGTH,
  lengthen,
  lengthenReceiveResponse,
  shorten,
} from '../../../lambdas/local/standins/sqs-receipt-handles.ts';

// The Host's own client for the stand-in (local endpoint, credentials and SQS's limits).
const client = sqsClient(inject('sqsEndpoint'));

async function queueWith(messages: number): Promise<string> {
  const url = (await client.send(new CreateQueueCommand({ QueueName: `handles-${randomUUID()}` })))
    .QueueUrl as string;
  await client.send(
    new SendMessageBatchCommand({
      QueueUrl: url,
      Entries: Array.from({ length: messages }, (_, i) => ({ Id: `m${i}`, MessageBody: `body-${i}` })),
    }),
  );
  return url;
}

const receive = async (url: string, max: number) =>
  (
    await client.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: max, VisibilityTimeout: 60 }),
    )
  ).Messages ?? [];

const counts = async (url: string) => {
  await receive(url, 0).catch(() => undefined);
  const a = (
    await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    )
  ).Attributes;
  return {
    visible: Number(a?.ApproximateNumberOfMessages),
    inFlight: Number(a?.ApproximateNumberOfMessagesNotVisible),
  };
};

describe('SQS stand-in receipt handles', () => {
  it('maps a fauxqs handle to an SQS-length one and back; leaves any other string alone', () => {
    const id = randomUUID();
    const long = lengthen(id);
    expect(long).toHaveLength(AWS_RECEIPT_HANDLE_LENGTH);
    expect(long.startsWith('AQEB')).toBe(true);
    expect(shorten(long)).toBe(id);
    expect(lengthen(randomUUID())).not.toBe(long);
    // A handle of the right length whose derived part was altered is not one of ours.
    const altered = `${long.slice(0, 200)}${long[200] === 'A' ? 'B' : 'A'}${long.slice(201)}`;
    expect(shorten(altered)).toBe(altered);
    expect(shorten('garbage')).toBe('garbage');
    expect(lengthen('not-a-uuid')).toBe('not-a-uuid');
  });

  it('lengthens the response’s handles only, never text inside a body', () => {
    const id = randomUUID();
    const inner = randomUUID();
    const body = `{"ReceiptHandle":"${inner}"}`;
    const payload = JSON.stringify({ Messages: [{ MessageId: 'm', ReceiptHandle: id, Body: body }] });
    const out = JSON.parse(lengthenReceiveResponse(payload));
    expect(out.Messages[0].ReceiptHandle).toBe(lengthen(id));
    expect(out.Messages[0].Body).toBe(body);
  });

  it('receives handles of SQS length that delete and change visibility like fauxqs handles', async () => {
    const url = await queueWith(6);
    const got = await receive(url, 6);
    expect(got).toHaveLength(6);
    for (const m of got) expect(m.ReceiptHandle).toHaveLength(AWS_RECEIPT_HANDLE_LENGTH);
    const [a, b, c, d, e, f] = got.map((m) => m.ReceiptHandle as string);

    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: a }));
    const batchDelete = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'b', ReceiptHandle: b },
          { Id: 'c', ReceiptHandle: c },
        ],
      }),
    );
    expect(batchDelete.Successful?.map((s) => s.Id).sort()).toEqual(['b', 'c']);
    await client.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: d, VisibilityTimeout: 0 }),
    );
    const batchChange = await client.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'e', ReceiptHandle: e, VisibilityTimeout: 0 },
          { Id: 'f', ReceiptHandle: f, VisibilityTimeout: 0 },
        ],
      }),
    );
    expect(batchChange.Successful?.map((s) => s.Id).sort()).toEqual(['e', 'f']);
    // Three deleted, three visible again: the long handles reached the right messages.
    expect(await counts(url)).toEqual({ visible: 3, inFlight: 0 });
    const again = await receive(url, 10);
    expect(again.map((m) => m.Body).sort()).toEqual(
      got
        .slice(3)
        .map((m) => m.Body)
        .sort(),
    );
  });

  it('a body that reads like a receipt handle field arrives unchanged', async () => {
    const url = (await client.send(new CreateQueueCommand({ QueueName: `handles-${randomUUID()}` })))
      .QueueUrl as string;
    const body = `{"ReceiptHandle":"${randomUUID()}","note":"\\"}`;
    await client.send(
      new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'b', MessageBody: body }] }),
    );
    const [m] = await receive(url, 1);
    expect(m?.Body).toBe(body);
    expect(m?.ReceiptHandle).toHaveLength(AWS_RECEIPT_HANDLE_LENGTH);
  });

  it('a superseded long handle is refused as fauxqs refuses its own', async () => {
    const url = await queueWith(1);
    const [first] = await receive(url, 1);
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: first?.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const [second] = await receive(url, 1);
    expect(second?.ReceiptHandle).not.toBe(first?.ReceiptHandle);
    const stale = await client
      .send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: first?.ReceiptHandle,
          VisibilityTimeout: 30,
        }),
      )
      .then(
        () => 'ok',
        (err: Error) => err.name,
      );
    const own = shorten(first?.ReceiptHandle as string);
    const staleOwn = await client
      .send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: own, VisibilityTimeout: 30 }))
      .then(
        () => 'ok',
        (err: Error) => err.name,
      );
    expect(stale).toBe(staleOwn);
    expect(stale).not.toBe('ok');
  });
});
