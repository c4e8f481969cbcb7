/**
 * Lambda's account concurrency under TAKOFORM_PHYSICS's model, at k = 100 (an account of 10
 * concurrent executions): today no Host function has reserved concurrency and each lane holds a
 * worker invocation for as long as its queue has messages, so one consumer whose maxConcurrency
 * reaches the account's pool fills it with worker invocations, and the dispatcher's own step
 * invocations (the Host's functions) are refused with Lambda.TooManyRequestsException.
 *
 * This test DOCUMENTS THE CURRENT FAILURE: it passes while the step function is starved (it
 * asserts refusals of step invocations). Once the Host reserves concurrency for its own functions,
 * flip it to assert that no step invocation is refused (with `lambda.reserved` set as the Host
 * would deploy it).
 */
import { describe, expect, it } from 'vitest';
import { LambdaConcurrency } from '../../../lambdas/local/physics/lambda-concurrency.ts';
import { parsePhysics } from '../../../lambdas/local/physics/physics-config.ts';
import { createDeliveryHost, recordingWorker, waitFor } from '../../support/delivery-harness.ts';
import { consumerOn } from './delivery-kit.ts';

describe('account concurrency under Lambda physics (k = 100): today’s design, documented', () => {
  it('CURRENT FAILURE: lanes of one consumer fill the account’s pool and the Host’s step invocations are refused', async () => {
    const physics = parsePhysics('100');
    const pool = new LambdaConcurrency(physics.lambda, physics.scale);
    const d = await createDeliveryHost({ workerTimeoutMs: 20_000 });
    try {
      d.startDispatcher({ concurrency: pool });
      const queue = await d.createQueue('team', 'acct-q');
      await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 100 }, (_, i) => ({ body: `m${i}` })),
      );
      await consumerOn(
        d,
        'acct',
        queue,
        recordingWorker(d.logFile('acct'), 'await new Promise((r) => setTimeout(r, 200));'),
        { maxBatchSize: 1, maxConcurrency: 12 },
      );
      await waitFor('a step invocation refused', () => pool.stats().throttled.step > 0, 45_000);
      const s = pool.stats();
      process.stdout.write(`[account-concurrency] ${JSON.stringify(s)}\n`);
      // Today: worker invocations take the whole pool (10 at k = 100) and steps are refused.
      // After reserved concurrency for the Host's functions: expect(s.throttled.step).toBe(0).
      expect(s.peakTotal).toBeLessThanOrEqual(s.accountConcurrency);
      expect(s.throttled.step).toBeGreaterThan(0);
    } finally {
      await d.close();
    }
  });
});
