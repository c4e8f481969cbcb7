/**
 * Lambda's account concurrency under TAKOFORM_PHYSICS's model, at k = 100 (an account of 10
 * concurrent executions). Each lane holds a worker invocation for as long as its queue has
 * messages, so one consumer whose maxConcurrency reaches the account's pool fills it with worker
 * invocations. The Host reserves concurrency for its own functions (`HOST_RESERVED_CONCURRENCY`,
 * the numbers the CDK deploys and the physics model takes by default): the workers then fill only
 * the unreserved rest, and the dispatcher's step invocations are never starved: a step is
 * refused only at its own reservation, never because workers took the pool.
 *
 * The second case is the control: the same load on a Host deployed without reservations
 * (`reserveConcurrency: false`, physics `lambda.reserved: {}`) starves the step function.
 */
import { describe, expect, it } from 'vitest';
import { LambdaConcurrency } from '../../../lambdas/local/physics/lambda-concurrency.ts';
import { parsePhysics } from '../../../lambdas/local/physics/physics-config.ts';
import { createDeliveryHost, recordingWorker, waitFor } from '../../support/delivery-harness.ts';
import { consumerOn, records } from './delivery-kit.ts';

const MESSAGES = 100;

async function fillThePool(physicsValue: string, until: (pool: LambdaConcurrency, log: string) => boolean) {
  const physics = parsePhysics(physicsValue);
  const pool = new LambdaConcurrency(physics.lambda, physics.scale);
  const d = await createDeliveryHost({ workerTimeoutMs: 20_000 });
  try {
    d.startDispatcher({ concurrency: pool });
    const queue = await d.createQueue('team', 'acct-q');
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: MESSAGES }, (_, i) => ({ body: `m${i}` })),
    );
    const log = d.logFile('acct');
    await consumerOn(
      d,
      'acct',
      queue,
      recordingWorker(log, 'await new Promise((r) => setTimeout(r, 200));'),
      {
        maxBatchSize: 1,
        maxConcurrency: 12,
      },
    );
    await waitFor('the pool filled as the test needs', () => until(pool, log), 60_000);
    const s = pool.stats();
    process.stdout.write(`[account-concurrency] ${JSON.stringify(s)}\n`);
    return s;
  } finally {
    await d.close();
  }
}

const deliveredAll = (log: string) =>
  new Set(records(log).flatMap((e) => (e.ev === 'msg' && e.id ? [e.id] : []))).size === MESSAGES;

describe('account concurrency under Lambda physics (k = 100)', () => {
  it('with the Host’s reserved concurrency, lanes fill only the unreserved pool and no step invocation is starved', async () => {
    const s = await fillThePool('100', (_pool, log) => deliveredAll(log));
    // Workers ran into the unreserved pool's edge (the load is real) ...
    expect(s.peak.worker).toBe(s.unreserved);
    expect(s.throttled.worker).toBeGreaterThan(0);
    // ... and the step function, on its own reservation, was never starved. At k = 100 that
    // reservation scales to one invocation, so lanes that start together may still meet its
    // own ceiling (the dispatcher's Retry takes those): never the workers' doing.
    expect(s.starved.step).toBe(0);
    expect(s.peak.step).toBeLessThanOrEqual(1);
    expect(s.peakTotal).toBeLessThanOrEqual(s.accountConcurrency);
  });

  it('control: without reservations the same lanes take the whole pool and step invocations are starved', async () => {
    const s = await fillThePool(
      '{"scale":100,"lambda":{"reserved":{}}}',
      (pool) => pool.stats().throttled.step > 0,
    );
    expect(s.unreserved).toBe(s.accountConcurrency);
    expect(s.starved.step).toBeGreaterThan(0);
  });
});
