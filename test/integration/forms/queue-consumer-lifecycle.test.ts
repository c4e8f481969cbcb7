import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDeliveryStore } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { LocalWorkerRegistry } from '../../../lambdas/local/workers/local-worker-registry.ts';
import { createTestHost, FORMS, type TestHost } from '../../support/host-harness.ts';
import {
  acceptedConsumer,
  attachmentItem,
  claimItem,
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  endBatch,
  expectProblem,
  getOperation,
  getResource,
  idleLane,
  remove,
  removeAndSettle,
  resourceItem,
  SPACE,
  sleep,
  sqsQueues,
  sqsUrl,
  startBatch,
  tableSnapshot,
  update,
} from './consumer-support.ts';

/**
 * QueueConsumer 0.3.0 over its life (QC-07..QC-10), and what it means for the Resources it
 * references: AtLeastOnceQueue (AQ-02) and ModuleWorker (MW-01, MW-02).
 */
describe('QueueConsumer 0.3.0 lifecycle', () => {
  let host: TestHost;
  let dead: string;
  let worker: string;
  let n = 0;
  const fresh = (p: string) => `${p}-${++n}`;
  const dlq = (uid: string) => ({ deadLetterQueue: { resourceUid: uid } });

  beforeAll(async () => {
    host = await createTestHost();
    dead = await createQueue(host, 'orders-dead');
    worker = await createWorker(host, 'handler');
    await host.settle();
  });

  /** A settled consumer on a fresh queue, optionally with a dead-letter queue. */
  async function settledConsumer(deadLetter?: string) {
    const q = await createQueue(host, fresh('q'));
    await host.settle();
    const spec = consumerSpec(q, worker, deadLetter ? dlq(deadLetter) : {});
    const uid = await acceptedConsumer(host, fresh('c'), spec);
    await host.settle();
    return { uid, queue: q, spec };
  }

  it('QC-07 changing queue or worker on update is 422 invalid_spec and changes nothing', async () => {
    const c = await settledConsumer(dead);
    const otherQueue = await createQueue(host, fresh('q'));
    const otherWorker = await createWorker(host, fresh('w'));
    await host.settle();
    const resource = (await getResource(host, c.uid)).body;
    const table = await tableSnapshot(host);
    const accepted = host.accepted.length;
    for (const spec of [
      { ...c.spec, queue: { resourceUid: otherQueue } },
      { ...c.spec, worker: { resourceUid: otherWorker } },
      { ...c.spec, queue: { resourceUid: otherQueue }, worker: { resourceUid: otherWorker } },
      // Even to a uid that does not exist: immutability is judged before references.
      { ...c.spec, queue: { resourceUid: 'rNOSUCHQUEUE' } },
    ]) {
      expectProblem(await update(host, c.uid, 1, spec), 422, 'invalid_spec');
    }
    expect((await getResource(host, c.uid)).body).toEqual(resource);
    expect(resource.generation).toBe(1);
    expect(await tableSnapshot(host)).toEqual(table);
    expect(host.accepted.length).toBe(accepted);
    // The unchanged spec under a new key is a normal update (generation 2).
    const same = await update(host, c.uid, 1, c.spec);
    expect(same.status).toBe(202);
    expect(same.body.generation).toBe(2);
    await host.settle();
  });

  it('QC-07 an accepted update replaces the spec and reaches the attachment only through the executor', async () => {
    const c = await settledConsumer();
    expect(await attachmentItem(host, c.uid)).toMatchObject({ generation: 1, state: 'active' });
    const next = consumerSpec(c.queue, worker, { maxBatchSize: 50, retryDelaySeconds: 600 });
    const up = await update(host, c.uid, 1, next);
    expect(up.status).toBe(202);
    expect(up.body).toMatchObject({ action: 'update', generation: 2, status: 'queued' });
    // Accepted, not applied: the attachment still carries generation 1.
    const before = await attachmentItem(host, c.uid);
    expect(before?.generation).toBe(1);
    expect(JSON.parse(before?.specJson).maxBatchSize).toBe(10);
    expect((await getResource(host, c.uid)).body).toMatchObject({
      generation: 2,
      observedGeneration: 1,
      phase: 'pending',
      spec: next,
    });
    await host.settle();
    expect((await getOperation(host, up.body.id)).body).toMatchObject({
      status: 'succeeded',
      effect: 'complete',
    });
    const after = await attachmentItem(host, c.uid);
    expect(after).toMatchObject({ generation: 2, state: 'active' });
    expect(JSON.parse(after?.specJson)).toEqual(next);
    expect((await getResource(host, c.uid)).body).toMatchObject({
      generation: 2,
      observedGeneration: 2,
      phase: 'idle',
    });
    // Whole replacement: a field left out is not kept from the old spec (deadLetterQueue here).
    const withDlq = await update(host, c.uid, 2, { ...next, ...dlq(dead) });
    expect(withDlq.status).toBe(202);
    await host.settle();
    const dropped = await update(host, c.uid, 3, next);
    expect(dropped.status).toBe(202);
    await host.settle();
    expect((await getResource(host, c.uid)).body.spec).toEqual(next);
    expect(JSON.parse((await attachmentItem(host, c.uid))?.specJson)).toEqual(next);
  });

  it('QC-07 an activation whose result was lost is reconciled onto the same attachment, never a second one', async () => {
    const q = await createQueue(host, fresh('q'));
    await host.settle();
    const activate = host.attachments.activate.bind(host.attachments);
    let calls = 0;
    host.attachments.activate = async (a) => {
      calls++;
      await activate(a);
      if (calls === 1) throw new Error('response lost after the write');
    };
    try {
      const created = await createConsumer(host, fresh('c'), consumerSpec(q, worker));
      const uid = created.body.resourceUid;
      await host.settle();
      expect((await getOperation(host, created.body.id)).body).toMatchObject({
        status: 'reconciling',
        effect: 'unknown',
      });
      expect((await getResource(host, uid)).body.phase).toBe('pending');
      await sleep(1_100);
      await host.settle();
      expect((await getOperation(host, created.body.id)).body).toMatchObject({ status: 'succeeded' });
      expect(calls).toBe(2);
      const attachments = (await tableSnapshot(host))
        .map((row) => JSON.parse(row))
        .filter((item) => item.pk.startsWith('ATTACH#') && item.consumerUid === uid);
      expect(attachments).toHaveLength(1);
      expect(attachments[0]).toMatchObject({ generation: 1, state: 'active' });
      expect((await claimItem(host, q))?.owner).toBe(uid);
    } finally {
      host.attachments.activate = activate;
    }
  });

  it('QC-09 observed is {} until checked, then queueExists/workerExists/consumerAttached; output is always {}', async () => {
    const q = await createQueue(host, fresh('q'));
    await host.settle();
    const created = await createConsumer(host, fresh('c'), consumerSpec(q, worker, dlq(dead)));
    expect(created.status).toBe(202);
    const uid = created.body.resourceUid;
    const first = (await getResource(host, uid)).body;
    expect(first).toMatchObject({ phase: 'pending', observed: {}, output: {}, observedAt: null });
    expect(first.observed).toEqual({});
    await host.settle();
    const idle = (await getResource(host, uid)).body;
    expect(idle.observed).toEqual({ queueExists: true, workerExists: true, consumerAttached: true });
    expect(idle.output).toEqual({});
    expect(idle.observedGeneration).toBe(1);

    // An item the Host cannot check is omitted, never reported false.
    const inspect = host.queues.inspect;
    host.queues.inspect = async () => {
      throw new Error('SQS unavailable');
    };
    try {
      expect((await update(host, uid, 1, consumerSpec(q, worker, { maxRetries: 7 }))).status).toBe(202);
      await host.settle();
    } finally {
      host.queues.inspect = inspect;
    }
    const partial = (await getResource(host, uid)).body;
    expect(partial.observed).toEqual({ workerExists: true, consumerAttached: true });
    expect(partial.output).toEqual({});

    // Confirmed absence of the worker's code is `false`: the update is accepted while the code is
    // there, and the code is gone by the time the executor observes.
    const code = host.workers.code.get(`${SPACE}/handler`)!;
    expect((await update(host, uid, 2, consumerSpec(q, worker, { maxRetries: 8 }))).status).toBe(202);
    host.workers.code.delete(`${SPACE}/handler`);
    try {
      await host.settle();
    } finally {
      host.workers.code.set(`${SPACE}/handler`, code);
    }
    expect((await getResource(host, uid)).body.observed).toEqual({
      queueExists: true,
      workerExists: false,
      consumerAttached: true,
    });

    const del = await remove(host, uid, 3);
    expect(del.status).toBe(202);
    await host.settle();
    expect((await getOperation(host, del.body.id)).body).toMatchObject({ status: 'succeeded' });
    expect(await attachmentItem(host, uid)).toBeUndefined();
    const record = await resourceItem(host, uid);
    expect(JSON.parse(record?.observedJson)).toMatchObject({ consumerAttached: false });
    expect(JSON.parse(record?.outputJson)).toEqual({});
  });

  it('QC-10 reads never start delivery: no attachment appears, changes or stops until the executor runs', async () => {
    const q = await createQueue(host, fresh('q'));
    await host.settle();
    const created = await createConsumer(host, fresh('c'), consumerSpec(q, worker));
    const uid = created.body.resourceUid;
    const readAll = async () => {
      for (let i = 0; i < 3; i++) {
        expect((await getResource(host, uid)).status).toBe(200);
        expect((await getOperation(host, host.accepted.at(-1)!)).status).toBe(200);
        expect((await host.request({ path: '/resources', query: `space=${SPACE}` })).status).toBe(200);
        expect(
          (await host.request({ path: '/support', query: `form=${encodeURIComponent(FORMS.consumer)}` }))
            .status,
        ).toBe(200);
      }
    };
    await readAll();
    expect(await attachmentItem(host, uid)).toBeUndefined();
    expect((await getOperation(host, created.body.id)).body).toMatchObject({
      status: 'queued',
      effect: 'none',
    });
    expect((await getResource(host, uid)).body.observed).toEqual({});

    await host.settle();
    expect(await attachmentItem(host, uid)).toMatchObject({ generation: 1, state: 'active' });

    const up = await update(host, uid, 1, consumerSpec(q, worker, { maxBatchSize: 99 }));
    await readAll();
    expect(await attachmentItem(host, uid)).toMatchObject({ generation: 1 });
    expect((await getOperation(host, up.body.id)).body.status).toBe('queued');
    await host.settle();

    const del = await remove(host, uid, 2);
    await readAll();
    expect(await attachmentItem(host, uid)).toMatchObject({ generation: 2, state: 'active' });
    expect((await getOperation(host, del.body.id)).body.status).toBe('queued');
    await host.settle();
    expect(await attachmentItem(host, uid)).toBeUndefined();
  });

  it('QC-08 delete detaches only: queue, worker, dead-letter queue and queued messages stay', async () => {
    const c = await settledConsumer(dead);
    const url = await sqsUrl(host, c.queue);
    expect(url).toBeDefined();
    const body = `order-${Date.now()}`;
    await host.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
    const sqsBefore = await sqsQueues(host);

    await removeAndSettle(host, c.uid);
    expect([404, 410]).toContain((await getResource(host, c.uid)).status);
    expect(await attachmentItem(host, c.uid)).toBeUndefined();
    expect(await claimItem(host, c.queue)).toBeUndefined();

    for (const uid of [c.queue, dead, worker]) {
      const r = await getResource(host, uid);
      expect(r.status, uid).toBe(200);
      expect(r.body.phase).toBe('idle');
    }
    expect(await sqsQueues(host)).toEqual(sqsBefore);
    expect(await sqsUrl(host, c.queue)).toBe(url);
    expect(await sqsUrl(host, dead)).toBeDefined();
    const got = await host.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect(got.Messages?.map((m) => m.Body)).toEqual([body]);
    // The references are released: the queue is no longer held.
    expect((await resourceItem(host, c.queue))?.inboundRefs).toBe(0);
  });

  it('QC-08 a batch in flight holds the delete in reconciling with the attachment stopping; its end completes it', async () => {
    const c = await settledConsumer();
    await startBatch(host, c.uid, 'batch-1', Date.now() + 60_000);
    const del = await remove(host, c.uid, 1);
    expect(del.status).toBe(202);
    for (let round = 0; round < 3; round++) {
      await host.settle();
      const op = (await getOperation(host, del.body.id)).body;
      expect(op, `round ${round}`).toMatchObject({ status: 'reconciling', effect: 'unknown' });
      const attached = await attachmentItem(host, c.uid);
      expect(attached?.state).toBe('stopping');
      // Out of the dispatcher's index of active attachments: no new batch can start.
      expect(attached?.gsi1pk).toBeUndefined();
      const r = (await getResource(host, c.uid)).body;
      expect(r).toMatchObject({ phase: 'deleting', generation: 2 });
      // Still the queue's consumer: no other consumer can be added meanwhile.
      expectProblem(
        await createConsumer(host, fresh('c'), consumerSpec(c.queue, worker)),
        409,
        'dependency_conflict',
      );
      expectProblem(await update(host, c.uid, 2, c.spec), 409, 'resource_busy');
      await sleep(1_100);
    }
    await endBatch(host, c.uid, 'batch-1');
    await sleep(1_100);
    await host.settle();
    expect((await getOperation(host, del.body.id)).body).toMatchObject({
      status: 'succeeded',
      effect: 'complete',
    });
    expect(await attachmentItem(host, c.uid)).toBeUndefined();
    expect([404, 410]).toContain((await getResource(host, c.uid)).status);
    const again = await createConsumer(host, fresh('c'), consumerSpec(c.queue, worker));
    expect(again.status).toBe(202);
    await host.settle();
  });

  it('QC-08 an idle lane (a slot with no batch yet) is revoked by the stop boundary and does not hold the delete', async () => {
    const c = await settledConsumer();
    await idleLane(host, c.uid, 'lane-idle', Date.now() + 60_000);
    await removeAndSettle(host, c.uid);
    expect(await attachmentItem(host, c.uid)).toBeUndefined();
    // The revoked lane can no longer start a batch.
    expect(
      await new DynamoDeliveryStore(host.dynamodb, host.tableName).markRegistered(c.uid, 'lane-idle'),
    ).toBe(false);
  });

  it('QC-08 a batch past its deadline (messages redeliverable) does not hold the delete', async () => {
    const c = await settledConsumer();
    await startBatch(host, c.uid, 'batch-old', Date.now() - 1);
    await removeAndSettle(host, c.uid);
    expect(await attachmentItem(host, c.uid)).toBeUndefined();
  });

  it('AQ-02 a queue referenced as queue or deadLetterQueue cannot be deleted until the consumer is gone', async () => {
    const ownDead = await createQueue(host, fresh('dead'));
    const c = await settledConsumer(ownDead);
    const consumerName = (await getResource(host, c.uid)).body.name;
    for (const [uid, role] of [
      [c.queue, 'queue'],
      [ownDead, 'deadLetterQueue'],
    ] as const) {
      const before = (await getResource(host, uid)).body;
      const accepted = host.accepted.length;
      const refused = await remove(host, uid, before.generation);
      expectProblem(refused, 409, 'dependency_conflict');
      // The refusal names what still refers to the queue, and as what, so the caller knows what to delete.
      expect(refused.body.detail).toBe(
        `AtLeastOnceQueue ${before.name} is still referenced by QueueConsumer ${consumerName} (as ${role}): delete or change it first`,
      );
      expect((await getResource(host, uid)).body).toEqual(before);
      expect(host.accepted.length).toBe(accepted);
      expect(await sqsUrl(host, uid)).toBeDefined();
    }
    await removeAndSettle(host, c.uid);
    await removeAndSettle(host, c.queue);
    await removeAndSettle(host, ownDead);
    expect(await sqsUrl(host, c.queue)).toBeUndefined();
    expect(await sqsUrl(host, ownDead)).toBeUndefined();
  });

  it('AQ-02 an update that drops or moves the deadLetterQueue releases the old one for deletion', async () => {
    const own = await createQueue(host, fresh('dead'));
    const c = await settledConsumer();
    expect((await update(host, c.uid, 1, { ...c.spec, ...dlq(own) })).status).toBe(202);
    await host.settle();
    expectProblem(await remove(host, own, 1), 409, 'dependency_conflict');
    expect((await update(host, c.uid, 2, c.spec)).status).toBe(202);
    await host.settle();
    await removeAndSettle(host, own);
  });

  it('MW-01 a ModuleWorker referenced by a consumer cannot be deleted until the consumer is gone', async () => {
    const w = await createWorker(host, fresh('w'));
    const q = await createQueue(host, fresh('q'));
    await host.settle();
    const uid = await acceptedConsumer(host, fresh('c'), consumerSpec(q, w));
    await host.settle();
    const before = (await getResource(host, w)).body;
    expect(before.observed).toEqual({ activeDeploymentUid: expect.any(String), ready: true });
    expect(before.output).toEqual({});
    const refused = await remove(host, w, 1);
    expectProblem(refused, 409, 'dependency_conflict');
    expect(refused.body.detail).toMatch(
      /^ModuleWorker \S+ is still referenced by QueueConsumer \S+ \(as worker\)/,
    );
    expect((await getResource(host, w)).body).toEqual(before);
    await removeAndSettle(host, uid);
    await removeAndSettle(host, w);
    expect([404, 410]).toContain((await getResource(host, w)).status);
  });

  it('MW-01 a ModuleWorker spec is exactly {} on create and update', async () => {
    for (const spec of [{ a: 1 }, { takoformUnexpected: true }, [], null, 'worker', 0]) {
      const name = fresh('mw');
      expectProblem(
        await host.create({ form: FORMS.moduleWorker, space: SPACE, name, spec }),
        422,
        'invalid_spec',
      );
      expect((await host.request({ path: '/resources', query: `name=${name}` })).body.items).toEqual([]);
    }
    const w = await createWorker(host, fresh('w'));
    await host.settle();
    for (const spec of [{ a: 1 }, [], null]) {
      expectProblem(await update(host, w, 1, spec), 422, 'invalid_spec');
    }
    expect((await getResource(host, w)).body).toMatchObject({ generation: 1, spec: {} });
  });
});

describe('MW-02 handler declaration in the local worker registry', () => {
  let dir: string;
  let registry: LocalWorkerRegistry;
  const MODULES: Record<string, string> = {
    own: 'export default { queue(batch, env, ctx) {} };',
    'own-async-and-fetch': 'export default { async queue() {}, fetch: () => new Response("ok") };',
    getter: 'export default { get queue() { return () => {}; }, fetch() {} };',
    'getter-throws': 'export default { get queue() { throw new Error("no"); }, fetch() {} };',
    prototype: 'export default Object.create({ queue() {} });',
    'class-instance': 'class W { queue() {} fetch() {} }\nexport default new W();',
    'non-callable': 'export default { queue: "handler", scheduled: 1, fetch() {} };',
    'object-valued': 'export default { queue: { handle() {} } };',
    'throws-at-import': 'throw new Error("broken module");\nexport default { queue() {} };',
    'function-export': 'function w() {}\nw.queue = () => {};\nexport default w;',
    'no-default': 'export const queue = () => {};',
    'array-export': 'const a = [];\na.queue = () => {};\nexport default a;',
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tf-workers-'));
    await mkdir(path.join(dir, SPACE));
    for (const [name, source] of Object.entries(MODULES)) {
      await writeFile(path.join(dir, SPACE, `${name}.mjs`), source);
    }
    registry = new LocalWorkerRegistry(dir);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const handlers = async (name: string) => (await registry.lookup(SPACE, name))?.handlers;

  it('MW-02 an own callable property declares the handler', async () => {
    expect(await handlers('own')).toEqual(['queue']);
    expect(await handlers('own-async-and-fetch')).toEqual(['fetch', 'queue']);
  });

  it('MW-02 a getter, an inherited method or a non-callable value does not declare queue', async () => {
    expect(await handlers('getter')).toEqual(['fetch']);
    expect(await handlers('getter-throws')).toEqual(['fetch']);
    expect(await handlers('prototype')).toEqual([]);
    expect(await handlers('class-instance')).toEqual([]);
    expect(await handlers('non-callable')).toEqual(['fetch']);
    expect(await handlers('object-valued')).toEqual([]);
  });

  it('MW-02 a module that throws at import, or whose default export is not a plain object, has no code', async () => {
    expect(await registry.lookup(SPACE, 'throws-at-import')).toBeUndefined();
    expect(await registry.lookup(SPACE, 'function-export')).toBeUndefined();
    expect(await registry.lookup(SPACE, 'no-default')).toBeUndefined();
    expect(await registry.lookup(SPACE, 'array-export')).toBeUndefined();
    expect(await registry.lookup(SPACE, 'absent')).toBeUndefined();
  });

  it('MW-02 QC-04 through the Host: only a worker whose code declares queue can be consumed', async () => {
    const host = await createTestHost();
    host.workers.lookup = (space, name) => registry.lookup(space, name);
    const q = await createQueue(host, 'orders');
    const uids: Record<string, string> = {};
    for (const name of ['own', 'getter', 'prototype', 'non-callable', 'throws-at-import']) {
      uids[name] = await createWorker(host, name, null);
    }
    await host.settle();
    expect((await getResource(host, uids.own!)).body.observed).toMatchObject({ ready: true });
    expect((await getResource(host, uids['throws-at-import']!)).body.observed).toEqual({
      activeDeploymentUid: null,
      ready: false,
    });
    for (const name of ['getter', 'prototype', 'non-callable', 'throws-at-import']) {
      expectProblem(
        await createConsumer(host, `c-${name}`, consumerSpec(q, uids[name]!)),
        409,
        'dependency_conflict',
      );
    }
    expect(await claimItem(host, q)).toBeUndefined();
    const ok = await createConsumer(host, 'c-own', consumerSpec(q, uids.own!));
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    await host.settle();
    expect((await getResource(host, ok.body.resourceUid)).body.observed).toEqual({
      queueExists: true,
      workerExists: true,
      consumerAttached: true,
    });
  });
});
