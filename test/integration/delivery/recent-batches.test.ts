/**
 * Consumer state's recent batches (issue 14, Deliver 2): each finished batch is recorded once,
 * after its slot is freed, with its outcome, what it settled, its attempts and its duration, and
 * `GET /ext/queues/v1/consumers/{uid}/state` lists the newest 20, newest first (OPS-04).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoRecentBatches } from '../../../lambdas/adapters/aws/dynamodb-recent-batches.ts';
import type { RecentBatch } from '../../../lambdas/operator/recent-batches.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { allEnded, records } from './delivery-kit.ts';

/** Acknowledges the first message, retries the second in 10 min, then throws: the rest is retried. */
const MIXED = `
  const [first, second] = batch.messages;
  if (first) await batch.acknowledge(first.id);
  if (second) await batch.retry(second.id, 600);
  throw new Error('the rest fails');`;

describe('recent batches in consumer state', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  const state = async (uid: string) => {
    const r = await d.host.request({ path: `/ext/queues/v1/consumers/${uid}/state` });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { recentBatches: RecentBatch[] };
  };

  it('OPS-04 lists each finished batch with outcome, settlements, attempts, duration and the handler error (never its stack), newest first, at most 20', async () => {
    const log = d.logFile('mixed');
    const { queue, consumerUid } = await d.setup('mixed', recordingWorker(log, MIXED), {
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 1,
      maxRetries: 3,
    });
    await d.host.producer.sendBatch(queue, [{ body: 'a' }, { body: 'b' }, { body: 'c' }]);
    // The third message comes back (attempt 2) alone and is acknowledged there.
    await waitFor('two batches ended', () => {
      const e = records(log);
      return e.filter((x) => x.ev === 'end').length >= 2 && allEnded(e) ? e : undefined;
    });
    const listed = await waitFor('two recorded', async () => {
      const s = await state(consumerUid);
      return s.recentBatches.length >= 2 ? s.recentBatches : undefined;
    });
    const starts = records(log).filter((x) => x.ev === 'start');
    const [firstBatch, secondBatch] = starts.map((x) => x.batch);
    const byId = new Map(listed.map((b) => [b.batchId, b]));
    expect(byId.get(firstBatch as string)).toMatchObject({
      outcome: 'threw',
      finalizedBy: 'live',
      messages: 3,
      acknowledged: 1,
      retried: 2,
      exhausted: 0,
      attempts: { min: 1, max: 1 },
      error: { name: 'Error', message: 'the rest fails' },
    });
    expect(byId.get(secondBatch as string)).toMatchObject({
      outcome: 'threw',
      messages: 1,
      acknowledged: 1,
      retried: 0,
      attempts: { min: 2, max: 2 },
    });
    // The newest error, name and message only: the stack stays in the worker's log.
    const s = await state(consumerUid);
    expect(s).toMatchObject({
      lastHandlerError: { name: 'Error', message: 'the rest fails', batchId: listed[0]?.batchId },
    });
    expect(JSON.stringify(s)).not.toMatch(/\n\s+at |\.mjs:\d+|stack/);
    for (const b of listed) {
      expect(b.durationMs).toBeGreaterThanOrEqual(0);
      expect(b.durationMs).toBeLessThan(30_000);
    }
    expect(listed.map((b) => b.endedAt)).toEqual([...listed.map((b) => b.endedAt)].sort((x, y) => y - x));

    // Older history beyond 20 is not shown: 25 older entries, and still only the newest 20.
    const store = new DynamoRecentBatches(d.host.dynamodb, d.host.tableName);
    const oldest = Math.min(...listed.map((b) => b.endedAt));
    for (let i = 0; i < 25; i++) {
      await store.record(consumerUid, {
        ...(listed[0] as RecentBatch),
        batchId: `old-${i}`,
        endedAt: oldest - 1000 - i,
      });
    }
    const bounded = (await state(consumerUid)).recentBatches;
    expect(bounded).toHaveLength(20);
    expect(bounded.slice(0, listed.length).map((b) => b.batchId)).toEqual(listed.map((b) => b.batchId));
    expect(bounded.at(-1)?.batchId).toBe(`old-${20 - listed.length - 1}`);
  });
});
