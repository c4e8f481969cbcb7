/**
 * SQS's in-flight and visibility limits on the local SQS (issue 12), against fauxqs: what fauxqs
 * already refuses (VisibilityTimeout outside 0..43,200 s) and what strict-sqs.ts adds (OverLimit
 * past the in-flight limit; no visibility past 12 h after the receive).
 */

import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  OverLimit,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { INFLIGHT_LIMIT_ENV, withStrictSqsLimits } from '../../../lambdas/adapters/aws/strict-sqs.ts';
import { FAULTS_ENV } from '../../../lambdas/local/faults/fault-config.ts';

const HOUR_MS = 3_600_000;

/** A client as clients.ts builds one for the local SQS, without the strict middleware. */
const plainClient = () =>
  new SQSClient({
    endpoint: inject('sqsEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    useQueueUrlAsEndpoint: false,
    maxAttempts: 3,
  });
const strictClient = (inflightLimit?: number) =>
  withStrictSqsLimits(plainClient(), inflightLimit === undefined ? {} : { inflightLimit });

const errorName = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (err: Error) => err.name,
  );

describe('strict SQS limits against fauxqs', () => {
  let clean: SQSClient;
  const newQueue = async (messages: number) => {
    const url = (await clean.send(new CreateQueueCommand({ QueueName: `strict-${randomUUID()}` })))
      .QueueUrl as string;
    for (let i = 0; i < messages; i += 10)
      await clean.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: Array.from({ length: Math.min(10, messages - i) }, (_, j) => ({
            Id: `m${i + j}`,
            MessageBody: `body-${i + j}`,
          })),
        }),
      );
    return url;
  };
  const receive = (client: SQSClient, url: string, max: number, visibility: number) =>
    client.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: max,
        WaitTimeSeconds: 0,
        VisibilityTimeout: visibility,
      }),
    );

  beforeAll(() => {
    expect(process.env[FAULTS_ENV]).toBeUndefined();
    clean = plainClient();
  });
  afterEach(() => {
    vi.useRealTimers();
    delete process.env[INFLIGHT_LIMIT_ENV];
  });

  it('ReceiveMessage is refused with OverLimit once the queue has the in-flight limit of messages, and allowed again below it', async () => {
    const url = await newQueue(8);
    const sqs = strictClient(5);
    expect((await receive(sqs, url, 5, 60)).Messages).toHaveLength(5);
    // This client counts what it received since it read the queue's count.
    const refused = await sqs
      .send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 0 }))
      .catch((e) => e);
    expect(refused).toBeInstanceOf(OverLimit);
    expect((refused as OverLimit).$metadata.httpStatusCode).toBe(400);
    // A fresh client reads ApproximateNumberOfMessagesNotVisible from the queue: 5 in flight.
    const other = strictClient(5);
    expect(await errorName(receive(other, url, 1, 60))).toBe('OverLimit');
    // Nothing was received by the refused calls: the other 3 are still there.
    const rest = await receive(clean, url, 10, 60);
    expect(rest.Messages).toHaveLength(3);
    for (const m of rest.Messages ?? [])
      await clean.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    // Still 5 in flight: a limit of 6 lets a receive through.
    expect(await errorName(receive(strictClient(6), url, 1, 60))).toBe('ok');
  });

  it('past the in-flight limit a long poll is not refused: it waits its time and answers no messages, as SQS documents', async () => {
    const url = await newQueue(4);
    const sqs = strictClient(2);
    expect((await receive(sqs, url, 2, 60)).Messages).toHaveLength(2);
    const started = performance.now();
    const out = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 2, WaitTimeSeconds: 1 }),
    );
    expect(out.Messages ?? []).toEqual([]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    // The two messages still visible were not received by it; a short poll is still refused.
    expect(await errorName(receive(sqs, url, 1, 60))).toBe('OverLimit');
    expect((await receive(clean, url, 10, 60)).Messages).toHaveLength(2);
  });

  it('the count is cached for about a second per queue: deleting in-flight messages lifts the refusal after that', async () => {
    const url = await newQueue(4);
    const sqs = strictClient(3);
    const got = (await receive(sqs, url, 3, 60)).Messages ?? [];
    expect(got).toHaveLength(3);
    expect(await errorName(receive(sqs, url, 1, 60))).toBe('OverLimit');
    for (const m of got)
      await clean.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await receive(sqs, url, 1, 60)).Messages).toHaveLength(1);
  });

  it('TAKOFORM_SQS_INFLIGHT_LIMIT sets the limit of clients built without one; a malformed value is refused', async () => {
    const url = await newQueue(3);
    process.env[INFLIGHT_LIMIT_ENV] = '2';
    const sqs = strictClient();
    expect((await receive(sqs, url, 2, 60)).Messages).toHaveLength(2);
    expect(await errorName(receive(sqs, url, 1, 60))).toBe('OverLimit');
    process.env[INFLIGHT_LIMIT_ENV] = '12k';
    expect(() => strictClient()).toThrow(/TAKOFORM_SQS_INFLIGHT_LIMIT must be a positive integer/);
  });

  it('fauxqs itself refuses a VisibilityTimeout over 43,200 s on ReceiveMessage and ChangeMessageVisibility', async () => {
    const url = await newQueue(1);
    const sqs = strictClient();
    // fauxqs names its query-compatible error codes AWS.SimpleQueueService.<code>; SQS does not
    // for this one, hence the optional prefix.
    const invalid = /^(AWS\.SimpleQueueService\.)?InvalidParameterValue$/;
    expect(await errorName(receive(sqs, url, 1, 43_201))).toMatch(invalid);
    const [m] = (await receive(sqs, url, 1, 60)).Messages ?? [];
    expect(
      await errorName(
        sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: url,
            ReceiptHandle: m?.ReceiptHandle,
            VisibilityTimeout: 43_201,
          }),
        ),
      ),
    ).toMatch(invalid);
  });

  it('no message stays invisible past 12 h after its receive: ChangeMessageVisibility beyond it is InvalidParameterValue, up to it is fine', async () => {
    const url = await newQueue(1);
    const sqs = strictClient();
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    const [m] = (await receive(sqs, url, 1, 60)).Messages ?? [];
    const change = (seconds: number) =>
      errorName(
        sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: url,
            ReceiptHandle: m?.ReceiptHandle,
            VisibilityTimeout: seconds,
          }),
        ),
      );
    // Well within 12 h: the longest timeout allowed is fine.
    expect(await change(43_100)).toBe('ok');
    vi.setSystemTime(Date.now() + 11 * HOUR_MS);
    expect(await change(3_700)).toBe('InvalidParameterValue');
    expect(await change(3_500)).toBe('ok');
    // 42,600 s after the receive, what delivery-service.ts sends — 43,199 s minus the whole
    // seconds elapsed — is allowed; 2 s more is not.
    vi.setSystemTime(Date.now() + 3_000_000);
    expect(await change(43_199 - 42_600)).toBe('ok');
    expect(await change(43_201 - 42_600)).toBe('InvalidParameterValue');
    expect(await change(0)).toBe('ok'); // visible again is always allowed
  });

  it('in a ChangeMessageVisibilityBatch only the entries beyond 12 h fail (InvalidParameterValue, sender fault); they are not applied, the others are', async () => {
    const url = await newQueue(2);
    const sqs = strictClient();
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    const [old] = (await receive(sqs, url, 1, 2)).Messages ?? [];
    vi.setSystemTime(Date.now() + 12 * HOUR_MS - 60_000);
    const [recent] = (await receive(sqs, url, 1, 2)).Messages ?? [];
    const out = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'old', ReceiptHandle: old?.ReceiptHandle, VisibilityTimeout: 120 },
          { Id: 'recent', ReceiptHandle: recent?.ReceiptHandle, VisibilityTimeout: 120 },
        ],
      }),
    );
    expect(out.Successful?.map((s) => s.Id)).toEqual(['recent']);
    expect(out.Failed).toEqual([
      expect.objectContaining({ Id: 'old', SenderFault: true, Code: 'InvalidParameterValue' }),
    ]);
    // Only `old` was left at its 2 s visibility: it comes back; `recent` stays hidden for 120 s.
    vi.useRealTimers();
    await new Promise((r) => setTimeout(r, 2_500));
    const back = (await receive(clean, url, 10, 60)).Messages ?? [];
    expect(back.map((m) => m.MessageId)).toEqual([old?.MessageId]);

    // A batch whose every entry is refused is not sent at all.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + 24 * HOUR_MS);
    const none = await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: [{ Id: 'recent', ReceiptHandle: recent?.ReceiptHandle, VisibilityTimeout: 60 }],
      }),
    );
    expect(none.Successful).toEqual([]);
    expect(none.Failed?.map((f) => f.Code)).toEqual(['InvalidParameterValue']);
  });
});
