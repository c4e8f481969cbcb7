/**
 * Long polls on the SQS stand-in end as SQS's do: a poll waits until messages are there for it or
 * its wait ends. One message arriving at a queue with several polls waiting ends one of them; the
 * others wait on (fauxqs alone answered them all at once, empty, which counted receives SQS never
 * bills and ended lanes' idle waits early).
 */
import { randomUUID } from 'node:crypto';
import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';

// The Host's own client for the stand-in (local endpoint, credentials and SQS's limits).
const client = sqsClient(inject('sqsEndpoint'));

describe('long polls on the SQS stand-in', () => {
  it('one message ends one of three waiting polls; the others wait out their time, empty', async () => {
    const url = (await client.send(new CreateQueueCommand({ QueueName: `polls-${randomUUID()}` })))
      .QueueUrl as string;
    const started = Date.now();
    const polls = Array.from({ length: 3 }, () =>
      client
        .send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 3, MaxNumberOfMessages: 10 }))
        .then((out) => ({ n: out.Messages?.length ?? 0, after: Date.now() - started })),
    );
    await new Promise((r) => setTimeout(r, 500));
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'one' }));
    const answers = await Promise.all(polls);
    const got = answers.filter((a) => a.n > 0);
    expect(got).toHaveLength(1);
    expect(got[0]?.n).toBe(1);
    expect(got[0]?.after).toBeLessThan(2_500);
    // The two others were not answered when the message came: they waited their 3 s.
    for (const a of answers.filter((x) => x.n === 0)) expect(a.after).toBeGreaterThanOrEqual(2_900);
  });

  it('messages that arrive together are handed to waiting polls until none is left', async () => {
    const url = (await client.send(new CreateQueueCommand({ QueueName: `polls-${randomUUID()}` })))
      .QueueUrl as string;
    const polls = Array.from({ length: 2 }, () =>
      client
        .send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5, MaxNumberOfMessages: 1 }))
        .then((out) => out.Messages?.length ?? 0),
    );
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    await Promise.all([
      client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'a' })),
      client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'b' })),
    ]);
    expect(await Promise.all(polls)).toEqual([1, 1]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
