import { randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import {
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type SendMessageBatchCommandInput,
} from '@aws-sdk/client-sqs';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { commitKey } from '../../../lambdas/adapters/aws/dynamodb-commit-store.ts';
import { createQueueProducerClient } from '../../../lambdas/client/index.ts';
import { decodeEnvelope, type Envelope } from '../../../lambdas/delivery/envelope.ts';
import { MAX_RETENTION_SECONDS } from '../../../lambdas/delivery/limits.ts';
import {
  createTestHost,
  FORMS,
  type ParsedResponse,
  type TestHost,
  type TestPrincipal,
} from '../../support/host-harness.ts';

const token = (who: string) => `${who}-${randomBytes(24).toString('hex')}`;
const ALICE: TestPrincipal = { id: 'alice', token: token('alice'), spaces: { team: 'write' } };
/** Alice again, through a key that grants only `read` on the Space: she owns the queue but may not send. */
const ALICE_READ_ONLY: TestPrincipal = { id: 'alice', token: token('alice-ro'), spaces: { team: 'read' } };
const BOB: TestPrincipal = { id: 'bob', token: token('bob'), spaces: { team: 'write' } };

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

describe('producer paths against the SQS stand-in and DynamoDB Local', () => {
  let host: TestHost;
  /** SendMessageBatch requests as the producer made them (the SDK's view, before the wire). */
  const sentBatches: SendMessageBatchCommandInput[] = [];

  beforeAll(async () => {
    host = await createTestHost({ principals: [ALICE, ALICE_READ_ONLY, BOB] });
    host.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'SendMessageBatchCommand') {
          sentBatches.push(args.input as SendMessageBatchCommandInput);
        }
        return next(args);
      },
      { step: 'initialize', name: 'recordSendMessageBatch' },
    );
  });

  async function createQueue(name: string, spec: Record<string, number> = { messageRetentionSeconds: 3600 }) {
    const res = await host.create({ form: FORMS.queue, space: 'team', name, spec }, ALICE);
    expect(res.status).toBe(202);
    await host.settle();
    const uid: string = res.body.resourceUid;
    const target = await host.queueDirectory.queue(uid);
    if (!target) throw new Error(`queue ${name} is not live`);
    return { uid, url: target.sqsUrl };
  }

  const post = (uid: string, body: unknown, as: TestPrincipal | null = ALICE) =>
    host.request({ method: 'POST', path: `/ext/queues/v1/queues/${uid}/messages`, body, as });

  /** Receives (and deletes) until `count` messages arrived or nothing more comes. */
  async function drain(url: string, count: number): Promise<Envelope[]> {
    const out: Envelope[] = [];
    for (let idle = 0; out.length < count && idle < 5; ) {
      const res = await host.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      const got = res.Messages ?? [];
      if (got.length === 0) {
        idle++;
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      for (const m of got) {
        const e = decodeEnvelope(m.Body);
        if (!e) throw new Error('a message that is not a Host envelope');
        out.push(e);
      }
      await host.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: got.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
        }),
      );
    }
    return out;
  }

  async function counts(url: string) {
    const out = await host.sqs.send(
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
    return {
      visible: Number(a.ApproximateNumberOfMessages),
      hidden: Number(a.ApproximateNumberOfMessagesNotVisible),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed),
    };
  }

  async function commitItem(id: string) {
    const out = await host.dynamodb.send(
      new GetItemCommand({ TableName: host.tableName, Key: marshall(commitKey(id)), ConsistentRead: true }),
    );
    return out.Item ? unmarshall(out.Item) : undefined;
  }

  it('AQ-04 DL-10 the HTTP extension sends 1 and 100 messages, returns their ids and the bytes arrive identical', async () => {
    const q = await createQueue('http-main');
    const before = Date.now();
    const one = new Uint8Array(randomBytes(127_000));
    const single = await post(q.uid, { messages: [{ body: b64(one) }] });
    expect(single.status).toBe(200);
    expect(single.headers['cache-control']).toBe('no-store');
    expect(single.body.messageIds).toHaveLength(1);
    const [singleEnvelope] = await drain(q.url, 1);
    expect(singleEnvelope?.id).toBe(single.body.messageIds[0]);
    expect(Buffer.from(singleEnvelope?.body ?? []).equals(Buffer.from(one))).toBe(true);
    expect(singleEnvelope?.commit).toBeUndefined();
    expect(singleEnvelope?.ts).toBeGreaterThanOrEqual(before);
    expect(singleEnvelope?.ts).toBeLessThanOrEqual(Date.now());

    // 100 messages: a few binary bodies of the full 127000 bytes, the rest small and random.
    const bodies = Array.from(
      { length: 100 },
      (_, i) => new Uint8Array(randomBytes(i % 33 === 0 ? 127_000 : 1 + (i % 50))),
    );
    const many = await post(q.uid, { messages: bodies.map((b) => ({ body: b64(b) })) });
    expect(many.status).toBe(200);
    const ids: string[] = many.body.messageIds;
    expect(ids).toHaveLength(100);
    expect(new Set(ids).size).toBe(100);
    for (const id of ids) expect(id.length).toBeGreaterThanOrEqual(1);
    for (const id of ids) expect(id.length).toBeLessThanOrEqual(256);

    const received = await drain(q.url, 100);
    expect(received).toHaveLength(100);
    const byId = new Map(received.map((e) => [e.id, e]));
    ids.forEach((id, i) => {
      const e = byId.get(id);
      expect(e, `message ${i}`).toBeDefined();
      expect(Buffer.from(e?.body ?? []).equals(Buffer.from(bodies[i] as Uint8Array)), `body ${i}`).toBe(true);
    });
    // All or nothing: every message names one commit, and its record exists with a TTL.
    const commitIds = new Set(received.map((e) => e.commit));
    expect(commitIds.size).toBe(1);
    const commitId = [...commitIds][0] as string;
    expect(await host.commits.committed([commitId, 'c-never-written'])).toEqual(new Set([commitId]));
    const item = await commitItem(commitId);
    // The longest retention any queue may get (an update can raise it), not this queue's 3600 s.
    const expectedTtl = Math.ceil(before / 1000) + MAX_RETENTION_SECONDS + 43_200 + 86_400;
    expect(item?.expiresAt).toBeGreaterThanOrEqual(expectedTtl);
    expect(item?.expiresAt).toBeLessThanOrEqual(expectedTtl + 60);
  });

  it('AQ-04 the HTTP extension answers the Problem codes of host-profile §3 and sends nothing on a refusal', async () => {
    const q = await createQueue('http-refusals');
    const ok = { body: b64(new Uint8Array([1, 2, 3])) };
    const cases: [string, () => Promise<ParsedResponse>, number, string][] = [
      [
        '127001 bytes',
        () => post(q.uid, { messages: [ok, { body: b64(new Uint8Array(127_001)) }] }),
        413,
        'message_too_large',
      ],
      [
        '101 messages',
        () => post(q.uid, { messages: Array.from({ length: 101 }, () => ok) }),
        413,
        'batch_too_large',
      ],
      ['not base64', () => post(q.uid, { messages: [{ body: '!!!!' }] }), 400, 'invalid_body'],
      ['non-canonical base64', () => post(q.uid, { messages: [{ body: 'QR==' }] }), 400, 'invalid_body'],
      ['unpadded base64', () => post(q.uid, { messages: [{ body: 'QQ' }] }), 400, 'invalid_body'],
      ['base64url alphabet', () => post(q.uid, { messages: [{ body: '-_-_' }] }), 400, 'invalid_body'],
      ['whitespace in base64', () => post(q.uid, { messages: [{ body: 'QUJD\n' }] }), 400, 'invalid_body'],
      ['body a number', () => post(q.uid, { messages: [{ body: 5 }] }), 400, 'invalid_body'],
      ['body an object', () => post(q.uid, { messages: [{ body: { data: 'QQ==' } }] }), 400, 'invalid_body'],
      ['body missing', () => post(q.uid, { messages: [{ delaySeconds: 1 }] }), 400, 'invalid_body'],
      [
        'delay 43201',
        () => post(q.uid, { messages: [{ ...ok, delaySeconds: 43_201 }] }),
        400,
        'invalid_request',
      ],
      ['delay "5"', () => post(q.uid, { messages: [{ ...ok, delaySeconds: '5' }] }), 400, 'invalid_request'],
      ['delay -1', () => post(q.uid, { messages: [{ ...ok, delaySeconds: -1 }] }), 400, 'invalid_request'],
      ['delay 1.5', () => post(q.uid, { messages: [{ ...ok, delaySeconds: 1.5 }] }), 400, 'invalid_request'],
      [
        'delay null',
        () => post(q.uid, { messages: [{ ...ok, delaySeconds: null }] }),
        400,
        'invalid_request',
      ],
      [
        'unknown item field',
        () => post(q.uid, { messages: [{ ...ok, priority: 1 }] }),
        400,
        'invalid_request',
      ],
      [
        'unknown top-level field',
        () => post(q.uid, { messages: [ok], dedupe: true }),
        400,
        'invalid_request',
      ],
      ['empty list', () => post(q.uid, { messages: [] }), 400, 'invalid_request'],
      ['messages not a list', () => post(q.uid, { messages: ok }), 400, 'invalid_request'],
      ['item not an object', () => post(q.uid, { messages: ['QUJD'] }), 400, 'invalid_request'],
      ['body not an object', () => post(q.uid, [ok]), 400, 'invalid_request'],
      [
        'duplicate JSON key',
        () =>
          host.request({
            method: 'POST',
            path: `/ext/queues/v1/queues/${q.uid}/messages`,
            headers: { 'content-type': 'application/json' },
            rawBody: '{"messages":[],"messages":[{"body":"QUJD"}]}',
          }),
        400,
        'invalid_request',
      ],
      [
        'not JSON',
        () =>
          host.request({
            method: 'POST',
            path: `/ext/queues/v1/queues/${q.uid}/messages`,
            headers: { 'content-type': 'text/plain' },
            rawBody: 'QUJD',
          }),
        415,
        'unsupported_media_type',
      ],
      ['another principal', () => post(q.uid, { messages: [ok] }, BOB), 404, 'not_found'],
      ['read-only access', () => post(q.uid, { messages: [ok] }, ALICE_READ_ONLY), 403, 'forbidden'],
      ['no credentials', () => post(q.uid, { messages: [ok] }, null), 401, 'unauthenticated'],
      ['missing queue', () => post('r0000000000MISSINGQUEUE000', { messages: [ok] }), 404, 'not_found'],
      ['malformed uid', () => post('%ZZ', { messages: [ok] }), 404, 'not_found'],
      [
        'GET',
        () => host.request({ method: 'GET', path: `/ext/queues/v1/queues/${q.uid}/messages` }),
        405,
        'method_not_allowed',
      ],
      [
        'unknown extension path',
        () => host.request({ method: 'POST', path: '/ext/queues/v1/other', body: {} }),
        404,
        'not_found',
      ],
    ];
    for (const [what, call, status, code] of cases) {
      const res = await call();
      expect(res.status, what).toBe(status);
      expect(res.body.code, what).toBe(code);
      expect(res.body.type, what).toBe('about:blank');
    }
    expect(await counts(q.url)).toEqual({ visible: 0, hidden: 0, delayed: 0 });
  });

  it('AQ-04 a Resource that is not a live queue is not found, also for its owner', async () => {
    host.workers.set('team', 'not-a-queue');
    const worker = await host.create(
      { form: FORMS.moduleWorker, space: 'team', name: 'not-a-queue', spec: {} },
      ALICE,
    );
    await host.settle();
    const res = await post(worker.body.resourceUid, { messages: [{ body: 'QUJD' }] });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');

    const q = await createQueue('deleted-queue');
    const del = await host.request({
      method: 'DELETE',
      path: `/resources/${q.uid}`,
      as: ALICE,
      headers: { 'idempotency-key': host.newKey(), 'takoform-expected-generation': '1' },
    });
    expect(del.status).toBe(202);
    // While deleting and after: not found.
    expect((await post(q.uid, { messages: [{ body: 'QUJD' }] })).status).toBe(404);
    await host.settle();
    expect((await post(q.uid, { messages: [{ body: 'QUJD' }] })).status).toBe(404);
  });

  it('AQ-04 a delay past 900 s goes to SQS as DelaySeconds 900 with notBefore in the envelope; the queue default applies otherwise', async () => {
    const q = await createQueue('delays', { messageRetentionSeconds: 3600, deliveryDelaySeconds: 30 });
    const before = Date.now();
    const res = await post(q.uid, { messages: [{ body: 'QUJD', delaySeconds: 1200 }, { body: 'REVG' }] });
    expect(res.status).toBe(200);
    const after = Date.now();
    const entries = sentBatches.filter((b) => b.QueueUrl === q.url).flatMap((b) => b.Entries ?? []);
    expect(entries).toHaveLength(2);
    const [long, byDefault] = entries.map((e) => ({
      delay: e.DelaySeconds,
      env: decodeEnvelope(e.MessageBody),
    }));
    expect(long?.delay).toBe(900);
    expect(long?.env?.id).toBe(res.body.messageIds[0]);
    expect(long?.env?.notBefore).toBeGreaterThanOrEqual(before + 1_200_000);
    expect(long?.env?.notBefore).toBeLessThanOrEqual(after + 1_200_000);
    expect(byDefault?.delay).toBe(30);
    expect(byDefault?.env?.notBefore).toBeUndefined();
    // SQS holds both back.
    expect(await counts(q.url)).toMatchObject({ visible: 0, delayed: 2 });
  });

  it('AQ-04 an SQS failure behind the extension is 503 backend_unavailable', async () => {
    const q = await createQueue('vanishing');
    expect((await post(q.uid, { messages: [{ body: 'QUJD' }] })).status).toBe(200);
    // The queue disappears behind the Host's back; its URL stays cached by the directory.
    await host.sqs.send(new DeleteQueueCommand({ QueueUrl: q.url }));
    const res = await post(q.uid, { messages: [{ body: 'QUJD' }, { body: 'REVG' }] });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('backend_unavailable');
  });

  it('AQ-04 RC-04 a table that does not answer behind the extension is 503 backend_unavailable with Retry-After, and nothing is sent', async () => {
    const q = await createQueue('table-down');
    let down = false;
    // The Host's table refuses connections (as while DynamoDB restarts); the SDK has retried.
    host.dynamodb.middlewareStack.add(
      (next) => async (args) => {
        if (down)
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8000'), { code: 'ECONNREFUSED' });
        return next(args);
      },
      { step: 'initialize', name: 'tableDown' },
    );
    try {
      const before = sentBatches.length;
      down = true;
      const res = await post(q.uid, { messages: [{ body: 'QUJD' }, { body: 'REVG' }] });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('backend_unavailable');
      expect(res.headers['retry-after']).toBe('2');
      expect(JSON.stringify(res.body)).not.toContain('ECONNREFUSED'); // no internals in the answer
      expect(sentBatches.length).toBe(before);
      down = false;
      expect((await post(q.uid, { messages: [{ body: 'QUJD' }] })).status).toBe(200);
    } finally {
      down = false;
      host.dynamodb.middlewareStack.remove('tableDown');
    }
  });

  it('AQ-04 DL-10 the TypeScript producer client sends to the same queue with the binding semantics', async () => {
    const q = await createQueue('client');
    const client = createQueueProducerClient({
      sqs: host.sqs,
      dynamodb: host.dynamodb,
      tableName: host.tableName,
      queueUrl: q.url,
      retentionSeconds: 3600,
    });
    const binary = new Uint8Array(randomBytes(127_000));
    const id1 = await client.send('héllo ✓');
    const id2 = await client.send(binary, { delaySeconds: 0 });
    const batchIds = await client.sendBatch([
      { body: new TextEncoder().encode('one') },
      { body: new DataView(binary.buffer, binary.byteOffset + 10, 5) },
      { body: 'three' },
    ]);
    expect(batchIds).toHaveLength(3);
    const received = await drain(q.url, 5);
    const byId = new Map(received.map((e) => [e.id, e]));
    expect(new TextDecoder().decode(byId.get(id1)?.body)).toBe('héllo ✓');
    expect(Buffer.from(byId.get(id2)?.body ?? []).equals(Buffer.from(binary))).toBe(true);
    expect(new TextDecoder().decode(byId.get(batchIds[0] as string)?.body)).toBe('one');
    expect([...(byId.get(batchIds[1] as string)?.body ?? [])]).toEqual([...binary.subarray(10, 15)]);
    expect(new TextDecoder().decode(byId.get(batchIds[2] as string)?.body)).toBe('three');
    const commit = byId.get(batchIds[0] as string)?.commit;
    expect(commit).toBeDefined();
    expect(batchIds.map((id) => byId.get(id)?.commit)).toEqual([commit, commit, commit]);
    expect(await host.commits.committed([commit as string])).toEqual(new Set([commit]));
    // Its sends wake no lane: each says so, and lanes watch the queue for them instead.
    expect(received.every((e) => e.unannounced === true)).toBe(true);

    // The same rules and rejection names as a Worker binding.
    const name = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (e: Error) => e.name,
      );
    expect(await name(client.send(new Uint8Array(127_001)))).toBe('message_too_large');
    expect(await name(client.send(42 as never))).toBe('invalid_body');
    expect(await name(client.sendBatch(Array.from({ length: 101 }, () => ({ body: 'x' }))))).toBe(
      'batch_too_large',
    );
    expect(await name(client.sendBatch([]))).toBe('TypeError');
    expect(await name(client.send('x', { delaySeconds: 43_201 }))).toBe('TypeError');
    expect(() =>
      createQueueProducerClient({
        sqs: host.sqs,
        dynamodb: host.dynamodb,
        tableName: host.tableName,
        queueUrl: q.url,
        defaultDelaySeconds: 43_201,
      }),
    ).toThrow(TypeError);
  });
});
