/**
 * The AWS Lambda entries over the AWS composition, against the local stand-ins (or LocalStack):
 * the batch host's refusals (SEC-02, SEC-03), the worker runtime adapter's time bound, the
 * supervisor, the executor and its trigger, and the admin command.
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';

// Powertools logs of the entries stay quiet here; they are asserted on nowhere.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import { DynamoApiKeys } from '../../../lambdas/adapters/aws/dynamodb-api-keys.ts';
import { createAwsHost } from '../../../lambdas/composition/aws-host.ts';
import { superviseOnce } from '../../../lambdas/composition/aws-supervisor.ts';
import {
  type BatchHostRequest,
  type BatchHostResponse,
  slotSchema,
} from '../../../lambdas/delivery/batch-host-protocol.ts';
import type { Received, Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import { hashApiKey } from '../../../lambdas/engine/auth.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { runExecutor } from '../../../lambdas/entries/executor.ts';
import { roundTime } from '../../../lambdas/entries/supervisor.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { main as admin } from '../../../scripts/admin.ts';
import { type AwsTestHost, createAwsTestHost, TEST_DISPATCHER_ARN } from '../../support/aws-host-harness.ts';
import { waitFor } from '../../support/delivery-harness.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * A credential one character away from `credential`: its last one replaced by another. (Replacing
 * the last two by a fixed `AA` left it unchanged once in about a thousand runs.)
 */
const forge = (credential: string) => `${credential.slice(0, -1)}${credential.endsWith('A') ? 'B' : 'A'}`;

describe('the AWS entries', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost();
  });
  afterAll(() => undefined);

  /** Takes a slot and registers what the queue holds, as a worker runtime would. */
  async function openBatch(consumerUid: string, queueUrl: string, on: AwsTestHost = t) {
    const step = createDispatcherStepHandler(on.host);
    const acquired = (await step({ action: 'acquire', consumerUid, generation: 1 })) as {
      status: string;
      slot: Slot;
    };
    expect(acquired.status).toBe('acquired');
    const slot = acquired.slot;
    const out = await waitFor('a message', async () => {
      const r = await on.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          VisibilityTimeout: 60,
        }),
      );
      return r.Messages?.length ? r.Messages : undefined;
    });
    const received: Received[] = out.map((m) => {
      const { body: _body, unannounced: _u, ...envelope } = decodeEnvelope(m.Body)!;
      return { receiptHandle: m.ReceiptHandle!, receivedAt: Date.now(), envelope };
    });
    const batchHost = createBatchHostHandler(on.host);
    const reg = await batchHost({ action: 'register', slot, received });
    expect(reg.ok).toBe(true);
    const registration = (reg as { value: { credential: string; deliver: { received: number }[] } }).value;
    return { slot, received, credential: registration.credential, batchHost };
  }

  it('SEC-02: the batch host refuses forged credentials, foreign consumers, unlisted bindings and other Spaces', async () => {
    const a = await t.setupConsumer('sec-a', {
      queueProducers: { OUT: { queue: 'sec-out' }, ELSEWHERE: { queue: 'only-other' } },
    });
    const b = await t.setupConsumer('sec-b');
    await t.create('https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/', 'team', 'sec-out', {
      messageRetentionSeconds: 3600,
    });
    await t.create('https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/', 'other', 'only-other', {
      messageRetentionSeconds: 3600,
    });
    await t.settle();
    await t.host.host.producer.sendBatch(a.queue, [{ body: 'one' }]);
    const { slot, received, credential, batchHost } = await openBatch(a.consumerUid, a.queue.sqsUrl);
    const forged = forge(credential);
    const refused = (r: BatchHostResponse) => (r.ok ? 'ok' : r.error.name);

    expect(
      refused(
        await batchHost({
          action: 'settle',
          batchId: slot.batchId,
          credential: forged,
          call: { kind: 'ack', index: 0 },
        }),
      ),
    ).toBe('unknown_batch');
    // Dead-letter moves carry bodies only, for messages the Host itself asked to move: a forged
    // credential, another consumer's slot, or an id the Host owes no move are refused.
    const item = { id: received[0]!.envelope.id, body: b64('one') };
    expect(
      refused(
        await batchHost({ action: 'deadLetter', slot, credential: forged, items: [item], last: false }),
      ),
    ).toBe('unknown_batch');
    const foreign = { ...slot, consumerUid: b.consumerUid, queueUid: b.queue.queueUid };
    expect(
      refused(
        await batchHost({ action: 'deadLetter', slot: foreign, credential, items: [item], last: false }),
      ),
    ).toBe('unknown_batch');
    expect(
      refused(await batchHost({ action: 'deadLetter', slot, credential, items: [item], last: true })),
    ).toBe('unknown_batch');
    const produce = (over: Partial<Extract<BatchHostRequest, { action: 'produce' }>>) =>
      batchHost({
        action: 'produce',
        batchId: slot.batchId,
        credential,
        binding: 'OUT',
        messages: [{ body: b64('x') }],
        ...over,
      });
    expect(refused(await produce({ credential: forged }))).toBe('backend_unavailable');
    expect(refused(await produce({ binding: 'NOPE' }))).toBe('invalid_body');
    expect(refused(await produce({ binding: 'ELSEWHERE' }))).toBe('backend_unavailable');
    expect(refused(await produce({ messages: [{ body: b64('x'), delaySeconds: 43_201 }] }))).toBe(
      'backend_unavailable',
    );
    const sent = await produce({});
    expect(sent.ok).toBe(true);

    // After finalisation the batch is closed: no settlement, no producer call.
    const fin = await batchHost({
      action: 'finalize',
      slot,
      credential,
      outcome: 'returned',
    });
    expect(fin).toEqual({ ok: true, value: { deadLetter: [] } });
    // Finalised with nothing owed: a move of a delivered (acknowledged) message is refused.
    expect(
      refused(await batchHost({ action: 'deadLetter', slot, credential, items: [item], last: true })),
    ).toBe('unknown_batch');
    expect(refused(await produce({}))).toBe('backend_unavailable');
    expect(
      refused(
        await batchHost({
          action: 'settle',
          batchId: slot.batchId,
          credential,
          call: { kind: 'ack', index: 0 },
        }),
      ),
    ).toBe('unknown_batch');
  });

  it('SEC-03: malformed calls are refused with the caller’s error names, never a crash', async () => {
    const batchHost = createBatchHostHandler(t.host);
    const refused = async (e: unknown) => {
      const r = await batchHost(e);
      return r.ok ? 'ok' : r.error.name;
    };
    expect(await refused(null)).toBe('invalid_request');
    expect(
      await refused({ action: 'settle', batchId: 'b', credential: 'c', call: { kind: 'ack', index: -1 } }),
    ).toBe('TypeError');
    expect(
      await refused({
        action: 'settle',
        batchId: 'b',
        credential: 'c',
        call: { kind: 'retry', index: 0, delaySeconds: 1.5 },
      }),
    ).toBe('TypeError');
    expect(
      await refused({
        action: 'produce',
        batchId: 'b',
        credential: 'c',
        binding: 'X',
        messages: [{ body: '%%%' }],
      }),
    ).toBe('invalid_body');
    expect(await refused({ action: 'register', slot: {}, received: [], extra: 1 })).toBe('invalid_request');
    expect(await refused({ action: 'drop-table' })).toBe('invalid_request');
  });

  it('SEC-03 DL-02: AcquireSlot reads only its fields of the lane state, counts the round, answers the next state; a delayed lane waits first; a malformed state is refused', async () => {
    const c = await t.setupConsumer('lane-state');
    const step = createDispatcherStepHandler(t.host);
    // A later round's state carries the last round's answers, which the step ignores.
    const state = {
      consumerUid: c.consumerUid,
      generation: 1,
      round: 7,
      inherit: {},
      acquire: { value: { status: 'acquired', slot: { batchId: 'old' } } },
      run: { value: { idle: false, delivered: 3, batches: 1 } },
    };
    const taken = (await step({ action: 'acquire', lane: state })) as {
      status: string;
      slot: Slot;
      lane: unknown;
    };
    expect(taken.status).toBe('acquired');
    expect(taken.lane).toEqual({ consumerUid: c.consumerUid, generation: 1, round: 8, inherit: {} });
    expect(Object.keys(await t.host.host.delivery.slotsOf(c.consumerUid))).toEqual([taken.slot.batchId]);
    // A lane for messages due later: no slot taken, its context kept, the wait counted as a round.
    const delayed = {
      consumerUid: c.consumerUid,
      generation: 1,
      round: 0,
      idle: false,
      inherit: {},
      startAfter: 30,
    };
    expect(await step({ action: 'acquire', lane: delayed })).toEqual({
      status: 'wait',
      waitSeconds: 30,
      lane: { consumerUid: c.consumerUid, generation: 1, round: 1, inherit: {} },
    });
    expect(Object.keys(await t.host.host.delivery.slotsOf(c.consumerUid))).toHaveLength(1);
    for (const lane of [
      { ...state, round: -1 },
      { ...state, round: 1.5 },
      { ...state, generation: 'one' },
      { ...state, startAfter: 90_000 },
      { ...state, inherit: { forged: true } },
    ]) {
      await expect(step({ action: 'acquire', lane })).rejects.toThrow();
    }
    await expect(step({ action: 'acquire', lane: state, extra: 1 })).rejects.toThrow();
  });

  it('DL-03 DL-09 settleMany through the batch host: one answer per call in order; a forged credential or a closed batch settles nothing; a malformed group is a TypeError', async () => {
    const c = await t.setupConsumer('group-settle');
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'g0' }]);
    const { slot, credential, batchHost } = await openBatch(c.consumerUid, c.queue.sqsUrl);
    const answer = (r: BatchHostResponse) => (r.ok ? r.value : r.error.name);
    const group = (over: Partial<Extract<BatchHostRequest, { action: 'settleMany' }>> = {}) =>
      batchHost({
        action: 'settleMany',
        batchId: slot.batchId,
        credential,
        calls: [
          { kind: 'ack', index: 0 },
          { kind: 'retry', index: 0 },
          { kind: 'retry', index: 1, delaySeconds: 0 },
          { kind: 'ackAll' },
        ],
        ...over,
      });
    const forged = forge(credential);
    expect(answer(await group({ credential: forged }))).toEqual([
      'unknown_batch',
      'unknown_batch',
      'unknown_batch',
      'unknown_batch',
    ]);
    expect(
      answer(
        await group({
          calls: [
            { kind: 'ack', index: 0 },
            { kind: 'ack', index: -1 },
          ],
        }),
      ),
    ).toBe('TypeError');
    expect(
      answer(await group({ calls: Array.from({ length: 101 }, () => ({ kind: 'ack', index: 0 })) })),
    ).toBe('TypeError');
    // The worker runtime's view of the same function.
    const remote = remoteBatchHost(async (req) => batchHost(JSON.parse(JSON.stringify(req))));
    expect(
      await remote.settleMany(slot.batchId, credential, [
        { kind: 'ack', index: 0 },
        { kind: 'retry', index: 0 },
        { kind: 'retry', index: 1, delaySeconds: 0 }, // beyond the batch of one
        { kind: 'ackAll' },
      ]),
    ).toEqual(['ok', 'already_settled', 'unknown_batch', 'ok']);
    expect(await batchHost({ action: 'finalize', slot, credential, outcome: 'returned' })).toEqual({
      ok: true,
      value: { deadLetter: [] },
    });
    expect(answer(await group())).toEqual([
      'unknown_batch',
      'unknown_batch',
      'unknown_batch',
      'unknown_batch',
    ]);
  });

  it('SEC-03: a producer batch over the 6 MB invocation payload is refused batch_too_large before any call', async () => {
    const transport = vi.fn(async () => ({ ok: true, value: [] }) as BatchHostResponse);
    const host = remoteBatchHost(transport);
    const body = new Uint8Array(120_000);
    const messages = Array.from({ length: 60 }, () => ({ body }));
    await expect(host.produce('b', 'c', { binding: 'OUT', messages })).rejects.toMatchObject({
      name: 'batch_too_large',
    });
    await expect(
      host.produce('b', 'c', { binding: 'OUT', messages: [{ body: new Uint8Array(127_001) }] }),
    ).rejects.toMatchObject({
      name: 'message_too_large',
    });
    expect(transport).not.toHaveBeenCalled();
  });

  it('DL-05: a handler that outlives the Lambda time bound ends abandoned; its message is retried, never acknowledged', async () => {
    const c = await t.setupConsumer('slow');
    const [id] = await t.host.host.producer.sendBatch(c.queue, [{ body: 'slow' }]);
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid: c.consumerUid, generation: 1 })) as {
      slot: Slot;
    };
    const batchHost = createBatchHostHandler(t.host);
    let started = 0;
    const exits: number[] = [];
    const handler = createQueueWorkerHandler(
      {
        async queue() {
          started++;
          await new Promise(() => {}); // never settles
        },
      },
      {},
      {
        sqs: t.sqs,
        host: () => remoteBatchHost(async (req) => batchHost(JSON.parse(JSON.stringify(req)))),
        idleWaitSeconds: 1,
        marginMs: 1_000,
        // The cut-off handler still runs, so the adapter ends the process (DL-02).
        exit: (code) => exits.push(code),
      },
    );
    const began = Date.now();
    await expect(
      handler(
        { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
        { getRemainingTimeInMillis: () => 4_000 },
      ),
    ).rejects.toMatchObject({ name: 'Runtime.ExitError' });
    expect(Date.now() - began).toBeLessThan(4_000);
    // One batch ran (its handler was cut off), then the process was ended once.
    expect(exits).toHaveLength(1);
    expect(started).toBe(1);
    const head = await t.host.deliveryStore.getHead(acquired.slot.batchId);
    // Finalised: closed as abandoned and applied. Its handler may run until the process ends, so
    // its slot stays held until its deadline (DL-02).
    expect(head).toMatchObject({ closed: true, outcome: 'abandoned', applied: true });
    expect(await t.host.deliveryStore.slots(c.consumerUid)).toHaveProperty(acquired.slot.batchId);
    const attempts = await t.host.deliveryStore.getAttempts(c.queue.queueUid, [id!]);
    expect(attempts.get(id!)).toMatchObject({ attempts: 1 });
    expect(attempts.get(id!)?.acked).toBeUndefined();
  });

  it('DL-03: on the Lambda adapter a handler’s concurrent acknowledge() calls travel as one batch-host invoke per batch; all are acknowledged', async () => {
    const c = await t.setupConsumer('grouped');
    const ids = await t.host.host.producer.sendBatch(
      c.queue,
      Array.from({ length: 10 }, (_, i) => ({ body: `g${i}` })),
    );
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid: c.consumerUid, generation: 1 })) as {
      slot: Slot;
    };
    const batchHost = createBatchHostHandler(t.host);
    const requests: BatchHostRequest[] = [];
    const answers: string[] = [];
    const handler = createQueueWorkerHandler(
      {
        async queue(batch: { messages: { id: string }[]; acknowledge(id: string): Promise<void> }) {
          const got = await Promise.all(
            batch.messages.map((m) =>
              batch.acknowledge(m.id).then(
                () => 'resolved',
                (e: Error) => e.name,
              ),
            ),
          );
          answers.push(...got);
        },
      },
      {},
      {
        sqs: t.sqs,
        host: () =>
          remoteBatchHost(async (req) => {
            requests.push(req);
            return batchHost(JSON.parse(JSON.stringify(req)));
          }),
        idleWaitSeconds: 0,
        exit: () => {},
      },
    );
    await handler(
      { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
      { getRemainingTimeInMillis: () => 30_000 },
    );
    expect(answers).toEqual(ids.map(() => 'resolved'));
    const settling = requests.filter((r) => r.action === 'settle' || r.action === 'settleMany');
    const batches = requests.filter((r) => r.action === 'finalize').length;
    // One invoke per batch carries all of its acknowledgements.
    expect(settling).toHaveLength(batches);
    expect(batches).toBeLessThan(ids.length);
    const carried = settling.flatMap((r) =>
      r.action === 'settleMany' ? r.calls : r.action === 'settle' ? [r.call] : [],
    );
    expect(carried).toHaveLength(ids.length);
    // Every one is recorded as acknowledged, and the batches ended as returned.
    let acknowledged = 0;
    for (const r of requests) {
      if (r.action !== 'finalize') continue;
      const head = await t.host.deliveryStore.getHead(r.slot.batchId);
      expect(head).toMatchObject({ closed: true, outcome: 'returned', doubtful: false });
      expect(Object.values(head?.settled ?? {}).every((code) => code === 'a')).toBe(true);
      acknowledged += Object.keys(head?.settled ?? {}).length;
    }
    expect(acknowledged).toBe(ids.length);
  });

  it('MW-02: a module without an own `queue` function ends its batch as thrown', async () => {
    const c = await t.setupConsumer('noqueue');
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'x' }]);
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid: c.consumerUid, generation: 1 })) as {
      slot: Slot;
    };
    const batchHost = createBatchHostHandler(t.host);
    const inherited = Object.create({ queue: async () => {} });
    const handler = createQueueWorkerHandler(
      inherited,
      {},
      {
        sqs: t.sqs,
        host: () => remoteBatchHost(async (req) => batchHost(JSON.parse(JSON.stringify(req)))),
        idleWaitSeconds: 1,
      },
    );
    await handler(
      { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
      { getRemainingTimeInMillis: () => 30_000 },
    );
    expect(await t.host.deliveryStore.getHead(acquired.slot.batchId)).toMatchObject({ outcome: 'threw' });
  });

  it('supervisor and wake: a send through the Host starts a lane, the minute starts lanes for the backlog no lane receives, names make starts idempotent', async () => {
    const starts: { name: string; input: Record<string, unknown> }[] = [];
    const names = new Set<string>();
    const sfn = {
      send: vi.fn(async (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
        expect(command.constructor.name).toBe('StartExecutionCommand');
        const name = String(command.input.name);
        if (names.has(name)) throw Object.assign(new Error('exists'), { name: 'ExecutionAlreadyExists' });
        names.add(name);
        starts.push({ name, input: JSON.parse(String(command.input.input)) });
        expect(command.input.stateMachineArn).toBe(TEST_DISPATCHER_ARN);
        return {};
      }),
    };
    const own = await createAwsTestHost({ sfn }); // its consumers only
    const c = await own.setupConsumer('sup', { deadLetter: true });
    // One series per queue, labelled with its name (the dynamic label); another Host's queue that
    // the search also finds (a name extending this one's) is not this Host's oldest message.
    const prefix = own.host.config.queueNamePrefix;
    const cloudwatch = {
      send: vi.fn(async () => ({
        MetricDataResults: [
          { Id: 'queues', Label: `${prefix}r01A`, Values: [42, 7] },
          { Id: 'queues', Label: `${prefix}r01B`, Values: [5, 99] },
          { Id: 'queues', Label: `x-${prefix}r01C`, Values: [3600] },
        ],
      })),
    };
    const now = Date.now();
    const deps = { host: own.host, cloudwatch, oldestAgeEveryMinutes: 1, clock: () => now };

    const idle = await superviseOnce(deps as never);
    expect(idle.started).toBe(0);
    expect(starts).toEqual([]);

    // A send through the Host wakes the idle consumer: one lane, named by the second.
    await own.host.host.producer.sendBatch(
      c.queue,
      Array.from({ length: 25 }, (_, i) => ({ body: `m${i}` })),
    );
    expect(starts.map((s) => s.name)).toEqual([
      expect.stringMatching(new RegExp(`^${c.consumerUid}-g1-w\\d+$`)),
    ]);
    // A wake's lane has no lane to take a context from: it reads its own.
    expect(starts[0]?.input).toEqual({
      consumerUid: c.consumerUid,
      generation: 1,
      round: 0,
      idle: false,
      inherit: {},
    });
    const dlq = await own.host.host.queueDirectory.queue(c.dlqUid!);
    await own.host.host.producer.sendBatch(dlq!, [{ body: 'dead' }]); // no consumer: no wake

    // The minute: no lane is receiving (the fake started nothing), 25 visible, batches of 10,
    // maxConcurrency 2 → two lanes.
    const first = await superviseOnce(deps as never);
    expect(first.started).toBe(2);
    expect(first.deadLetter).toBe(1);
    expect(first.backlog).toBeGreaterThanOrEqual(25);
    expect(first.oldestMessageAgeSeconds).toBe(42);
    // The same minute refreshes observed (issue 14): the dead-letter queue's one message shows.
    expect(first.observed.refreshed).toBeGreaterThanOrEqual(1);
    expect((await own.host.host.store.getResource(c.dlqUid!))?.observed).toEqual({
      queueExists: true,
      messageCount: 1,
    });
    const query = (
      cloudwatch.send.mock.calls[0] as unknown as [
        { input: { MetricDataQueries: { Expression: string; Label: string }[] } },
      ]
    )[0].input;
    expect(query.MetricDataQueries).toEqual([
      {
        Id: 'queues',
        Expression: `SEARCH('{AWS/SQS,QueueName} MetricName="ApproximateAgeOfOldestMessage" QueueName=${prefix}r', 'Maximum', 300)`,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudWatch dynamic label.
        Label: "${PROP('Dim.QueueName')}",
        ReturnData: true,
      },
    ]);
    // Named by the second the round was scheduled for (the supervisor's clock here), not the
    // second it ran in: the two lanes of one round share it.
    const second = Math.floor(now / 1000);
    expect(starts.slice(1).map((s) => s.name)).toEqual([
      `${c.consumerUid}-g1-t${second}-0`,
      `${c.consumerUid}-g1-t${second}-1`,
    ]);
    // Issue 13: the round read the lane context once and gave it, sealed, to both lanes, each
    // with its rank in the round's cohort; the step Lambda's AcquireSlot takes a slot with it, and
    // the slot says it is a cohort's (its first batch starts no further lane).
    const [firstLane, secondLane] = starts.slice(1).map((s) => s.input.inherit);
    const { cohort: firstRank, seal: firstSeal, ...firstContext } = firstLane as Record<string, unknown>;
    const { cohort: secondRank, seal: secondSeal, ...secondContext } = secondLane as Record<string, unknown>;
    expect(firstContext).toEqual(secondContext);
    expect([firstRank, secondRank]).toEqual([0, 1]);
    expect(firstSeal).not.toBe(secondSeal);
    expect(firstLane).toMatchObject({ consumerUid: c.consumerUid, generation: 1, seal: expect.any(String) });
    const step = createDispatcherStepHandler(own.host);
    const acquired = (await step({
      action: 'acquire',
      consumerUid: c.consumerUid,
      generation: 1,
      inherit: firstLane,
    })) as { status: string; slot?: Slot };
    expect(acquired.status).toBe('acquired');
    expect(acquired.slot?.contextReadAt).toBe((firstLane as { contextReadAt: number }).contextReadAt);
    expect(acquired.slot?.cohort).toBe(true);
    // Such a slot passes the worker's event schema (what InvokeWorker hands the worker function).
    expect(slotSchema.safeParse(acquired.slot).success).toBe(true);
    // The same round again (EventBridge delivers at least once), run 90 s later by the clock:
    // the event's time names the same lanes, Step Functions refuses the names, nothing new starts.
    const redelivered = { ...deps, clock: () => now + 90_000 };
    const event = {
      'detail-type': 'Scheduled Event',
      time: new Date(second * 1000).toISOString().replace('.000Z', 'Z'),
    };
    expect(roundTime(event, now + 90_000)).toBe(second * 1000);
    expect((await superviseOnce(redelivered as never, roundTime(event, now + 90_000))).started).toBe(0);
    expect(starts).toHaveLength(3);
    // A lane is receiving (its slot is not registered yet): neither the minute nor a send starts one.
    const later = { ...deps, clock: () => now + 60_000 };
    const taken = await own.host.host.delivery.acquire(c.consumerUid, 1);
    expect(taken.status).toBe('acquired');
    expect((await superviseOnce(later as never)).started).toBe(0);
    await own.host.host.producer.sendBatch(c.queue, [{ body: 'more' }]);
    expect(starts).toHaveLength(3);
  });

  it('executor: an acceptance triggers an asynchronous invoke; the run settles due Operations and counts reconciling ones', async () => {
    const invokes: Record<string, unknown>[] = [];
    const lambda = {
      send: vi.fn(async (command: { input: Record<string, unknown> }) => {
        invokes.push(command.input);
        if (invokes.length === 1) throw new Error('throttled'); // best effort: the API still answers
        return {};
      }),
    };
    const base = t.host.config;
    const host = await createAwsHost(
      { ...base, executorFunction: 'arn:aws:lambda:us-east-1:000000000000:function:executor' },
      { dynamodb: t.dynamodb, sqs: t.sqs, lambda },
      { secrets: { cursorKey: Buffer.alloc(32, 1), credentialKey: Buffer.alloc(32, 2) } },
    );
    const { createApiHandler } = await import('../../../lambdas/entries/api.ts');
    const api = createApiHandler(host);
    const post = (name: string) =>
      api({
        httpMethod: 'POST',
        path: '/apis/forms.takoform.com/v2/resources',
        headers: {
          authorization: `Bearer ${t.token}`,
          'content-type': 'application/json',
          'idempotency-key': `key-${name}-0123456789`,
        },
        multiValueHeaders: {},
        multiValueQueryStringParameters: null,
        body: JSON.stringify({
          form: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
          space: 'team',
          name,
          spec: { messageRetentionSeconds: 3600 },
        }),
        isBase64Encoded: false,
      } as never);
    expect((await post('trig-1')).statusCode).toBe(202);
    expect((await post('trig-2')).statusCode).toBe(202);
    expect(invokes).toHaveLength(2);
    for (const i of invokes) {
      expect(i).toMatchObject({
        FunctionName: 'arn:aws:lambda:us-east-1:000000000000:function:executor',
        InvocationType: 'Event',
      });
      expect(JSON.parse(new TextDecoder().decode(i.Payload as Uint8Array))).toMatchObject({
        operationId: expect.any(String),
      });
    }
    const result = await runExecutor(host, () => 60_000, { lingerMs: 0, marginMs: 1_000 });
    expect(result.steps).toBeGreaterThanOrEqual(2);
    expect(result.stuckReconciling).toBe(0);
    const list = await t.request('GET', '/resources', undefined);
    expect(list.status).toBe(200);
    const queues = (list.body.items as { name: string; phase: string }[]).filter((r) =>
      r.name.startsWith('trig-'),
    );
    expect(queues.map((q) => q.phase)).toEqual(['idle', 'idle']);
  });

  it('OPS-04: the executor counts Operations in reconciling and those stuck there', async () => {
    const own = await createAwsTestHost();
    const c = await own.setupConsumer('stuck');
    await own.host.host.producer.sendBatch(c.queue, [{ body: 'held' }]);
    // A registered batch in flight: the consumer's delete cannot complete and stays reconciling (QC-08).
    await openBatch(c.consumerUid, c.queue.sqsUrl, own);
    const del = await own.request('DELETE', `/resources/${c.consumerUid}`, undefined, {
      'idempotency-key': 'delete-stuck-0123456789',
      'takoform-expected-generation': '1',
    });
    expect(del.status).toBe(202);
    const fresh = await runExecutor(own.host, () => 60_000, { lingerMs: 0, marginMs: 1_000 });
    expect(fresh.reconciling).toBe(1);
    expect(fresh.stuckReconciling).toBe(0);
    const later = await runExecutor(own.host, () => 60_000, {
      lingerMs: 0,
      marginMs: 1_000,
      stuckAfterMs: 0,
    });
    expect(later).toMatchObject({ reconciling: 1, stuckReconciling: 1 });
  });

  it('SEC-01: `npm run admin -- keys create/revoke` stores only the hash and prints the token once', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = 'local';
    process.env.AWS_SECRET_ACCESS_KEY = 'local';
    try {
      const sink = () => {
        let text = '';
        return {
          write: (s: string) => {
            text += s;
            return true;
          },
          get text() {
            return text;
          },
        };
      };
      const out = sink();
      const err = sink();
      const common = ['--table', t.tableName, '--endpoint', inject('ddbEndpoint'), '--region', 'us-east-1'];
      const code = await admin(
        [
          'keys',
          'create',
          '--principal',
          'ops',
          '--space',
          'team=write',
          '--space',
          'shared=read',
          ...common,
        ],
        out as never,
        err as never,
      );
      expect(code).toBe(0);
      const token = out.text.trim();
      expect(token).toMatch(/^tfk_[A-Za-z0-9_-]{43}$/);
      expect(err.text).not.toContain(token);
      expect(err.text).toContain(hashApiKey(token));
      const keys = new DynamoApiKeys(t.dynamodb, t.tableName);
      const principal = await keys.authenticate(token);
      expect(principal?.id).toBe('ops');
      expect(Object.fromEntries(principal?.spaces ?? [])).toEqual({ team: 'write', shared: 'read' });
      expect(
        await admin(['keys', 'revoke', hashApiKey(token), ...common], sink() as never, sink() as never),
      ).toBe(0);
      expect(await keys.authenticate(token)).toBeUndefined();
      expect(
        await admin(
          ['keys', 'create', '--principal', 'ops', '--space', 'team=admin', ...common],
          sink() as never,
          sink() as never,
        ),
      ).toBe(2);
    } finally {
      process.env.AWS_ACCESS_KEY_ID = saved.id;
      process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
      if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
      if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
    }
  });
});
