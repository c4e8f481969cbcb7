import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { deadLetterRecordKey } from '../../../lambdas/adapters/aws/dynamodb-dead-letter-records.ts';
import {
  createTestHost,
  type ParsedResponse,
  type TestHost,
  type TestPrincipal,
} from '../../support/host-harness.ts';
import {
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  expectProblem,
} from '../forms/consumer-support.ts';

/**
 * The operator endpoints under /ext/queues/v1 (issue 14) against DynamoDB Local and the SQS
 * stand-in: counts, a look that consumes nothing, redrive as new messages, purge, consumer state,
 * grants and bounded input (SEC-03), and /healthz.
 */
const token = (who: string) => `${who}-${randomBytes(24).toString('hex')}`;
const ALICE: TestPrincipal = { id: 'alice', token: token('alice'), spaces: { team: 'write' } };
/** Alice through a key that grants only `read`: she sees her queues but may not change them. */
const ALICE_READ: TestPrincipal = { id: 'alice', token: token('alice-ro'), spaces: { team: 'read' } };
const BOB: TestPrincipal = { id: 'bob', token: token('bob'), spaces: { team: 'write' } };

const EXT = '/ext/queues/v1';

describe('operator endpoints', () => {
  let host: TestHost;
  let source: string;
  let target: string;

  const call = (method: string, path: string, body?: unknown, as: TestPrincipal | null = ALICE, query = '') =>
    host.request({ method, path: `${EXT}${path}`, body, as, query });
  const stats = async (uid: string) => {
    const r = await call('GET', `/queues/${uid}/stats`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  };
  const send = async (uid: string, texts: string[]): Promise<string[]> => {
    const messages = texts.map((t) => ({ body: Buffer.from(t).toString('base64') }));
    const r = await call('POST', `/queues/${uid}/messages`, { messages });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.messageIds;
  };
  const problem = (r: ParsedResponse, status: number, code: string) => expectProblem(r, status, code);

  beforeAll(async () => {
    host = await createTestHost({ principals: [ALICE, ALICE_READ, BOB] });
    source = await createQueue(host, 'orders-dlq', ALICE);
    target = await createQueue(host, 'orders', ALICE);
    await host.settle();
  });

  it('counts messages and the oldest age (OPS-04); peeks without consuming: ids, previews, counts unchanged', async () => {
    expect(await stats(source)).toMatchObject({ visible: 0, oldestAgeSeconds: null });
    const ids = await send(source, ['first', 'second', 'third']);
    await sleep(2_100);
    const counted = await stats(source);
    expect(counted.oldestAgeSeconds).toBeGreaterThanOrEqual(2);
    expect(counted.oldestAgeSeconds).toBeLessThan(30);
    expect(counted).toMatchObject({
      queueUid: source,
      name: 'orders-dlq',
      space: 'team',
      visible: 3,
      inFlight: 0,
      delayed: 0,
      consumerUid: null,
    });
    const peek = await call('POST', `/queues/${source}/peek`, { limit: 10 });
    expect(peek.status, JSON.stringify(peek.body)).toBe(200);
    const seen = peek.body.messages;
    expect(seen.map((m: { id: string }) => m.id).sort()).toEqual([...ids].sort());
    expect(seen.map((m: { preview: string }) => m.preview).sort()).toEqual(['first', 'second', 'third']);
    for (const m of seen) {
      expect(m).toMatchObject({ committed: true, deadLetter: null });
      expect(m.sizeBytes).toBe(m.preview.length);
      expect(Math.abs(m.timestampMillis - Date.now())).toBeLessThan(60_000);
    }
    // Given back at once: all three are visible again, nothing deleted.
    expect(await stats(source)).toMatchObject({ visible: 3, inFlight: 0 });
    const again = await call('POST', `/queues/${source}/peek`, { limit: 2 });
    expect(again.body.messages).toHaveLength(2);
  });

  it("shows the Host's dead-letter record of a moved message when the table holds one", async () => {
    const [id] = await send(source, ['moved-here']);
    const record = {
      sourceQueueUid: target,
      sourceQueueName: 'orders',
      originalId: 'm-original-1',
      attempts: 4,
      lastOutcome: 'threw',
      movedAt: 1_700_000_000_000,
    };
    // Written as the dead-letter move records it (key and fields of dynamodb-dead-letter-records.ts).
    await host.dynamodb.send(
      new PutItemCommand({
        TableName: host.tableName,
        Item: marshall({ ...deadLetterRecordKey(source, id as string), ...record }),
      }),
    );
    const peek = await call('POST', `/queues/${source}/peek`, { limit: 10 });
    const byId = new Map(peek.body.messages.map((m: { id: string }) => [m.id, m]));
    expect(byId.get(id)).toMatchObject({ preview: 'moved-here', deadLetter: record });
  });

  it('redrives as new messages (copy, then delete), then purges', async () => {
    const before = await call('POST', `/queues/${source}/peek`, { limit: 50 });
    const originals = before.body.messages.map((m: { id: string }) => m.id);
    expect(originals).toHaveLength(4);
    const r = await call('POST', `/queues/${source}/redrive`, { to: target, limit: 3 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ moved: 3, skipped: 0 });
    expect(await stats(source)).toMatchObject({ visible: 1, inFlight: 0 });
    expect(await stats(target)).toMatchObject({ visible: 3 });
    const rest = await call('POST', `/queues/${source}/redrive`, { to: target });
    expect(rest.body).toMatchObject({ moved: 1 });
    const moved = await call('POST', `/queues/${target}/peek`, { limit: 50 });
    const copies = moved.body.messages;
    expect(copies.map((m: { preview: string }) => m.preview).sort()).toEqual(
      ['first', 'moved-here', 'second', 'third'].sort(),
    );
    // New messages: new ids, none of the originals'.
    expect(copies.map((m: { id: string }) => m.id).sort()).toEqual(
      [...r.body.messageIds, ...rest.body.messageIds].sort(),
    );
    for (const m of copies) expect(originals).not.toContain(m.id);

    const purge = await call('POST', `/queues/${target}/purge`);
    expect(purge.status, JSON.stringify(purge.body)).toBe(200);
    expect(await stats(target)).toMatchObject({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('moves and deletes chosen messages by id, leaving the rest; peeks dead letters by source queue and last outcome (SEC-03 bounds)', async () => {
    const dlq = await createQueue(host, 'chosen-dlq', ALICE);
    const back = await createQueue(host, 'chosen-back', ALICE);
    await host.settle();
    const [poison, mateA, mateB] = await send(dlq, ['poison', 'mate-a', 'mate-b']);
    // The batch-mates were moved from `orders` after a throw; the poison message failed on its own.
    const record = (id: string, lastOutcome: string, sourceQueueName: string) =>
      host.dynamodb.send(
        new PutItemCommand({
          TableName: host.tableName,
          Item: marshall({
            ...deadLetterRecordKey(dlq, id),
            sourceQueueUid: `r-${sourceQueueName}`,
            sourceQueueName,
            originalId: `m-${id}`,
            attempts: 1,
            lastOutcome,
            movedAt: 1_700_000_000_000,
          }),
        }),
      );
    await record(poison as string, 'threw', 'orders');
    await record(mateA as string, 'threw/retry', 'orders');
    await record(mateB as string, 'abandoned', 'payments');
    const peekIds = async (body: Record<string, unknown>) => {
      const r = await call('POST', `/queues/${dlq}/peek`, body);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.messages.map((m: { id: string }) => m.id).sort();
    };
    expect(await peekIds({ sourceQueue: 'orders' })).toEqual([poison, mateA].sort());
    expect(await peekIds({ sourceQueue: 'r-payments' })).toEqual([mateB]);
    expect(await peekIds({ lastOutcome: 'threw' })).toEqual([poison, mateA].sort());
    expect(await peekIds({ lastOutcome: 'threw/retry' })).toEqual([mateA]);
    expect(await peekIds({ sourceQueue: 'orders', lastOutcome: 'abandoned' })).toEqual([]);

    // Redrive just the batch-mates: the poison message stays where it is.
    const moved = await call('POST', `/queues/${dlq}/redrive`, {
      to: back,
      messageIds: [mateA, mateB, 'm-nope'],
    });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body).toMatchObject({ moved: 2, skipped: 0, notFound: ['m-nope'] });
    expect(await peekIds({})).toEqual([poison]);
    expect((await stats(back)).visible).toBe(2);
    // Delete just the poison message; a chosen delete is no PurgeQueue, so it is not rate-limited.
    const deleted = await call('POST', `/queues/${dlq}/purge`, { messageIds: [poison] });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body).toEqual({ purged: false, deleted: [poison], notFound: [] });
    expect(await stats(dlq)).toMatchObject({ visible: 0, inFlight: 0 });
    expect((await call('POST', `/queues/${back}/purge`, { messageIds: ['m-gone'] })).body).toEqual({
      purged: false,
      deleted: [],
      notFound: ['m-gone'],
    });
    expect(await stats(back)).toMatchObject({ visible: 2, inFlight: 0 });

    for (const body of [
      { to: back, messageIds: [] },
      { to: back, messageIds: ['x'.repeat(257)] },
      { to: back, messageIds: Array.from({ length: 101 }, (_, i) => `m${i}`) },
      { to: back, messageIds: ['a'], limit: 1 },
      { to: back, messageIds: 'a' },
    ]) {
      problem(await call('POST', `/queues/${dlq}/redrive`, body), 400, 'invalid_request');
    }
    for (const body of [{ messageIds: [] }, { messageIds: [1] }]) {
      problem(await call('POST', `/queues/${dlq}/purge`, body), 400, 'invalid_request');
    }
    for (const body of [
      { sourceQueue: 'not a name' },
      { lastOutcome: '' },
      { lastOutcome: 'x'.repeat(65) },
    ]) {
      problem(await call('POST', `/queues/${dlq}/peek`, body), 400, 'invalid_request');
    }
  });

  it('refuses a second purge of a queue within 60 s with 429 rate_limited and Retry-After, as SQS does', async () => {
    const q = await createQueue(host, 'purged-twice', ALICE);
    await host.settle();
    await send(q, ['one']);
    expect((await call('POST', `/queues/${q}/purge`)).status).toBe(200);
    await send(q, ['two']);
    const again = await call('POST', `/queues/${q}/purge`);
    problem(again, 429, 'rate_limited');
    expect(again.headers['retry-after']).toBe('60');
    // Refused, so nothing was deleted; another queue is not limited by this one's purge.
    expect(await stats(q)).toMatchObject({ visible: 1 });
    expect((await call('POST', `/queues/${source}/purge`)).status).toBe(200);
  });

  it('refuses a redrive from a queue with a consumer (409) and reports the consumer state', async () => {
    const worker = await createWorker(host, 'printer', ['queue'], ALICE);
    await host.settle();
    const c = await createConsumer(
      host,
      'orders-printer',
      consumerSpec(target, worker, { maxConcurrency: 3 }),
      {
        as: ALICE,
      },
    );
    expect(c.status, JSON.stringify(c.body)).toBe(202);
    await host.settle();
    const consumerUid = c.body.resourceUid;
    problem(await call('POST', `/queues/${target}/redrive`, { to: source }), 409, 'dependency_conflict');
    expect(await stats(target)).toMatchObject({ consumerUid });
    const state = await call('GET', `/consumers/${consumerUid}/state`);
    expect(state.status, JSON.stringify(state.body)).toBe(200);
    expect(state.body).toEqual({
      consumerUid,
      state: 'active',
      generation: 1,
      settings: {
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 5,
        maxConcurrency: 3,
        maxRetries: 3,
        retryDelaySeconds: 30,
      },
      slotsHeld: 0,
      runningBatches: 0,
      maxConcurrency: 3,
      batches: [],
      // No batch has finished yet (recent-batches.test.ts fills these).
      recentBatches: [],
      lastHandlerError: null,
    });
    // A queue is not a consumer.
    problem(await call('GET', `/consumers/${target}/state`), 404, 'not_found');
  });

  it('history: a Host that keeps none says so; reading it needs the read grant on the queue', async () => {
    const r = await call('GET', `/queues/${source}/history`, undefined, ALICE_READ);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ available: false, intervalSeconds: null, windowSeconds: 3600, samples: [] });
    problem(await call('GET', `/queues/${source}/history`, undefined, BOB), 404, 'not_found');
    problem(await call('POST', `/queues/${source}/history`), 405, 'method_not_allowed');
    problem(await call('GET', `/queues/${source}/history`, undefined, ALICE, 'x=1'), 400, 'invalid_request');
  });

  it('needs the read grant to look and the write grant to change; others see nothing (404)', async () => {
    expect((await call('GET', `/queues/${source}/stats`, undefined, ALICE_READ)).status).toBe(200);
    expect((await call('POST', `/queues/${source}/peek`, {}, ALICE_READ)).status).toBe(200);
    problem(await call('POST', `/queues/${source}/purge`, undefined, ALICE_READ), 403, 'forbidden');
    problem(await call('POST', `/queues/${source}/redrive`, { to: target }, ALICE_READ), 403, 'forbidden');
    problem(await call('GET', `/queues/${source}/stats`, undefined, BOB), 404, 'not_found');
    problem(await call('POST', `/queues/${source}/purge`, undefined, BOB), 404, 'not_found');
    problem(await call('GET', `/queues/${source}/stats`, undefined, null), 401, 'unauthenticated');
    const me = await call('GET', '/me', undefined, ALICE_READ);
    expect(me.body).toEqual({ principal: 'alice', spaces: { team: 'read' } });
  });

  it('validates every input (SEC-03): bounds, unknown fields, methods, queries, ids', async () => {
    for (const body of [{ limit: 0 }, { limit: 51 }, { limit: 2.5 }, { limit: '5' }, { max: 1 }, []]) {
      problem(await call('POST', `/queues/${source}/peek`, body), 400, 'invalid_request');
    }
    for (const body of [{}, { to: 'not a uid' }, { to: target, limit: 101 }, { to: target, extra: 1 }]) {
      problem(await call('POST', `/queues/${source}/redrive`, body), 400, 'invalid_request');
    }
    problem(await call('POST', `/queues/${source}/redrive`, { to: source }), 400, 'invalid_request');
    problem(await call('POST', `/queues/${source}/redrive`, { to: 'q-no-such-queue' }), 404, 'not_found');
    problem(await call('POST', `/queues/${source}/purge`, { all: true }), 400, 'invalid_request');
    problem(await call('GET', `/queues/${source}/peek`), 405, 'method_not_allowed');
    problem(await call('GET', `/queues/${source}/stats`, undefined, ALICE, 'x=1'), 400, 'invalid_request');
    problem(await call('GET', `/queues/${'x'.repeat(300)}/stats`), 404, 'not_found');
    problem(await call('GET', '/queues/%ZZ/stats'), 404, 'not_found');
    const raw = await host.request({
      method: 'POST',
      path: `${EXT}/queues/${source}/peek`,
      as: ALICE,
      headers: { 'content-type': 'application/json' },
      rawBody: '{"limit":1,"limit":2}',
    });
    problem(raw, 400, 'invalid_request');
  });

  it('GET /healthz answers without credentials while the table answers', async () => {
    const r = await host.request({ method: 'GET', path: '/healthz', as: null });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ok' });
    problem(await host.request({ method: 'POST', path: '/healthz', as: null }), 405, 'method_not_allowed');
  });
});
