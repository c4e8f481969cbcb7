/**
 * Consumer state's recent batches (issue 14, Deliver 2): each closed batch is listed once, with
 * its outcome, what it settled, its attempts and its duration, and
 * `GET /ext/queues/v1/consumers/{uid}/state` lists the newest 20, newest first (OPS-04). The list
 * is the batch heads in the table's recent index: a batch costs no write of its own (issue 13).
 */
import { GetItemCommand, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RECENT_SHARDS,
  recentPartition,
  recentPartitions,
} from '../../../lambdas/adapters/aws/delivery-store/recent-batches.ts';
import { DynamoDeliveryStore, deliveryKeys } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { RECENT_BATCHES_KEPT_MS, type RecentBatch } from '../../../lambdas/operator/recent-batches.ts';
import { TABLE_KEYS, timeOrderedKey } from '../../../lambdas/shared/table-schema.ts';
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

    // No item of its own per batch: nothing was written under the consumer's own partition.
    const own = await d.host.dynamodb.send(
      new QueryCommand({
        TableName: d.host.tableName,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': TABLE_KEYS.pk },
        ExpressionAttributeValues: marshall({ ':pk': `RECENT#${consumerUid}` }),
      }),
    );
    expect(own.Items ?? []).toEqual([]);

    // Older history beyond 20 is not shown: 25 older closed heads (copies of a real one), and
    // still only the newest 20; one closed more than a day ago is not shown at all.
    const real = await d.host.dynamodb.send(
      new GetItemCommand({
        TableName: d.host.tableName,
        Key: marshall(deliveryKeys.head(listed[0]?.batchId as string)),
      }),
    );
    const template = unmarshall(real.Item ?? {});
    // One of the consumer's index shards, by the batch id: closes spread over partitions.
    expect(template[TABLE_KEYS.gsi1.pk]).toBe(recentPartition(consumerUid, listed[0]?.batchId as string));
    expect(template[TABLE_KEYS.gsi1.pk]).toMatch(
      new RegExp(`^RECENT#${consumerUid}#[0-${RECENT_SHARDS - 1}]$`),
    );
    const oldest = Math.min(...listed.map((b) => b.endedAt));
    // Half the copies in the consumer's shards, half in the single partition heads had before
    // the shards: the listing merges them all, newest first.
    const copy = async (batchId: string, closedAt: number, consumer = consumerUid, legacy = false) =>
      d.host.dynamodb.send(
        new PutItemCommand({
          TableName: d.host.tableName,
          Item: marshall({
            ...template,
            ...deliveryKeys.head(batchId),
            batchId,
            closedAt,
            [TABLE_KEYS.gsi1.pk]: legacy ? `RECENT#${consumer}` : recentPartition(consumer, batchId),
            [TABLE_KEYS.gsi1.sk]: timeOrderedKey(closedAt, batchId),
          }),
        }),
      );
    for (let i = 0; i < 25; i++) await copy(`old-${i}`, oldest - 1000 - i, consumerUid, i % 2 === 1);
    const bounded = (await state(consumerUid)).recentBatches;
    expect(bounded).toHaveLength(20);
    expect(bounded.slice(0, listed.length).map((b) => b.batchId)).toEqual(listed.map((b) => b.batchId));
    expect(bounded.at(-1)?.batchId).toBe(`old-${20 - listed.length - 1}`);
    expect(bounded.at(-1)).toMatchObject({
      outcome: listed[0]?.outcome,
      endedAt: oldest - 1000 - (20 - listed.length - 1),
    });

    // A day after its close a batch is no longer listed (the heads themselves stay a week).
    const store = new DynamoDeliveryStore(d.host.dynamodb, d.host.tableName);
    const other = `other-${consumerUid}`;
    await copy('old-day', Date.now() - 25 * 3600 * 1000, other);
    expect(await store.recentlyClosed(other, 20, Date.now() - RECENT_BATCHES_KEPT_MS)).toEqual([]);
    expect((await store.recentlyClosed(other, 20, 0)).map((h) => h.batchId)).toEqual(['old-day']);
  });

  it('OPS-04 a consumer’s closed batches spread over its index shards by batch id', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 800; i++) {
      const pk = recentPartition('c', `b${i}`);
      counts.set(pk, (counts.get(pk) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(recentPartitions('c').slice(0, RECENT_SHARDS).sort());
    // About 100 each; none of them takes more than twice its share.
    for (const [pk, n] of counts) expect(n, pk).toBeLessThan(200);
  });
});
