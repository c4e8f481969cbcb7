/**
 * Issue 13: lanes on Step Functions Express where a consumer's batch fits the five-minute window
 * (`lane-kinds.ts`), on Standard otherwise — run through the same two definitions the CDK stack
 * deploys, under the local stand-in (which ends an execution at its definition's TimeoutSeconds,
 * 300 s for Express, as AWS does).
 */

import { afterEach, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { runLane } from '../../../lambdas/delivery/batch-runner.ts';
import { ControlLoop, type LaneInput, type NextLaneState } from '../../../lambdas/delivery/control-loop.ts';
import type { InheritedLane, Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { dispatcherInput } from '../../../lambdas/delivery/dispatcher-definition.ts';
import { batchSpanMs, type LaneKind } from '../../../lambdas/delivery/lane-kinds.ts';
import { createDeliveryHost, type DeliveryHost, waitFor } from '../../support/delivery-harness.ts';
import { queueCounts, receiveAsRunner, waitDrained } from './delivery-kit.ts';

const NOOP = 'export default { async queue() {} };';

/** A control loop over the harness's delivery service whose lane starts are only recorded. */
function recordingLoop(d: DeliveryHost) {
  const starts: { name: string; input: LaneInput; kind: LaneKind | undefined }[] = [];
  const loop = new ControlLoop({
    service: d.host.delivery,
    launcher: {
      start: async (name, input, kind) => {
        starts.push({ name, input, kind });
        return 'started';
      },
    },
  });
  return { loop, starts };
}

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

describe('Express lanes', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('DL-01 DL-02 a consumer whose batch fits runs its lanes on Express only, and delivers everything', async () => {
    // The harness's worker bound (10 s) and idle wait (1 s) fit the window.
    d = await createDeliveryHost();
    const lanes = d.startDispatcher();
    const { queue } = await d.setup('fits', NOOP, { maxBatchSize: 10, maxConcurrency: 3 });
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 60 }, (_, i) => ({ body: `m${i}` })),
    );
    await waitDrained(d, queue);
    const { byKind, failed } = lanes.stats();
    expect(byKind.express.started).toBeGreaterThan(0);
    expect(byKind.standard.started).toBe(0);
    expect(failed).toBe(0);
  });

  it('DL-01 a consumer whose worker bound does not fit moves to Standard at its first AcquireSlot, which takes no slot there', async () => {
    // A 10-minute worker bound: a batch could outlast an Express execution.
    d = await createDeliveryHost({ workerTimeoutMs: 600_000 });
    const lanes = d.startDispatcher();
    const { queue } = await d.setup('long', NOOP, { maxBatchSize: 10, maxConcurrency: 2 });
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 5 }, (_, i) => ({ body: `m${i}` })),
    );
    await waitDrained(d, queue);
    const { byKind, failed } = lanes.stats();
    expect(byKind.standard.started).toBeGreaterThan(0);
    // Each Express start (the wake's: its kind was not known) ended at AcquireSlot, SlotTaken and
    // LaneDone, without a worker invocation.
    expect(byKind.express.started).toBeGreaterThan(0);
    expect(byKind.express.transitions).toBe(3 * byKind.express.started);
    expect(failed).toBe(0);
  });

  it('an Express lane whose window has run out takes no slot: a new lane of the kind its consumer fits goes on, with the context just read', async () => {
    d = await createDeliveryHost();
    const { consumerUid } = await d.setup('window', NOOP, { maxBatchSize: 10, maxConcurrency: 2 });
    const { loop, starts } = recordingLoop(d);
    // A lane in its fourth round, started 4 min 50 s ago: no batch (idle wait + handler bound)
    // ends before the window does.
    const late = await loop.step({
      action: 'acquire',
      lane: dispatcherInput(consumerUid, 1, 3),
      startedAt: ago(290_000),
    });
    expect(late).toMatchObject({ status: 'handedOver', handedOver: true, lane: { round: 4 } });
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
    expect(starts).toHaveLength(1);
    expect(starts[0]).toMatchObject({ kind: 'express', input: { consumerUid, generation: 1, round: 0 } });
    const inherit = starts[0]!.input.inherit as InheritedLane;
    expect(inherit).toMatchObject({
      consumerUid,
      generation: 1,
      handlerMs: 10_000,
      seal: expect.any(String),
    });
    // The successor, a fresh execution, takes a slot with that context (no reads) and its window.
    const startedAt = new Date().toISOString();
    const fresh = await loop.step({ action: 'acquire', lane: starts[0]!.input, startedAt });
    expect(fresh).toMatchObject({ status: 'acquired', laneUntil: Date.parse(startedAt) + 275_000 });
    const slot = (fresh as { slot: Slot }).slot;
    expect(slot.contextReadAt).toBe(inherit.contextReadAt);
    await directBatchHost(d.host.delivery, d.host.loop).register(slot, []);
    // A lane whose very first AcquireSlot came too late for its window (a cold start, throttling)
    // goes on in Standard, so hand-overs never chain.
    const first = await loop.step({
      action: 'acquire',
      lane: dispatcherInput(consumerUid, 1),
      startedAt: ago(290_000),
    });
    expect(first).toMatchObject({ status: 'handedOver', handedOver: true });
    expect(starts[1]).toMatchObject({ kind: 'standard', input: { consumerUid, generation: 1, round: 0 } });
  });

  it('an Express lane asked to wait longer than its window allows becomes a Standard lane that waits; a short wait stays', async () => {
    d = await createDeliveryHost();
    const { consumerUid } = await d.setup('wait', NOOP);
    const { loop, starts } = recordingLoop(d);
    const now = new Date().toISOString();
    const long = await loop.step({
      action: 'acquire',
      lane: dispatcherInput(consumerUid, 1, 0, 120),
      startedAt: now,
    });
    expect(long).toMatchObject({ status: 'handedOver', handedOver: true });
    expect(starts).toEqual([
      expect.objectContaining({ kind: 'standard', input: expect.objectContaining({ startAfter: 120 }) }),
    ]);
    const short = await loop.step({
      action: 'acquire',
      lane: dispatcherInput(consumerUid, 1, 0, 30),
      startedAt: now,
    });
    expect(short).toMatchObject({ status: 'wait', waitSeconds: 30 });
    expect(starts).toHaveLength(1);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('an Express lane late after its own wait goes on in Express, not Standard: only a lane late at its very first AcquireSlot is sent to Standard', async () => {
    d = await createDeliveryHost();
    const { consumerUid } = await d.setup('waited', NOOP);
    const { loop, starts } = recordingLoop(d);
    // Started 4 min 50 s ago and told to wait first: the wait is answered, and counted as a round.
    const lane = dispatcherInput(consumerUid, 1, 0, 30);
    const waited = await loop.step({ action: 'acquire', lane, startedAt: ago(290_000) });
    expect(waited).toMatchObject({ status: 'wait', waitSeconds: 30, lane: { round: 1 } });
    // After the wait no batch fits the window: the lane hands over to a fresh Express lane (no
    // wait of its own, so it cannot be late by choice), with the context just read.
    const after = await loop.step({
      action: 'acquire',
      lane: (waited as { lane: NextLaneState }).lane,
      startedAt: ago(290_000),
    });
    expect(after).toMatchObject({ status: 'handedOver', handedOver: true, lane: { round: 2 } });
    expect(starts).toEqual([
      expect.objectContaining({ kind: 'express', input: expect.objectContaining({ consumerUid, round: 0 }) }),
    ]);
    expect(starts[0]!.input.startAfter).toBeUndefined();
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });

  it('RC-01 RecoverBatch from an Express lane whose batch keeps its slot starts a Standard lane that waits for that deadline', async () => {
    d = await createDeliveryHost();
    const { consumerUid, queue } = await d.setup('kept', NOOP);
    await d.host.producer.send(queue, 'x');
    const { loop, starts } = recordingLoop(d);
    const acquired = await loop.step({
      action: 'acquire',
      lane: dispatcherInput(consumerUid, 1),
      startedAt: ago(0),
    });
    const slot = (acquired as { slot: Slot }).slot;
    const received = await waitFor('the message', async () => {
      const r = await receiveAsRunner(d!, queue);
      return r.length > 0 ? r : undefined;
    });
    const reg = await directBatchHost(d.host.delivery, d.host.loop).register(slot, received);
    // Registered: a batch holds the slot (an empty credential would mean nothing was registered).
    expect(reg.credential).not.toBe('');
    expect(reg.deliver).toHaveLength(1);
    // The invocation failed with its handler maybe still running: the slot is kept to its deadline.
    const recovered = await loop.step({
      action: 'recover',
      consumerUid,
      batchId: slot.batchId,
      express: { generation: 1 },
    });
    const waitSeconds = (recovered as { waitSeconds: number }).waitSeconds;
    expect(waitSeconds).toBeGreaterThan(0);
    expect(starts).toEqual([
      expect.objectContaining({
        kind: 'standard',
        input: expect.objectContaining({ startAfter: waitSeconds }),
      }),
    ]);
    // From a Standard lane nothing starts: it waits itself.
    await loop.step({ action: 'recover', consumerUid, batchId: slot.batchId });
    expect(starts).toHaveLength(1);
  });

  it('DL-01 the runner of an Express lane starts no batch that would not end before its window; the rest stays queued', async () => {
    d = await createDeliveryHost();
    const { consumerUid, queue } = await d.setup('runner', NOOP, { maxBatchSize: 10, maxConcurrency: 1 });
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 30 }, (_, i) => ({ body: `m${i}` })),
    );
    const acquired = await d.host.delivery.acquire(consumerUid, 1);
    if (acquired.status !== 'acquired') throw new Error('no slot');
    const slot = acquired.slot;
    // A window a whole batch no longer fits: the batch the lane holds a slot for runs (AcquireSlot
    // gave it one), no later one starts.
    const until = Date.now() + batchSpanMs(slot, 1) - 1;
    const result = await runLane(
      slot,
      {
        messages: sqsMessageQueue(d.host.sqs),
        host: directBatchHost(d.host.delivery, d.host.loop),
        idleWaitSeconds: 1,
        invoker: { invoke: async () => 'returned' },
      },
      { maxBatches: 100, budgetMs: 60_000, until },
    );
    expect(result).toEqual({ idle: false, delivered: 10, batches: 1 });
    expect((await queueCounts(d, queue)).visible).toBe(20);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
  });
});
