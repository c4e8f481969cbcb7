/**
 * What a worker is scoped to on AWS, over the AWS composition (createAwsHost) and the local
 * stand-ins: the Space tag every Host queue carries (the worker role's `sqs:ReceiveMessage` is
 * conditioned on it; see test/infra for the policy), and slot deadlines sized by the worker
 * function's own registered timeout rather than the Host's bound.
 */
import { randomBytes } from 'node:crypto';
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { ListQueueTagsCommand, ReceiveMessageCommand, UntagQueueCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoApiKeys } from '../../../lambdas/adapters/aws/dynamodb-api-keys.ts';
import { workerRegistrationKey } from '../../../lambdas/adapters/aws/dynamodb-worker-registry.ts';
import { QUEUE_TAGS } from '../../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { superviseOnce } from '../../../lambdas/composition/aws-supervisor.ts';
import { REGISTER_ROOM_MS, type Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';

const QUEUE_FORM = 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/';
/** DeliveryService's default margin for registration and finalisation in a slot deadline. */
const SLOT_MARGIN_MS = 30_000;

describe('SEC-02 DL-09: queues carry their Space', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost();
  });

  const tagsOf = async (url: string) => (await t.sqs.send(new ListQueueTagsCommand({ QueueUrl: url }))).Tags;

  it('SEC-02 DL-09: CreateQueue tags the queue with its Resource’s Space and uid', async () => {
    const token = `tfk_${randomBytes(24).toString('base64url')}`;
    await new DynamoApiKeys(t.dynamodb, t.tableName).put(token, 'bob', { other: 'write' });
    for (const [space, authorization] of [
      ['team', `Bearer ${t.token}`],
      ['other', `Bearer ${token}`],
    ] as const) {
      const created = await t.request(
        'POST',
        '/resources',
        { form: QUEUE_FORM, space, name: `tagged-${space}`, spec: { messageRetentionSeconds: 3600 } },
        { authorization, 'idempotency-key': `tagged-${space}-0123456789` },
      );
      expect(created.status).toBe(202);
      await t.settle();
      const url = await t.host.host.queues.queueUrl(created.body.resourceUid);
      expect(url).toBeDefined();
      expect(await tagsOf(url!)).toEqual({
        [QUEUE_TAGS.resourceUid]: created.body.resourceUid,
        [QUEUE_TAGS.space]: space,
      });
    }
  });

  it('SEC-02 DL-09: the supervisor tags an active consumer’s queue made before the Space tag, so an upgrade never stops delivery', async () => {
    const c = await t.setupConsumer('upgrade');
    await t.sqs.send(new UntagQueueCommand({ QueueUrl: c.queue.sqsUrl, TagKeys: [QUEUE_TAGS.space] }));
    expect((await tagsOf(c.queue.sqsUrl))?.[QUEUE_TAGS.space]).toBeUndefined();
    await superviseOnce({ host: t.host });
    expect(await tagsOf(c.queue.sqsUrl)).toMatchObject({
      [QUEUE_TAGS.space]: 'team',
      [QUEUE_TAGS.resourceUid]: c.queue.queueUid,
    });
  });

  it('the supervisor tags a queue once per Host, not once per round or cold start', async () => {
    const c = await t.setupConsumer('tag-once');
    await t.sqs.send(new UntagQueueCommand({ QueueUrl: c.queue.sqsUrl, TagKeys: [QUEUE_TAGS.space] }));
    await superviseOnce({ host: t.host });
    expect((await tagsOf(c.queue.sqsUrl))?.[QUEUE_TAGS.space]).toBe('team');
    // Taken off again (only a test does that): the next round, which reads the ledger again as a
    // new function instance would, does not tag it a second time.
    await t.sqs.send(new UntagQueueCommand({ QueueUrl: c.queue.sqsUrl, TagKeys: [QUEUE_TAGS.space] }));
    await superviseOnce({ host: t.host });
    expect((await tagsOf(c.queue.sqsUrl))?.[QUEUE_TAGS.space]).toBeUndefined();
  });

  it('SEC-02 DL-09: a queue without the Space tag (created before it existed) gets it at the next update', async () => {
    const created = await t.create(QUEUE_FORM, 'team', 'legacy', { messageRetentionSeconds: 3600 });
    await t.settle();
    const uid = created.body.resourceUid as string;
    const url = (await t.host.host.queues.queueUrl(uid))!;
    await t.sqs.send(new UntagQueueCommand({ QueueUrl: url, TagKeys: [QUEUE_TAGS.space] }));
    expect((await tagsOf(url))?.[QUEUE_TAGS.space]).toBeUndefined();

    const updated = await t.request(
      'PUT',
      `/resources/${uid}`,
      { spec: { messageRetentionSeconds: 7200 } },
      { 'idempotency-key': 'legacy-update-0123456789', 'takoform-expected-generation': '1' },
    );
    expect(updated.status).toBe(202);
    await t.settle();
    const op = await t.request('GET', `/operations/${updated.body.id}`);
    expect(op.body.status).toBe('succeeded');
    expect(await tagsOf(url)).toEqual({ [QUEUE_TAGS.resourceUid]: uid, [QUEUE_TAGS.space]: 'team' });
    // Idempotent: converging again changes nothing.
    await t.host.host.queues.ensure(uid, { space: 'team', retentionSeconds: 7200 });
    expect(await tagsOf(url)).toEqual({ [QUEUE_TAGS.resourceUid]: uid, [QUEUE_TAGS.space]: 'team' });
  });
});

describe('DL-09: slot deadlines follow the worker function’s own timeout', () => {
  const HOST_BOUND_S = 840; // the Host's default workerTimeout
  const now = Date.UTC(2030, 0, 1);
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost({ workerTimeoutSeconds: HOST_BOUND_S, clock: () => now });
  });

  /** Rewrites the consumer's worker registration as ModuleWorkerFunction would with `timeoutSeconds`. */
  async function registerTimeout(workerName: string, timeoutSeconds: string | undefined) {
    const key = workerRegistrationKey('team', workerName);
    const out = await t.dynamodb.send(
      new GetItemCommand({
        TableName: t.tableName,
        Key: { pk: { S: key.pk as string }, sk: { S: '_' } },
        ConsistentRead: true,
      }),
    );
    const { timeoutSeconds: _old, ...item } = out.Item!;
    await t.dynamodb.send(
      new PutItemCommand({
        TableName: t.tableName,
        Item: timeoutSeconds === undefined ? item : { ...item, timeoutSeconds: { N: timeoutSeconds } },
      }),
    );
  }

  async function acquire(consumerUid: string): Promise<Slot> {
    const step = createDispatcherStepHandler(t.host);
    const out = (await step({ action: 'acquire', consumerUid, generation: 1 })) as {
      status: string;
      slot: Slot;
    };
    expect(out.status).toBe('acquired');
    return out.slot;
  }

  /** Registers one message in a fresh slot; the slot's deadline from then on. */
  async function registeredDeadline(c: { consumerUid: string; queue: QueueTarget }): Promise<number> {
    await t.host.host.producer.send(c.queue, 'one');
    const slot = await acquire(c.consumerUid);
    // Until registration the slot covers gathering only.
    expect(slot.deadline).toBe(
      now + (t.host.config.idleWaitSeconds + 0) * 1000 + REGISTER_ROOM_MS + SLOT_MARGIN_MS,
    );
    const out = await t.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: c.queue.sqsUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 2 }),
    );
    const m = out.Messages?.[0];
    const {
      body: _b,
      unannounced: _u,
      ...envelope
    } = decodeEnvelope(m?.Body) as NonNullable<ReturnType<typeof decodeEnvelope>>;
    const reg = await t.host.host.delivery.register(slot, [
      { receiptHandle: m?.ReceiptHandle as string, receivedAt: Date.now(), envelope },
    ]);
    expect(reg.deliver).toHaveLength(1);
    // The slot map holds the same deadline the runner was given.
    expect((await t.host.host.delivery.slotsOf(c.consumerUid))[slot.batchId]).toBe(reg.deadline);
    return reg.deadline as number;
  }

  it('DL-09: a 300 s worker function’s registered batch holds its slot for 300 s + margin, not the Host’s 840 s', async () => {
    const c = await t.setupConsumer('short');
    await registerTimeout('short-w', '300');
    expect(await t.host.workers.timeoutMs('team', 'short-w')).toBe(300_000);
    // The full function timeout: the runtime cuts a handler off a little before the Lambda ends,
    // but the invocation can last until then.
    const deadline = await registeredDeadline(c);
    expect(deadline).toBe(now + 300_000 + SLOT_MARGIN_MS);
    expect(deadline).toBeLessThan(now + HOST_BOUND_S * 1000);
  });

  it('DL-09: without a recorded timeout, or with one above the Host’s bound, the Host’s bound applies', async () => {
    const legacy = await t.setupConsumer('legacy');
    await registerTimeout('legacy-w', undefined);
    expect(await t.host.workers.timeoutMs('team', 'legacy-w')).toBeUndefined();
    expect(await registeredDeadline(legacy)).toBe(now + HOST_BOUND_S * 1000 + SLOT_MARGIN_MS);

    const long = await t.setupConsumer('long');
    await registerTimeout('long-w', '900');
    expect(await registeredDeadline(long)).toBe(now + HOST_BOUND_S * 1000 + SLOT_MARGIN_MS);
  });

  it('DL-09: a malformed recorded timeout makes the registration count as absent (no slot is taken)', async () => {
    const bad = await t.setupConsumer('bad');
    await registerTimeout('bad-w', '5000');
    expect(await t.host.workers.registration('team', 'bad-w')).toBeUndefined();
    const step = createDispatcherStepHandler(t.host);
    expect(await step({ action: 'acquire', consumerUid: bad.consumerUid, generation: 1 })).toMatchObject({
      status: 'stop',
    });
  });
});
