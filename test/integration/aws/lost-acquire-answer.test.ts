/**
 * An AcquireSlot whose take committed but whose answer Step Functions never got: the Lambda
 * invocation failed at the caller (a `Lambda.ServiceException`, a sandbox that died after the
 * write, an answer lost on the way) and the Task state's Retry invoked the dispatcher step again
 * with the same Parameters. On the AWS composition over DynamoDB Local, through the dispatcher
 * step's own entry. A second take would hold a slot nobody runs in until its gathering deadline;
 * with maxConcurrency 1 the consumer then has no lane at all until a supervision round after it.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import { dispatcherDefinition } from '../../../lambdas/delivery/dispatcher-definition.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { type AwsTestHost, createAwsTestHost } from '../../support/aws-host-harness.ts';

interface AcquireAnswer {
  status: string;
  slot?: { batchId: string };
  lane: { round: number };
}

describe('DL-02 a retried AcquireSlot takes the slot its first try took, never a second one', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost();
  });

  it('DL-02 the definition hands AcquireSlot its execution, which names the round’s slot', () => {
    for (const kind of ['standard', 'express'] as const) {
      const def = dispatcherDefinition(
        { stepFunction: 'arn:aws:lambda:us-east-1:0:function:step' },
        kind,
      ) as {
        States: Record<string, { Parameters?: { Payload?: Record<string, unknown> } }>;
      };
      const acquire = Object.values(def.States).find((s) => s.Parameters?.Payload?.action === 'acquire');
      expect(acquire?.Parameters?.Payload?.execution, kind).toEqual({
        'id.$': '$$.Execution.Id',
        'startTime.$': '$$.Execution.StartTime',
      });
    }
  });

  it('DL-02 maxConcurrency 1: the same AcquireSlot twice (a lost answer) answers the same slot, and the consumer holds one', async () => {
    const c = await t.setupConsumer('lost-acquire', { maxConcurrency: 1 });
    const step = createDispatcherStepHandler(t.host);
    const input = {
      action: 'acquire',
      lane: { consumerUid: c.consumerUid, generation: 1, round: 0 },
      execution: {
        id: 'arn:aws:states:us-east-1:000000000000:execution:d:supervise-lane-1',
        startTime: '2026-12-05T08:00:00.000Z',
      },
    };
    const first = (await step(input)) as AcquireAnswer;
    // Step Functions never saw `first`: its Retry sends the very same Parameters again.
    const again = (await step(input)) as AcquireAnswer;
    expect(first.status).toBe('acquired');
    expect(again.status, 'the retry finds the slot its first try took').toBe('acquired');
    expect(again.slot?.batchId).toBe(first.slot?.batchId);
    const held = Object.keys((await t.host.deliveryStore.dispatchState(c.consumerUid)).slots);
    expect(held, 'slots the consumer holds').toEqual([first.slot?.batchId]);

    // The lane's next round names another slot: with the first still held, the bound refuses it.
    const nextRound = (await step({
      ...input,
      lane: { ...input.lane, round: first.lane.round },
    })) as AcquireAnswer;
    expect(nextRound.status).toBe('busy');
    // Another execution of the same name (Express names repeat) names other slots too.
    const twin = (await step({
      ...input,
      execution: { ...input.execution, startTime: '2026-12-05T08:05:00.000Z' },
    })) as AcquireAnswer;
    expect(twin.status).toBe('busy');
  });

  it('DL-02 a retry that goes on as the generation an update made (maxConcurrency 40 → 1) takes no slot its first try took under the old bound (chaos seed 46)', async () => {
    const c = await t.setupConsumer('lost-acquire-update', { maxConcurrency: 40 });
    const step = createDispatcherStepHandler(t.host);
    const input = {
      action: 'acquire',
      lane: { consumerUid: c.consumerUid, generation: 2, round: 0 },
      execution: {
        id: 'arn:aws:states:us-east-1:000000000000:execution:d:supervise-lane-2',
        startTime: '2026-12-05T09:00:00.000Z',
      },
    };
    // Two lanes of the consumer's generation take slots of its 40.
    const before = await t.request('GET', `/resources/${c.consumerUid}`);
    const generation = Number(before.body.generation);
    const lane = { ...input.lane, generation };
    const first = (await step({ ...input, lane })) as AcquireAnswer;
    expect(first.status).toBe('acquired');
    const other = (await step({ ...input, lane: { ...lane, round: 7 } })) as AcquireAnswer;
    expect(other.status).toBe('acquired');
    // Both hold a batch (their handlers run), and the update to 1 succeeds meanwhile.
    for (const a of [first, other]) {
      expect(await t.host.deliveryStore.markRegistered(c.consumerUid, a.slot?.batchId as string)).toBe(true);
    }
    const put = await t.request(
      'PUT',
      `/resources/${c.consumerUid}`,
      { spec: { ...(before.body.spec as Record<string, unknown>), maxConcurrency: 1 } },
      { 'idempotency-key': `k-${crypto.randomUUID()}`, 'takoform-expected-generation': String(generation) },
    );
    expect(put.status).toBe(202);
    await t.settle();
    const after = await t.request('GET', `/resources/${c.consumerUid}`);
    expect(after.body.spec.maxConcurrency).toBe(1);
    // Step Functions never saw `first`: its Retry sends the same Parameters; the lane now goes on
    // as the new generation, whose bound (1) two held slots already exceed.
    const again = (await step({ ...input, lane })) as AcquireAnswer;
    expect(again.slot?.batchId, 'not the slot taken under the old bound').not.toBe(first.slot?.batchId);
    expect(again.status).toBe('busy');
  });
});
