import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoObservedStore } from '../../../lambdas/adapters/aws/dynamodb-observed-store.ts';
import { ResourceObserver } from '../../../lambdas/engine/resource-observer.ts';
import type { Periodic } from '../../../lambdas/local/periodic.ts';
import { localResourceRefresh } from '../../../lambdas/local/resource-refresh.ts';
import { createTestHost, type TestHost } from '../../support/host-harness.ts';
import {
  consumerSpec,
  createConsumer,
  createQueue,
  createWorker,
  getResource,
  SPACE,
  update,
} from '../forms/consumer-support.ts';

/**
 * The background refresh of `observed` (issue 14, Deliver 5) over DynamoDB Local and the SQS
 * stand-in: live counts and consumer facts appear in a GET within one period, with no write to
 * the Resource through the API and never over an Operation under way.
 */
const PERIOD_MS = 1_000;

describe('observed is refreshed in the background', () => {
  let host: TestHost;
  let queue: string;
  let worker: string;
  let consumer: string;
  let refresh: Periodic | undefined;

  const get = async (uid: string) => {
    const r = await getResource(host, uid);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  };
  const send = async (uid: string, n: number) => {
    const messages = Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`m${i}`).toString('base64') }));
    const r = await host.request({
      method: 'POST',
      path: `/ext/queues/v1/queues/${uid}/messages`,
      body: { messages },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  /** Polls a GET until `ok` holds; returns it and how long it took. */
  const until = async (uid: string, ok: (body: any) => boolean, withinMs: number) => {
    const started = Date.now();
    for (;;) {
      const body = await get(uid);
      if (ok(body)) return { body, tookMs: Date.now() - started };
      if (Date.now() - started > withinMs)
        throw new Error(`not within ${withinMs} ms: ${JSON.stringify(body)}`);
      await sleep(100);
    }
  };

  beforeAll(async () => {
    host = await createTestHost();
    queue = await createQueue(host, 'orders');
    const other = await createQueue(host, 'invoices');
    worker = await createWorker(host, 'echo');
    await host.settle();
    // The consumer reads `invoices`, so `orders` keeps what is sent to it (no lanes run here anyway).
    consumer = (await createConsumer(host, 'invoices-consumer', consumerSpec(other, worker))).body
      .resourceUid;
    await host.settle();
  });

  afterAll(async () => {
    await refresh?.stop();
  });

  it('3 messages sent show messageCount 3 in a GET within one period, no Operation or generation added (AQ-03, HA-15)', async () => {
    const before = await get(queue);
    expect(before.observed).toEqual({ queueExists: true, messageCount: 0 });
    await send(queue, 3);
    // A GET alone never looks: without the refresh the count stays as the last Operation saw it.
    await sleep(300);
    expect((await get(queue)).observed.messageCount).toBe(0);

    refresh = localResourceRefresh(host.observer, PERIOD_MS);
    refresh.start();
    const { body, tookMs } = await until(queue, (b) => b.observed.messageCount === 3, PERIOD_MS + 2_000);
    expect(tookMs).toBeLessThan(PERIOD_MS + 2_000);
    expect(body.observed).toEqual({ queueExists: true, messageCount: 3 });
    expect(Date.parse(body.observedAt)).toBeGreaterThan(Date.parse(before.observedAt));
    // Only observed and observedAt moved: same generation, same last Operation, still idle.
    expect(body).toMatchObject({
      generation: before.generation,
      observedGeneration: before.observedGeneration,
      lastOperation: before.lastOperation,
      phase: 'idle',
      spec: before.spec,
    });
  });

  it("a worker whose code goes away flips the consumer's workerExists to false; its return flips it back (QC-09)", async () => {
    const attached = await until(consumer, (b) => b.observed.workerExists === true, PERIOD_MS + 2_000);
    expect(attached.body.observed).toEqual({ consumerAttached: true, queueExists: true, workerExists: true });
    const code = host.workers.code.get(`${SPACE}/echo`);
    host.workers.code.delete(`${SPACE}/echo`);
    const gone = await until(consumer, (b) => b.observed.workerExists === false, PERIOD_MS + 2_000);
    expect(gone.body.observed).toEqual({ consumerAttached: true, queueExists: true, workerExists: false });
    // The worker's own observed flips within a period too: a round refreshes Resources one by one,
    // in the store's order, so the worker's may come after the consumer's.
    const stale = await until(worker, (b) => b.observed.ready === false, PERIOD_MS + 2_000);
    expect(stale.body.observed).toMatchObject({ ready: false, activeDeploymentUid: null });
    if (code) host.workers.code.set(`${SPACE}/echo`, code);
    await until(consumer, (b) => b.observed.workerExists === true, PERIOD_MS + 2_000);
    expect(gone.body.generation).toBe(attached.body.generation);
  });

  it('never writes over an Operation under way: a pending update keeps its observed until the executor settles it (HA-15)', async () => {
    await refresh?.stop();
    const before = await get(queue);
    const accepted = await update(host, queue, before.generation, { messageRetentionSeconds: 7200 });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    await send(queue, 2);
    const round = await host.observer.observeOnce();
    expect(round.seen).toBeGreaterThanOrEqual(4);
    const pending = await get(queue);
    expect(pending.phase).toBe('pending');
    expect(pending.observed).toEqual(before.observed);
    expect(pending.observedAt).toBe(before.observedAt);
    await host.settle();
    expect((await get(queue)).observed).toEqual({ queueExists: true, messageCount: 5 });
  });

  it('a write for a generation that has moved on is refused (the refresh never races an Operation)', async () => {
    const store = new DynamoObservedStore(host.dynamodb, host.tableName);
    const now = await get(queue);
    const stale = await store.refreshObserved(
      queue,
      now.generation - 1,
      { queueExists: false },
      new Date().toISOString(),
    );
    expect(stale).toBe(false);
    expect((await get(queue)).observed).toEqual(now.observed);
  });

  it('bounded work per round: with 2 per round, 4 Resources are all looked at over 2 rounds, then it starts over', async () => {
    const observer = new ResourceObserver({
      store: new DynamoObservedStore(host.dynamodb, host.tableName),
      forms: host.forms,
      perRound: 2,
    });
    const rounds = [await observer.observeOnce(), await observer.observeOnce(), await observer.observeOnce()];
    expect(rounds.map((r) => r.seen)).toEqual([2, 2, 2]);
  });
});
