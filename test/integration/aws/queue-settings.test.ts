/**
 * The queue backend with a deployment's settings, against the SQS stand-in (or LocalStack):
 * the encryption, TLS-only policy and tags it sends are accepted and read back as given.
 */
import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListQueueTagsCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import {
  QUEUE_MAX_MESSAGE_BYTES,
  SqsQueueBackend,
  tlsOnlyQueuePolicy,
} from '../../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { encodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import { MESSAGE_LIMITS } from '../../../lambdas/delivery/limits.ts';

const ARN_PREFIX = 'arn:aws:sqs:us-east-1:000000000000:';
const KEY = 'arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab';

describe('queues created with the deployment’s settings', () => {
  it('SEC-02: a KMS-encrypted, TLS-only, tagged queue; an update keeps all three', async () => {
    const sqs = sqsClient(inject('sqsEndpoint'));
    const prefix = `k${randomBytes(4).toString('hex')}_`;
    const backend = new SqsQueueBackend(sqs, prefix, {
      kmsKeyArn: KEY,
      queueArnPrefix: ARN_PREFIX,
      tags: { 'cost-center': 'cc-42' },
    });
    await backend.ensure('r01A', { space: 'team', retentionSeconds: 3600 });
    const url = (await backend.queueUrl('r01A'))!;
    const read = async () => {
      const attrs = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['KmsMasterKeyId', 'Policy'] }),
      );
      const tags = await sqs.send(new ListQueueTagsCommand({ QueueUrl: url }));
      return { attributes: attrs.Attributes, tags: tags.Tags };
    };
    const expected = {
      attributes: { KmsMasterKeyId: KEY, Policy: tlsOnlyQueuePolicy(`${ARN_PREFIX}${prefix}r01A`) },
      tags: { 'cost-center': 'cc-42', 'takoform:resource-uid': 'r01A', 'takoform:space': 'team' },
    };
    expect(await read()).toEqual(expected);
    await backend.ensure('r01A', { space: 'team', retentionSeconds: 7200 });
    expect(await read()).toEqual(expected);
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  });
});

describe('the size of messages a Host queue accepts', () => {
  it('SQS itself refuses a direct send larger than the largest envelope the Host writes; the Host’s own largest fits', async () => {
    const sqs = sqsClient(inject('sqsEndpoint'));
    const prefix = `s${randomBytes(4).toString('hex')}_`;
    // A queue made before the Host set the size (SQS's default, 1 MiB) gets it at its next update.
    await sqs.send(new CreateQueueCommand({ QueueName: `${prefix}r01B` }));
    const backend = new SqsQueueBackend(sqs, prefix);
    for (const uid of ['r01A', 'r01B']) {
      await backend.ensure(uid, { space: 'team', retentionSeconds: 3600 });
      const url = (await backend.queueUrl(uid))!;
      const attrs = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['MaximumMessageSize'] }),
      );
      expect(attrs.Attributes?.MaximumMessageSize).toBe(String(QUEUE_MAX_MESSAGE_BYTES));

      const largest = encodeEnvelope({
        id: `m${'x'.repeat(255)}`,
        ts: Date.now(),
        body: new Uint8Array(MESSAGE_LIMITS.maxBodyBytes).fill(0xff),
        notBefore: Date.now() + 86_400_000,
        commit: `c${'y'.repeat(255)}`,
      });
      await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: largest }));
      const oversize = 'z'.repeat(QUEUE_MAX_MESSAGE_BYTES + 1);
      await expect(
        sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: oversize })),
      ).rejects.toMatchObject({
        // SQS's JSON protocol names it with its query-era prefix; the strict client without.
        name: expect.stringMatching(/InvalidParameterValue$/),
        message: expect.stringMatching(/Message must be shorter than/),
      });
      // In a batch, SQS refuses the entry — as a failed entry (the SQS stand-in) or by refusing
      // the whole request (moto); the API reference does not say which, and either sends nothing.
      const batch = await sqs
        .send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'big', MessageBody: oversize }] }))
        .then(
          (out) => out.Failed?.map((f) => f.Code ?? '') ?? [],
          (err: Error) => [err.name],
        );
      expect(batch).toEqual([expect.stringMatching(/InvalidParameterValue$/)]);
      const counts = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }),
      );
      // The Host's own largest envelope, and nothing else.
      expect(counts.Attributes?.ApproximateNumberOfMessages).toBe('1');
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    }
  });
});
