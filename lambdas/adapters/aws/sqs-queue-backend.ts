import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  type SQSClient,
  TagQueueCommand,
} from '@aws-sdk/client-sqs';
import { encodeEnvelope } from '../../delivery/envelope.ts';
import { MESSAGE_LIMITS } from '../../delivery/limits.ts';
import type { QueueBackend } from '../../forms/at-least-once-queue/queue-backend.ts';

/** Whether an SQS error says the queue does not exist (both protocol spellings). */
export function isMissingQueue(err: unknown): boolean {
  const name = (err as { name?: string; Code?: string })?.name ?? '';
  return name === 'QueueDoesNotExist' || name === 'AWS.SimpleQueueService.NonExistentQueue';
}

/** Tags a queue with its Resource uid and Space (queues created before the Space tag get it). */
export async function tagQueueSpace(
  sqs: Pick<SQSClient, 'send'>,
  queue: { sqsUrl: string; queueUid: string; space: string },
): Promise<void> {
  await sqs.send(
    new TagQueueCommand({
      QueueUrl: queue.sqsUrl,
      Tags: { [QUEUE_TAGS.resourceUid]: queue.queueUid, [QUEUE_TAGS.space]: queue.space },
    }),
  );
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

/** How the queues the Host creates are protected and labelled (from the deployment). */
export interface QueueSettings {
  /** A customer-managed KMS key (ARN) for server-side encryption. @default SQS-managed SSE */
  readonly kmsKeyArn?: string;
  /**
   * `arn:<partition>:sqs:<region>:<account>:`: with it every queue gets a policy that refuses
   * requests not made over TLS. @default no queue policy
   */
  readonly queueArnPrefix?: string;
  /** Tags added to every queue (the Host's own `takoform:` tags win). @default none */
  readonly tags?: Readonly<Record<string, string>>;
}

/** SQS allows 50 tags per queue; the Host's own take 2. */
export const MAX_EXTRA_QUEUE_TAGS = 48;

/** Problems with tags a deployment adds to its queues (SQS's tag rules; `aws:`/`takoform:` are reserved). */
export function queueTagProblems(tags: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  const entries = Object.entries(tags);
  if (entries.length > MAX_EXTRA_QUEUE_TAGS) problems.push(`at most ${MAX_EXTRA_QUEUE_TAGS} queue tags`);
  for (const [key, value] of entries) {
    if (!/^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$/u.test(key))
      problems.push(`tag key ${JSON.stringify(key)} is not an SQS tag key`);
    else if (/^(aws|takoform):/i.test(key))
      problems.push(`tag key ${JSON.stringify(key)} uses a reserved prefix`);
    if (typeof value !== 'string' || !/^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$/u.test(value)) {
      problems.push(`tag ${JSON.stringify(key)} has a value SQS does not accept`);
    }
  }
  return problems;
}

/** A queue policy refusing every request not made over TLS (`aws:SecureTransport` false). */
export function tlsOnlyQueuePolicy(queueArn: string): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'DenyInsecureTransport',
        Effect: 'Deny',
        Principal: '*',
        Action: 'sqs:*',
        Resource: queueArn,
        Condition: { Bool: { 'aws:SecureTransport': 'false' } },
      },
    ],
  });
}

/** A time far past any the Host writes (`ts`, `notBefore`): the widest a number in the envelope gets. */
const FAR_FUTURE_MS = 8.64e15;

/**
 * The largest SQS message the Host itself writes: the envelope of a body of the Forms' largest
 * size (base64), with the longest id and commit id and both times. Host messages carry no SQS
 * message attributes, so this is all SQS counts against the queue's `MaximumMessageSize`.
 */
export const HOST_MAX_ENVELOPE_BYTES = Buffer.byteLength(
  encodeEnvelope({
    id: 'm'.repeat(256),
    ts: FAR_FUTURE_MS,
    body: new Uint8Array(MESSAGE_LIMITS.maxBodyBytes),
    notBefore: FAR_FUTURE_MS,
    commit: 'c'.repeat(256),
  }),
);

/**
 * Every Host queue's `MaximumMessageSize`: the Host's largest envelope, rounded up to a whole KiB.
 * SQS's own maximum (1 MiB, also its default for new queues) would let a direct send put a body
 * far past the Forms' limit on the queue, which no handler may be given and whose dead-letter
 * move SQS would then refuse; with this size SQS refuses such a send itself.
 */
export const QUEUE_MAX_MESSAGE_BYTES = Math.ceil(HOST_MAX_ENVELOPE_BYTES / 1024) * 1024;

/**
 * One SQS standard queue per AtLeastOnceQueue Resource, named `<prefix><uid>`; IAM is scoped to
 * the prefix, and a worker's receives to queues tagged with its Space. Every queue is encrypted
 * at rest (SQS-managed SSE, or the deployment's KMS key), and on AWS refuses non-TLS requests.
 * Messages are limited to the Host's own largest (`QUEUE_MAX_MESSAGE_BYTES`), so SQS refuses any
 * larger one, whoever sends it.
 */
export class SqsQueueBackend implements QueueBackend {
  private readonly sqs: SQSClient;
  private readonly prefix: string;
  private readonly settings: QueueSettings;
  private readonly urls = new Map<string, string>();

  constructor(sqs: SQSClient, prefix: string, settings: QueueSettings = {}) {
    if (!/^[A-Za-z0-9_-]{0,50}$/.test(prefix))
      throw new Error(`invalid SQS queue name prefix ${JSON.stringify(prefix)}`);
    this.sqs = sqs;
    this.prefix = prefix;
    this.settings = settings;
  }

  /** The attributes every create and update sets: retention, encryption, the TLS-only policy. */
  private attributes(uid: string, retentionSeconds: number): Record<string, string> {
    const { kmsKeyArn, queueArnPrefix } = this.settings;
    return {
      MessageRetentionPeriod: String(retentionSeconds),
      MaximumMessageSize: String(QUEUE_MAX_MESSAGE_BYTES),
      ...(kmsKeyArn
        ? { KmsMasterKeyId: kmsKeyArn, KmsDataKeyReusePeriodSeconds: '300' }
        : { SqsManagedSseEnabled: 'true' }),
      ...(queueArnPrefix ? { Policy: tlsOnlyQueuePolicy(`${queueArnPrefix}${this.queueName(uid)}`) } : {}),
    };
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
    const attributes = this.attributes(uid, queue.retentionSeconds);
    const tags = { ...this.settings.tags, [QUEUE_TAGS.resourceUid]: uid, [QUEUE_TAGS.space]: queue.space };
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
