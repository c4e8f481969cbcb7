/**
 * On AWS every handler gets its worker's bound counted from its own start (DL-01, DL-09): the
 * runtime starts a lane's next batch in the same invocation only while all of it — gathering,
 * registration and the handler's whole bound — still ends before the invocation does. Driven
 * through the worker runtime's Lambda adapter and the real batch-host handler, against the AWS
 * composition over the stand-ins; the process exit after a cut-off is only recorded.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import type { BatchHostRequest } from '../../../lambdas/delivery/batch-host-protocol.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';

/** The handlers' bound (the Host's and so the slot's), and what each handler here needs of it. */
const HANDLER_BOUND_S = 6;
const HANDLER_NEEDS_MS = 5_000;
/** The invocation's time: room for one batch of this consumer, not for two. */
const LAMBDA_REMAINING_MS = 12_000;
const MARGIN_MS = 500;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('DL-01 DL-09: a handler’s bound counts from its own start', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost({ workerTimeoutSeconds: HANDLER_BOUND_S });
  });

  it('DL-01 DL-09: no batch starts that its handler’s whole bound would not fit; none is cut off for the invocation’s sake', async () => {
    // A 3 s batch timeout: a second batch would gather up to 3 s before its handler starts.
    const c = await t.setupConsumer('bound', {
      maxBatchSize: 2,
      maxConcurrency: 1,
      maxBatchTimeoutSeconds: 3,
    });
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'a' }, { body: 'b' }]);
    const outcomes: string[] = [];
    const exits: number[] = [];
    const module = {
      async queue(batch: { messages: readonly { id: string }[]; acknowledgeAll(): Promise<void> }) {
        await sleep(HANDLER_NEEDS_MS);
        // Another message arrives as the first handler ends: a next batch could gather it.
        if (outcomes.length === 0) await t.host.host.producer.send(c.queue, 'c');
        await batch.acknowledgeAll();
        outcomes.push(`returned:${batch.messages.length}`);
      },
    };
    const batchHost = createBatchHostHandler(t.host);
    const handler = createQueueWorkerHandler(
      module,
      {},
      {
        sqs: t.sqs,
        host: () =>
          remoteBatchHost(async (req: BatchHostRequest) => batchHost(JSON.parse(JSON.stringify(req)))),
        idleWaitSeconds: 1,
        marginMs: MARGIN_MS,
        exit: (code) => {
          exits.push(code);
        },
      },
    );
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid: c.consumerUid, generation: 1 })) as {
      slot: Slot;
    };
    const began = Date.now();
    const result = await handler(
      { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
      { getRemainingTimeInMillis: () => LAMBDA_REMAINING_MS - (Date.now() - began) },
    );
    // One batch ran whole; the next (idle wait + 3 s + room + 6 s) did not fit the 12 s left.
    expect(exits).toEqual([]);
    expect(outcomes).toEqual(['returned:2']);
    expect(result).toMatchObject({ delivered: 2, batches: 1 });
  });
});
