/**
 * The AWS delivery path under Lambda throttling (issue 12): the production dispatcher definition
 * under the local Step Functions stand-in with the 25,000-event history limit on, every Task
 * backed by the real Lambda entry (dispatcher step, worker runtime adapter, batch host), and lanes
 * started the way AWS starts them — StartExecution from the API's wake, the batch host's full
 * batches, the step function's hand-over and the supervisor — into the same stand-in. Worker and
 * step invocations throttle part of the time (`Lambda.TooManyRequestsException`, the function did
 * not run), as a busy account's do.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { superviseOnce } from '../../../lambdas/composition/aws-supervisor.ts';
import type { BatchHostRequest } from '../../../lambdas/delivery/batch-host-protocol.ts';
import { DISPATCHER_TASKS, dispatcherDefinition } from '../../../lambdas/delivery/dispatcher-definition.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import type { FaultConfig } from '../../../lambdas/local/faults/fault-config.ts';
import { withLambdaInvokeFaults } from '../../../lambdas/local/faults/invoke-faults.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';
import { waitFor } from '../../support/delivery-harness.ts';

const STEP_ARN = 'arn:aws:lambda:us-east-1:000000000000:function:dispatcher-step';
/** Throttles as the Step Functions Lambda integration reports them: half the worker invokes. */
const FAULTS: FaultConfig = {
  seed: 20261201,
  // The step function runs about once per lane round: a third of its invocations throttle, so
  // that a run of a few dozen rounds meets throttling many times.
  localInvoke: { functions: { worker: { tooManyRequests: 0.5 }, step: { tooManyRequests: 0.35 } } },
};

describe('lanes on the AWS path under Lambda throttling', () => {
  const machine = new LocalStateMachine(dispatcherDefinition({ stepFunction: STEP_ARN }));
  let t: AwsTestHost;
  const delivered = new Map<string, number>();
  let running = 0;
  let peakRunning = 0;
  const throttled = { worker: 0, step: 0 };
  let shared: ReturnType<typeof handlers> | undefined;

  beforeAll(async () => {
    // Step Functions as the Host's functions reach it: StartExecution runs a lane in the stand-in.
    const sfn = {
      send: async (command: { input: { name?: string; input?: string } }) => {
        const name = String(command.input.name);
        // One set of functions for every execution, as on AWS (and one seeded fault stream). A
        // name in use throws ExecutionAlreadyExists, as StartExecution does.
        shared ??= handlers();
        machine.start({ name, input: JSON.parse(String(command.input.input)), taskHandlers: shared });
        return { executionArn: `arn:aws:states:us-east-1:000000000000:execution:d:${name}` };
      },
    };
    t = await createAwsTestHost({ sfn, workerTimeoutSeconds: 30 });
  });
  afterAll(async () => {
    for (const e of machine.running()) e.abort();
  });

  const workerModule = {
    async queue(batch: { messages: { id: string }[]; acknowledge(id: string): Promise<void> }) {
      running++;
      peakRunning = Math.max(peakRunning, running);
      try {
        await new Promise((r) => setTimeout(r, 20));
        await Promise.all(
          batch.messages.map(async (m) => {
            delivered.set(m.id, (delivered.get(m.id) ?? 0) + 1);
            await batch.acknowledge(m.id);
          }),
        );
      } finally {
        running--;
      }
    },
  };

  function handlers() {
    const stepHandler = createDispatcherStepHandler(t.host);
    const batchHost = createBatchHostHandler(t.host);
    const worker = createQueueWorkerHandler(
      workerModule,
      {},
      {
        sqs: t.sqs,
        // Every call crosses a JSON boundary, as a Lambda invocation does.
        host: () =>
          remoteBatchHost(async (req: BatchHostRequest) => batchHost(JSON.parse(JSON.stringify(req)))),
        idleWaitSeconds: 1,
      },
    );
    const counting =
      (label: 'worker' | 'step', fn: (p: unknown) => Promise<unknown>) => async (payload: unknown) => {
        try {
          return await fn(payload);
        } catch (err) {
          if ((err as Error).name === 'Lambda.TooManyRequestsException') throttled[label]++;
          throw err;
        }
      };
    const step = counting(
      'step',
      withLambdaInvokeFaults((p: unknown) => stepHandler(p), 'step', FAULTS),
    );
    return {
      [DISPATCHER_TASKS.acquire]: step,
      [DISPATCHER_TASKS.recover]: step,
      [DISPATCHER_TASKS.handover]: step,
      [DISPATCHER_TASKS.invoke]: counting(
        'worker',
        withLambdaInvokeFaults(
          (p: unknown) => worker(p as never, { getRemainingTimeInMillis: () => 60_000 }),
          'worker',
          FAULTS,
        ),
      ),
    };
  }

  it('DL-02 DL-05: a sustained backlog with throttled invocations: nothing lost, never above maxConcurrency, no execution fails or nears the history limit, lanes scale from one', async () => {
    const maxConcurrency = 6;
    const c = await t.setupConsumer('throttled', { maxConcurrency, maxBatchSize: 5, maxRetries: 10 });
    const total = 500;
    const ids: string[] = [];
    // A stream through the Host with pauses longer than the lanes' idle wait (1 s): lanes drain
    // each part, end, and the next send wakes the consumer again, so that many worker
    // invocations (each throttled half of the time) carry the run, not a few long ones.
    for (let sent = 0; sent < total; sent += 50) {
      ids.push(
        ...(await t.host.host.producer.sendBatch(
          c.queue,
          Array.from({ length: 50 }, (_, i) => ({ body: `m${sent + i}` })),
        )),
      );
      await new Promise((r) => setTimeout(r, 1_500));
    }
    let peakSlots = 0;
    await waitFor(
      'every message delivered',
      async () => {
        peakSlots = Math.max(
          peakSlots,
          Object.keys(await t.host.host.delivery.slotsOf(c.consumerUid)).length,
        );
        // The supervisor's minute, as on AWS (it also restarts lanes a failure ended).
        if (delivered.size < total && machine.running().length === 0) await superviseOnce({ host: t.host });
        return ids.every((id) => delivered.has(id));
      },
      180_000,
    );
    await waitFor('every lane ended', () => machine.running().length === 0, 60_000);
    const attrs = await t.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: c.queue.sqsUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    const stats = machine.stats();
    console.info(
      `throttled: ${throttled.worker} worker and ${throttled.step} step invocations; ${stats.started} executions, ` +
        `largest history ${stats.maxHistoryEvents} events, ${stats.transitions} transitions; peak ${peakRunning} handlers`,
    );
    expect(throttled.worker).toBeGreaterThan(5);
    expect(throttled.step).toBeGreaterThan(5);
    expect(stats.failed).toBe(0);
    expect(stats.maxHistoryEvents).toBeLessThan(25_000);
    expect(stats.started).toBeGreaterThan(1);
    expect(peakSlots).toBeLessThanOrEqual(maxConcurrency);
    expect(peakRunning).toBeLessThanOrEqual(maxConcurrency);
    expect(peakRunning).toBeGreaterThan(1);
    expect(Number(attrs.Attributes?.ApproximateNumberOfMessages)).toBe(0);
    expect(Number(attrs.Attributes?.ApproximateNumberOfMessagesNotVisible)).toBe(0);
    expect(await t.host.host.delivery.slotsOf(c.consumerUid)).toEqual({});
  }, 300_000);
});
