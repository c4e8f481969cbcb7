/**
 * The queue backend with a deployment's settings, against the SQS stand-in (or LocalStack):
 * the encryption, TLS-only policy and tags it sends are accepted and read back as given.
 */
import { randomBytes } from 'node:crypto';
import { DeleteQueueCommand, GetQueueAttributesCommand, ListQueueTagsCommand } from '@aws-sdk/client-sqs';
import { describe, expect, inject, it } from 'vitest';
import { sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { SqsQueueBackend, tlsOnlyQueuePolicy } from '../../../lambdas/adapters/aws/sqs-queue-backend.ts';

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
