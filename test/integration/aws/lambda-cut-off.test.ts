/**
 * The worker runtime's Lambda adapter after a handler is cut off at its time bound (issue 11,
 * item 11): the cut-off handler is still running, so once its batch is finalised the adapter ends
 * the process instead of letting Lambda reuse the sandbox next to later batches (DL-02). Driven
 * against the AWS composition over DynamoDB Local and the SQS stand-in, with every worker → Host
 * call going through the real batch-host handler across a JSON boundary, and (last test) under
 * the dispatcher state machine run by aws-local-stepfunctions. Only the process exit is replaced
 * by a recorder, since a real exit would end the test worker.
 */
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it, vi } from 'vitest';

// Powertools logs of the entries stay quiet here; they are asserted on nowhere.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import type { BatchHostRequest } from '../../../lambdas/delivery/batch-host-protocol.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';
import {
  CUT_OFF_EXIT_CODE,
  createQueueWorkerHandler,
  RUNTIME_EXIT_ERROR,
} from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';
import { waitFor } from '../../support/delivery-harness.ts';

/** How long after its invocation starts a batch's handler is cut off in these tests. */
const CUT_OFF_AFTER_MS = 2_500;
/** The Lambda's remaining time: long, so neither it nor the lane's time budget ends a lane here. */
const LAMBDA_REMAINING_MS = 120_000;
/** A slot's deadline lies this long past its handler's bound (short here, so a kept slot ends soon). */
const SLOT_MARGIN_MS = 3_000;

interface QueueMessage {
  id: string;
  attempts: number;
}
interface Batch {
  messages: readonly QueueMessage[];
  acknowledgeAll(): Promise<void>;
}

/** Hangs forever on a first delivery, throws or acknowledges on later ones. */
function workerModule(seen: number[], onFirst: 'hang' | 'throw') {
  return {
    async queue(batch: Batch) {
      const attempts = batch.messages[0]?.attempts ?? 0;
      seen.push(attempts);
      if (attempts === 1 && onFirst === 'hang') await new Promise(() => {}); // never settles
      if (attempts === 1 && onFirst === 'throw') throw new Error('first delivery fails');
      await batch.acknowledgeAll();
    },
  };
}

describe('DL-02 RC-01: the Lambda adapter ends its sandbox after a cut-off', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost({ slotMarginMs: SLOT_MARGIN_MS });
  });

  /**
   * One InvokeWorker invocation of the adapter, as Lambda would run it, with the batch-host
   * handler behind every worker call. `calls` records each answered call (`action[:outcome]:ok`),
   * `exits` each call of the exit hook with the calls answered by then.
   */
  function invocation(
    module: unknown,
    slot: Slot,
    record: { calls: string[]; exits: { code: number; callsBefore: string[] }[]; logs: string[] },
  ) {
    const batchHost = createBatchHostHandler(t.host);
    const handler = createQueueWorkerHandler(
      module,
      {},
      {
        sqs: t.sqs,
        host: () =>
          remoteBatchHost(async (req: BatchHostRequest) => {
            const answer = await batchHost(JSON.parse(JSON.stringify(req)));
            // A finalisation that asks for the lane's next slot (the hand-over) is marked `+next`.
            const what =
              req.action === 'finalize' ? `finalize:${req.outcome}${req.next ? '+next' : ''}` : req.action;
            record.calls.push(`${what}:${answer.ok ? 'ok' : answer.error.name}`);
            return answer;
          }),
        idleWaitSeconds: 1,
        // The handler's bound is min(Lambda end, slot deadline) less this margin, and registration
        // sets the slot's deadline to the worker timeout + the slot margin from then: cut off soon after.
        marginMs: t.host.config.workerTimeoutSeconds * 1000 + SLOT_MARGIN_MS - CUT_OFF_AFTER_MS,
        log: (message, fields) => record.logs.push(JSON.stringify({ message, ...fields })),
        exit: (code) => {
          record.exits.push({ code, callsBefore: [...record.calls] });
        },
      },
    );
    return handler(
      { kind: 'takoform.queue-batch.v1', slot },
      { getRemainingTimeInMillis: () => LAMBDA_REMAINING_MS },
    );
  }

  const newRecord = () => ({
    calls: [] as string[],
    exits: [] as { code: number; callsBefore: string[] }[],
    logs: [] as string[],
  });

  async function acquire(consumerUid: string): Promise<Slot> {
    const step = createDispatcherStepHandler(t.host);
    const acquired = (await step({ action: 'acquire', consumerUid, generation: 1 })) as {
      status: string;
      slot: Slot;
    };
    expect(acquired.status).toBe('acquired');
    return acquired.slot;
  }

  async function queueIsEmpty(sqsUrl: string) {
    const left = await t.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
    );
    return (left.Messages ?? []).length === 0;
  }

  it('DL-02 RC-01: a cut-off handler’s batch is finalised as abandoned, no further batch starts, then the process exits once; the retry is attempt 2', async () => {
    const c = await t.setupConsumer('cutoff');
    const [id] = await t.host.host.producer.sendBatch(c.queue, [{ body: 'slow' }]);
    const seen: number[] = [];
    const module = workerModule(seen, 'hang');
    const slot = await acquire(c.consumerUid);

    const first = newRecord();
    const began = Date.now();
    await expect(invocation(module, slot, first)).rejects.toMatchObject({ name: RUNTIME_EXIT_ERROR });
    expect(Date.now() - began).toBeGreaterThanOrEqual(CUT_OFF_AFTER_MS - 200);
    expect(seen).toEqual([1]);
    // Exactly once, and only after finalize had answered: no next slot, ever (neither an acquire
    // nor a hand-over by finalize).
    expect(first.exits).toEqual([
      { code: CUT_OFF_EXIT_CODE, callsBefore: ['register:ok', 'finalize:abandoned:ok'] },
    ]);
    expect(first.calls).toEqual(['register:ok', 'finalize:abandoned:ok']);
    expect(first.logs.some((l) => l.includes('ending the worker process after a cut-off'))).toBe(true);
    expect(first.logs.join('\n')).not.toContain(t.host.host.delivery.credentialOf(slot.batchId));

    // Finalised: closed as abandoned and applied; the message owes a retry. Its handler may still
    // run until the process ends, so its slot stays held until its deadline (DL-02).
    const head = await t.host.deliveryStore.getHead(slot.batchId);
    expect(head).toMatchObject({ closed: true, outcome: 'abandoned', applied: true });
    const held = await t.host.deliveryStore.slots(c.consumerUid);
    expect(Object.keys(held)).toEqual([slot.batchId]);
    const owed = await t.host.deliveryStore.getAttempts(c.queue.queueUid, [id!]);
    expect(owed.get(id!)).toMatchObject({ attempts: 1 });
    expect(owed.get(id!)?.acked).toBeUndefined();

    // What the dispatcher does after the failed InvokeWorker: RecoverBatch for that slot. The
    // batch was finalised already, so this changes nothing: the slot waits for its deadline.
    const step = createDispatcherStepHandler(t.host);
    await step({ action: 'recover', consumerUid: c.consumerUid, batchId: slot.batchId });
    expect(await t.host.deliveryStore.getHead(slot.batchId)).toEqual(head);
    expect(await t.host.deliveryStore.slots(c.consumerUid)).toEqual(held);
    const after = await t.host.deliveryStore.getAttempts(c.queue.queueUid, [id!]);
    expect(after.get(id!)).toEqual(owed.get(id!));

    // The next delivery (a new sandbox) is attempt 2; a handler that returns ends no process.
    const second = newRecord();
    const result = await invocation(module, await acquire(c.consumerUid), second);
    expect(seen).toEqual([1, 2]);
    expect(result).toEqual({ idle: true, delivered: 1, batches: 2 });
    expect(second.exits).toEqual([]);
    expect(second.calls).toEqual(['register:ok', 'settle:ok', 'finalize:returned+next:ok', 'register:ok']);
    expect(await queueIsEmpty(c.queue.sqsUrl)).toBe(true);
    // Only the cut-off batch's slot is left, until its deadline; then a recovery frees it.
    expect(await t.host.deliveryStore.slots(c.consumerUid)).toEqual(held);
    await waitFor('the kept slot’s deadline', async () => Date.now() > (held[slot.batchId] as number));
    await t.host.host.delivery.recoverExpired(c.consumerUid);
    expect(await t.host.deliveryStore.slots(c.consumerUid)).toEqual({});
  });

  it('DL-02: a cut-off handler still running keeps its slot — no other handler starts in its place before the slot’s deadline', async () => {
    const c = await t.setupConsumer('cutoff-held', { maxConcurrency: 1 });
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'slow' }, { body: 'next' }]);
    const seen: number[] = [];
    const slot = await acquire(c.consumerUid);
    const record = newRecord();
    // The first handler hangs forever: it is still running (in this process) after its cut-off.
    await expect(invocation(workerModule(seen, 'hang'), slot, record)).rejects.toMatchObject({
      name: RUNTIME_EXIT_ERROR,
    });
    expect(record.exits).toHaveLength(1);
    const step = createDispatcherStepHandler(t.host);
    const again = (await step({ action: 'acquire', consumerUid: c.consumerUid, generation: 1 })) as {
      status: string;
    };
    expect(again.status).not.toBe('acquired');
    expect(Object.keys(await t.host.deliveryStore.slots(c.consumerUid))).toEqual([slot.batchId]);
  });

  it('DL-02: a handler that throws is not a cut-off — the lane goes on in the same process and nothing exits', async () => {
    const c = await t.setupConsumer('throws');
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'x' }]);
    const seen: number[] = [];
    const record = newRecord();
    const result = await invocation(workerModule(seen, 'throw'), await acquire(c.consumerUid), record);
    // The same lane took a next slot and delivered the retry (attempt 2), then went idle.
    expect(seen).toEqual([1, 2]);
    expect(result).toEqual({ idle: true, delivered: 2, batches: 3 });
    expect(record.exits).toEqual([]);
    expect(record.calls).toEqual([
      'register:ok',
      'finalize:threw+next:ok',
      'register:ok',
      'settle:ok',
      'finalize:returned+next:ok',
      'register:ok',
    ]);
    expect(await queueIsEmpty(c.queue.sqsUrl)).toBe(true);
  });

  it('DL-02 RC-01: under the dispatcher, the exit fails InvokeWorker, RecoverBatch is harmless and the lane redelivers as attempt 2', async () => {
    const c = await t.setupConsumer('asl-cutoff');
    await t.host.host.producer.sendBatch(c.queue, [{ body: 'slow' }]);
    const seen: number[] = [];
    const module = workerModule(seen, 'hang');
    const stepArn = 'arn:aws:lambda:us-east-1:000000000000:function:dispatcher-step';
    const stepHandler = createDispatcherStepHandler(t.host);
    const record = newRecord();
    const invoked: string[] = [];
    const recovered: string[] = [];
    const machine = new LocalStateMachine(dispatcherDefinition({ stepFunction: stepArn }));
    const execution = machine.start({
      name: `${c.consumerUid}-g1-cutoff`,
      input: dispatcherInput(c.consumerUid, 1),
      taskHandlers: {
        [DISPATCHER_TASKS.acquire]: (payload) => stepHandler(payload),
        [DISPATCHER_TASKS.handover]: (payload) => stepHandler(payload),
        [DISPATCHER_TASKS.recover]: async (payload) => {
          recovered.push((payload as { batchId: string }).batchId);
          return stepHandler(payload);
        },
        [DISPATCHER_TASKS.invoke]: async (payload) => {
          const { slot } = payload as { slot: Slot };
          invoked.push(slot.batchId);
          // Each invocation is a fresh sandbox (the previous one exited).
          return invocation(module, JSON.parse(JSON.stringify(slot)), record);
        },
      },
    });
    await execution.result;

    expect(seen).toEqual([1, 2]);
    expect(invoked).toHaveLength(2);
    expect(record.exits).toHaveLength(1);
    // RecoverBatch ran once, for the batch that was cut off, after it had been finalised.
    expect(recovered).toEqual([invoked[0]]);
    // Both finalised: closed with their outcomes, and (below) no slot left.
    expect(await t.host.deliveryStore.getHead(invoked[0]!)).toMatchObject({
      closed: true,
      outcome: 'abandoned',
    });
    expect(await t.host.deliveryStore.getHead(invoked[1]!)).toMatchObject({
      closed: true,
      outcome: 'returned',
    });
    expect(await queueIsEmpty(c.queue.sqsUrl)).toBe(true);
    // The lane waited for the cut-off batch's slot to reach its deadline before it took a slot
    // again; the recovery in that AcquireSlot freed it.
    expect(await t.host.deliveryStore.slots(c.consumerUid)).toEqual({});
  });
});
