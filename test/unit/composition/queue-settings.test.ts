/**
 * The queues the Host creates at run time: encrypted at rest in any case, TLS-only on AWS, and
 * tagged as the deployment says (an SCP may require tags on sqs:CreateQueue).
 */
import {
  CreateQueueCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  type SQSClient,
  TagQueueCommand,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import {
  HOST_MAX_ENVELOPE_BYTES,
  QUEUE_MAX_MESSAGE_BYTES,
  type QueueSettings,
  queueTagProblems,
  SqsQueueBackend,
  tlsOnlyQueuePolicy,
} from '../../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { readAwsHostConfig } from '../../../lambdas/composition/aws-host.ts';

const ARN_PREFIX = 'arn:aws:sqs:eu-west-1:111111111111:';
const KEY = 'arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab';

/** An SQS client that records commands; the queue exists when `existing` is true. */
function recordingSqs(existing: boolean) {
  const sent: { name: string; input: Record<string, unknown> }[] = [];
  const client = {
    send: async (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
      sent.push({ name: command.constructor.name, input: command.input });
      if (command instanceof GetQueueUrlCommand) {
        if (existing) return { QueueUrl: `https://sqs/${String(command.input.QueueName)}` };
        throw Object.assign(new Error('no queue'), { name: 'QueueDoesNotExist' });
      }
      if (command instanceof CreateQueueCommand) return { QueueUrl: 'https://sqs/new' };
      return {};
    },
  };
  return { client: client as unknown as SQSClient, sent };
}

async function ensure(settings: QueueSettings | undefined, existing = false) {
  const { client, sent } = recordingSqs(existing);
  await new SqsQueueBackend(client, 'takoform-host_', settings).ensure('r01A', {
    space: 'team',
    retentionSeconds: 3600,
  });
  return sent;
}

describe('queues created at run time', () => {
  it('accept messages up to the Host’s largest envelope, far below SQS’s 1 MiB', () => {
    // A 127,000-byte body is 169,336 characters of base64; the rest is the envelope's fields.
    expect(HOST_MAX_ENVELOPE_BYTES).toBeGreaterThan(169_336);
    expect(QUEUE_MAX_MESSAGE_BYTES).toBeGreaterThanOrEqual(HOST_MAX_ENVELOPE_BYTES);
    expect(QUEUE_MAX_MESSAGE_BYTES - HOST_MAX_ENVELOPE_BYTES).toBeLessThan(1024);
    expect(QUEUE_MAX_MESSAGE_BYTES).toBeLessThan(262_144);
  });

  it('are encrypted with SQS-managed SSE when no key is given', async () => {
    const [, create] = await ensure(undefined);
    expect(create?.name).toBe(CreateQueueCommand.name);
    expect(create?.input.Attributes).toEqual({
      MessageRetentionPeriod: '3600',
      MaximumMessageSize: String(QUEUE_MAX_MESSAGE_BYTES),
      SqsManagedSseEnabled: 'true',
    });
  });

  it('with the deployment’s settings: its KMS key, a TLS-only policy on the queue’s ARN, and its tags beside the Host’s', async () => {
    const settings = {
      kmsKeyArn: KEY,
      queueArnPrefix: ARN_PREFIX,
      tags: { 'cost-center': 'cc-42', 'takoform:space': 'spoofed' },
    };
    const [, create] = await ensure(settings);
    expect(create?.input).toEqual({
      QueueName: 'takoform-host_r01A',
      Attributes: {
        MessageRetentionPeriod: '3600',
        MaximumMessageSize: String(QUEUE_MAX_MESSAGE_BYTES),
        KmsMasterKeyId: KEY,
        KmsDataKeyReusePeriodSeconds: '300',
        Policy: tlsOnlyQueuePolicy(`${ARN_PREFIX}takoform-host_r01A`),
      },
      // The Host's own tags win over the deployment's.
      tags: { 'cost-center': 'cc-42', 'takoform:resource-uid': 'r01A', 'takoform:space': 'team' },
    });
    expect(JSON.parse(tlsOnlyQueuePolicy(`${ARN_PREFIX}q`))).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Sid: 'DenyInsecureTransport',
          Effect: 'Deny',
          Principal: '*',
          Action: 'sqs:*',
          Resource: `${ARN_PREFIX}q`,
          Condition: { Bool: { 'aws:SecureTransport': 'false' } },
        },
      ],
    });

    // An existing queue (an update, or a queue made before these settings) gets them too.
    const update = await ensure(settings, true);
    expect(update.map((c) => c.name)).toEqual([
      GetQueueUrlCommand.name,
      SetQueueAttributesCommand.name,
      TagQueueCommand.name,
    ]);
    expect(update[1]?.input.Attributes).toEqual(create?.input.Attributes);
    expect(update[2]?.input.Tags).toEqual(create?.input.tags);
  });

  it('tags follow SQS’s rules, and the reserved prefixes are refused', () => {
    expect(queueTagProblems({ team: 'a', 'cost-center': 'cc/42 x', owner: '' })).toEqual([]);
    expect(
      queueTagProblems({ 'aws:x': '1', 'Takoform:space': '2', 'bad*key': '3', ok: 'bad\u0000' }),
    ).toEqual([
      'tag key "aws:x" uses a reserved prefix',
      'tag key "Takoform:space" uses a reserved prefix',
      'tag key "bad*key" is not an SQS tag key',
      'tag "ok" has a value SQS does not accept',
    ]);
    const many = Object.fromEntries(Array.from({ length: 49 }, (_, i) => [`k${i}`, 'v']));
    expect(queueTagProblems(many)).toEqual(['at most 48 queue tags']);
  });

  it('the AWS configuration reads them from the environment, and names every malformed one', () => {
    const base = {
      TAKOFORM_TABLE: 'host-table',
      TAKOFORM_QUEUE_PREFIX: 'takoform-host_',
      TAKOFORM_PUBLIC_ORIGIN: 'https://api.example.com',
    };
    expect(readAwsHostConfig(base).queueSettings).toEqual({});
    expect(
      readAwsHostConfig({
        ...base,
        TAKOFORM_QUEUE_ARN_PREFIX: ARN_PREFIX,
        TAKOFORM_QUEUE_KMS_KEY: KEY,
        TAKOFORM_QUEUE_TAGS: '{"team":"a"}',
      }).queueSettings,
    ).toEqual({ queueArnPrefix: ARN_PREFIX, kmsKeyArn: KEY, tags: { team: 'a' } });
    let message = '';
    try {
      readAwsHostConfig({
        ...base,
        TAKOFORM_QUEUE_ARN_PREFIX: 'arn:aws:sqs:eu-west-1:1:',
        TAKOFORM_QUEUE_KMS_KEY: 'not-a-key',
        TAKOFORM_QUEUE_TAGS: '{"aws:x":"1"}',
      });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('TAKOFORM_QUEUE_ARN_PREFIX');
    expect(message).toContain('TAKOFORM_QUEUE_KMS_KEY');
    expect(message).toContain('TAKOFORM_QUEUE_TAGS: tag key "aws:x" uses a reserved prefix');
    expect(() => readAwsHostConfig({ ...base, TAKOFORM_QUEUE_TAGS: '[1]' })).toThrow(
      /JSON object of strings/,
    );
  });
});
