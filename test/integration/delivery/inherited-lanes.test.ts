/**
 * Issue 13: a lane the Host starts for a backlog takes over the sealed context of the lane that
 * started it, so its first AcquireSlot reads no attachment, queue or worker. These tests try to
 * break what that must keep: a context the Host did not seal as it is, one of another consumer
 * generation, or one older than INHERITED_LANE_MAX_AGE_MS is read afresh (DL-09), and a consumer
 * stopped meanwhile still starts no batch: the registration's check refuses it (QC-08).
 * Against DynamoDB Local and the SQS stand-in; the Host's clock is the test's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inheritedLaneSchema } from '../../../lambdas/delivery/batch-host-protocol.ts';
import {
  type AcquireResult,
  INHERITED_LANE_MAX_AGE_MS,
  type InheritedLane,
  type Slot,
} from '../../../lambdas/delivery/delivery-service.ts';
import { dispatcherInput } from '../../../lambdas/delivery/dispatcher-definition.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import { batchHead, queueCounts, receiveAsRunner, serial, stopConsumer } from './delivery-kit.ts';

describe('issue 13: inherited lane contexts', () => {
  let d: DeliveryHost;
  let offset = 0;
  beforeAll(async () => {
    d = await createDeliveryHost({ clock: () => Date.now() + offset });
  });
  afterAll(async () => d.close());

  const consumer = (name: string) =>
    serial(() =>
      d.setup(name, recordingWorker(d.logFile(name)), {
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 0,
        maxConcurrency: 8,
        maxRetries: 3,
      }),
    );

  /** The DynamoDB items an acquire reads (GetItem keys' partitions), and its result. */
  async function acquireReading(
    consumerUid: string,
    generation: number,
    inherit: unknown,
  ): Promise<{ reads: string[]; got: AcquireResult }> {
    const reads: string[] = [];
    const name = 'countAcquireReads';
    d.host.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'GetItemCommand') {
          const key = (args.input as { Key?: { pk?: { S?: string } } }).Key;
          reads.push(String(key?.pk?.S).split('#')[0] as string);
        }
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      return { reads, got: await d.host.delivery.acquire(consumerUid, generation, inherit) };
    } finally {
      d.host.dynamodb.middlewareStack.remove(name);
    }
  }

  const slotOf = (got: AcquireResult): Slot => {
    if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
    return got.slot;
  };
  const laneOf = (slot: Slot) => d.host.delivery.inheritableLane(slot) as InheritedLane;

  it('DL-09 a lane started with the sealed context of a running lane reads no attachment, queue or worker; an altered, foreign or stale one is read afresh', async () => {
    const { consumerUid } = await consumer('inherit');
    const first = await acquireReading(consumerUid, 1, {});
    expect(first.reads).toEqual(expect.arrayContaining(['ATTACH', 'RES']));
    const parent = slotOf(first.got);
    const lane = laneOf(parent);
    expect(lane.contextReadAt).toBe(parent.contextReadAt);
    // What a spawned lane's execution starts from carries it as it is, and the step Lambda's
    // input check (AWS) takes it; an unknown field or an oversized one is refused there.
    expect(dispatcherInput(consumerUid, 1, 0, undefined, lane).inherit).toEqual(lane);
    expect(inheritedLaneSchema.safeParse(lane).success).toBe(true);
    expect(inheritedLaneSchema.safeParse({ ...lane, extra: 1 }).success).toBe(false);
    expect(inheritedLaneSchema.safeParse({ ...lane, sqsUrl: 'x'.repeat(4096) }).success).toBe(false);

    const inherited = await acquireReading(consumerUid, 1, lane);
    // Only the consumer's wake count, read beside the take.
    expect(inherited.reads).toEqual(['WAKE']);
    const child = slotOf(inherited.got);
    expect(child.batchId).not.toBe(parent.batchId);
    const { batchId, deadline, invisibleUntil, wakeSeq, taken, seal, ...context } = child;
    expect(context).toEqual(Object.fromEntries(Object.entries(lane).filter(([k]) => k !== 'seal')));
    // The child's own spawns keep the first read's time: a chain never stretches one read.
    expect(laneOf(child).contextReadAt).toBe(parent.contextReadAt);

    for (const doubted of [
      { ...lane, maxConcurrency: 250 },
      { ...lane, contextReadAt: Date.now() + offset },
      { ...lane, seal: '' },
      { ...lane, generation: 2 },
    ]) {
      const r = await acquireReading(consumerUid, doubted.generation, doubted);
      expect(r.reads).toContain('ATTACH');
      // Generation 2 was never active: the fresh read stops that lane.
      if (doubted.generation === 2) expect(r.got.status).toBe('stop');
      else expect(slotOf(r.got).maxConcurrency).toBe(8);
    }

    offset += INHERITED_LANE_MAX_AGE_MS + 1;
    try {
      const stale = await acquireReading(consumerUid, 1, lane);
      expect(stale.reads).toContain('ATTACH');
      expect(slotOf(stale.got).contextReadAt as number).toBeGreaterThan(lane.contextReadAt as number);
    } finally {
      offset = 0;
    }
  });

  it('QC-08 a consumer stopped after the context was sealed: the inherited lane takes a slot, but its batch is refused at registration and its messages return', async () => {
    const { queue, consumerUid } = await consumer('inherit-stop');
    const parent = slotOf((await acquireReading(consumerUid, 1, {})).got);
    const lane = laneOf(parent);
    await d.host.producer.send(queue, 'after the stop');
    await stopConsumer(d, consumerUid);
    const child = await acquireReading(consumerUid, 1, lane);
    expect(child.reads).toEqual(['WAKE']);
    const slot = slotOf(child.got);
    const got = await receiveAsRunner(d, queue);
    expect(got).toHaveLength(1);
    const reg = await d.host.delivery.register(slot, got);
    expect(reg.credential).toBe('');
    expect(reg.deliver).toEqual([]);
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    expect(Object.keys(await d.host.delivery.slotsOf(consumerUid))).not.toContain(slot.batchId);
    // Given back, not hidden for the 60 s of the receive.
    expect((await queueCounts(d, queue)).visible).toBe(1);
  });
});
