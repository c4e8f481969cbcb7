/**
 * Step Functions' StartExecution quota (TAKOFORM_PHYSICS's model): lane starts share a token
 * bucket per kind of state machine, and a start without a token fails with ThrottlingException
 * after the SDK's retries. A retry storm with a delay wakes lanes for the second its messages
 * return, hands lanes over and starts cohorts; here the bucket is far smaller than any account's,
 * so those starts are refused again and again. Nothing may be lost for it: the supervisor and the
 * lanes already running deliver every message exactly 1 + maxRetries times (DL-07), and no lane
 * runs past maxConcurrency (DL-02).
 */
import { describe, expect, it } from 'vitest';
import { StartExecutionBudget } from '../../../lambdas/local/physics/start-execution-budget.ts';
import {
  createDeliveryHost,
  peakConcurrency,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { consumerOn } from './delivery-kit.ts';

describe('lane starts under a spent StartExecution quota', { timeout: 180_000 }, () => {
  it('a retry storm with a delay still delivers every message exactly 1 + maxRetries times (DL-07, DL-02)', async () => {
    // An account of one start every two seconds per kind, after a burst of two.
    const budget = new StartExecutionBudget({
      standard: { bucket: 2, perSecond: 0.5 },
      express: { bucket: 2, perSecond: 0.5 },
    });
    const d = await createDeliveryHost({ workerTimeoutMs: 20_000 });
    try {
      d.startDispatcher({ startBudget: budget });
      const queue = await d.createQueue('team', 'quota-q');
      const ids = await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 40 }, (_, i) => ({ body: `m${i}` })),
      );
      const log = d.logFile('quota');
      await consumerOn(d, 'quota', queue, recordingWorker(log, "throw new Error('storm');"), {
        maxBatchSize: 2,
        maxConcurrency: 4,
        maxRetries: 2,
        retryDelaySeconds: 1,
      });
      const deliveries = () => {
        const byId = new Map<string, number>();
        for (const e of readEvents(log))
          if (e.ev === 'msg') byId.set(e.id as string, (byId.get(e.id as string) ?? 0) + 1);
        return byId;
      };
      await waitFor(
        'every message delivered 1 + maxRetries times',
        () => {
          const byId = deliveries();
          return ids.every((id) => (byId.get(id) ?? 0) >= 3);
        },
        150_000,
      );
      // A second look after the last deliveries: none is delivered a fourth time.
      await new Promise((r) => setTimeout(r, 3_000));
      const byId = deliveries();
      expect(ids.filter((id) => byId.get(id) !== 3)).toEqual([]);
      const stats = budget.stats();
      process.stdout.write(`[start-quota] ${JSON.stringify(stats)}\n`);
      // The quota was met: starts were refused, some on every try.
      expect(stats.throttled.standard + stats.throttled.express).toBeGreaterThan(0);
      expect(peakConcurrency(readEvents(log))).toBeLessThanOrEqual(4);
    } finally {
      await d.close();
    }
  });
});
