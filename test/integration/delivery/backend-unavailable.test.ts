/**
 * DL-08: when a settlement cannot be recorded the call rejects `backend_unavailable`, and its
 * outcome is treated as unknown — never as acknowledged, even if the handler then returns.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryService } from '../../../lambdas/delivery/delivery-service.ts';
import type { DeliveryStore } from '../../../lambdas/delivery/delivery-store.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { allEnded, attemptsById, batchHead, records, storeOf, waitDrained } from './delivery-kit.ts';

describe('DL-08 a settlement write that fails', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('DL-08 acknowledge rejects backend_unavailable when the store cannot write; the returning handler does not acknowledge it', async () => {
    const store = storeOf(d);
    const failing: string[] = [];
    // The store of this Host fails every settlement write of the first delivery (a DynamoDB
    // outage as the service sees it); the instance property shadows the class method.
    (store as { settle: DeliveryStore['settle'] }).settle = async (batchId) => {
      failing.push(batchId);
      throw new Error('injected: the table is unavailable');
    };
    try {
      const log = d.logFile('outage');
      const { queue } = await d.setup(
        'outage',
        recordingWorker(
          log,
          `const m = batch.messages[0];
          if (m.attempts === 1) {
            try { await batch.acknowledge(m.id); rec({ ev: 'call', name: 'resolved' }); }
            catch (e) { rec({ ev: 'call', name: e.name }); }
          }`,
        ),
        { maxRetries: 3, retryDelaySeconds: 0 },
      );
      const id = await d.host.producer.send(queue, 'unlucky');
      const first = await waitFor('the first delivery ended', () => {
        const e = records(log);
        return e.some((x) => x.ev === 'end') ? e : undefined;
      });
      expect(first.filter((e) => e.ev === 'call').map((e) => (e as { name?: string }).name)).toEqual([
        'backend_unavailable',
      ]);
      const batchId = first.find((e) => e.ev === 'start')?.batch as string;
      expect(failing).toEqual([batchId]);
      // The store is back: later settlements work again.
      delete (store as { settle?: unknown }).settle;

      await waitDrained(d, queue);
      const events = await waitFor('handlers ended', () => {
        const e = records(log);
        return allEnded(e) ? e : undefined;
      });
      // The handler returned normally, yet the message was not taken as acknowledged: it came back.
      expect(attemptsById(events).get(id)).toEqual([1, 2]);
      // Nothing was recorded for it, and the batch is marked as having an unknown settlement.
      const head = await batchHead(d, batchId);
      expect(head?.settled).toEqual({});
      expect(head?.doubtful).toBe(true);
    } finally {
      delete (store as { settle?: unknown }).settle;
    }
  });

  it('DL-08 a settlement call that fails before reaching the store (lost on the way) rejects backend_unavailable; the returning handler does not acknowledge it', async () => {
    const service = d.host.delivery as { settle: DeliveryService['settle'] };
    const failing: string[] = [];
    // The call to the Host fails on the way (on AWS: the Lambda invoke of the settle step): the
    // service never sees it, so nothing on the Host side can mark the batch.
    service.settle = async (batchId) => {
      failing.push(batchId);
      throw new Error('injected: the settle request was lost');
    };
    try {
      const log = d.logFile('lost');
      const { queue } = await d.setup(
        'lost',
        recordingWorker(
          log,
          `const m = batch.messages[0];
          if (m.attempts === 1) {
            try { await batch.retry(m.id); rec({ ev: 'call', name: 'resolved' }); }
            catch (e) { rec({ ev: 'call', name: e.name }); }
          }`,
        ),
        { maxRetries: 3, retryDelaySeconds: 0 },
      );
      const id = await d.host.producer.send(queue, 'lost call');
      const first = await waitFor('the first delivery ended', () => {
        const e = records(log);
        return e.some((x) => x.ev === 'end') ? e : undefined;
      });
      expect(first.filter((e) => e.ev === 'call').map((e) => (e as { name?: string }).name)).toEqual([
        'backend_unavailable',
      ]);
      expect(failing).toHaveLength(1);
      delete (service as { settle?: unknown }).settle;

      await waitDrained(d, queue);
      const events = await waitFor('handlers ended', () => {
        const e = records(log);
        return allEnded(e) ? e : undefined;
      });
      // The outcome of the lost retry is unknown: the normal return must not acknowledge it.
      expect(attemptsById(events).get(id)).toEqual([1, 2]);
    } finally {
      delete (service as { settle?: unknown }).settle;
    }
  });
});
