/**
 * Issue 13: a batch's path is one pass. What AcquireSlot learned travels with the slot, sealed by
 * the Host (slot-seal.ts), and a lane's slot is handed to its next batch in the write that frees
 * it. These tests try to break what that must keep: a runner cannot alter or forge a slot or its
 * manifest (DL-09), a hand-over never widens the bound (DL-02), a stop after the slot was taken
 * starts nothing (QC-08), and a repeated call (a lost answer) neither takes a second slot nor
 * registers twice. Against DynamoDB Local and the SQS stand-in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { createDeliveryHost, type DeliveryHost, recordingWorker } from '../../support/delivery-harness.ts';
import {
  batchHead,
  outcomeOf,
  queueCounts,
  receiveAsRunner,
  serial,
  stopConsumer,
  waitDrained,
} from './delivery-kit.ts';

describe('issue 13: sealed slots and hand-over', () => {
  let d: DeliveryHost;
  // No dispatcher: each test drives its batches itself, in this process.
  beforeAll(async () => {
    d = await createDeliveryHost();
  });
  afterAll(async () => d.close());

  async function consumer(name: string, maxConcurrency = 1) {
    return serial(() =>
      d.setup(name, recordingWorker(d.logFile(name)), {
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 0,
        maxConcurrency,
        maxRetries: 3,
        retryDelaySeconds: 0,
      }),
    );
  }

  async function slotOf(consumerUid: string): Promise<Slot> {
    const got = await d.host.delivery.acquire(consumerUid, 1);
    if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
    return got.slot;
  }

  const receive = (queue: QueueTarget) => receiveAsRunner(d, queue);

  const slotsOf = async (consumerUid: string) => Object.keys(await d.host.delivery.slotsOf(consumerUid));

  it('DL-09 a slot the runner altered or forged registers nothing, continues no lane and finalises nothing', async () => {
    const { queue, consumerUid } = await consumer('altered');
    await d.host.producer.send(queue, 'a');
    const slot = await slotOf(consumerUid);
    const got = await receive(queue);
    expect(got).toHaveLength(1);
    // One more retry, a longer handler bound, another queue, a bigger bound, no seal at all.
    const altered: Slot[] = [
      { ...slot, maxRetries: slot.maxRetries + 1 },
      { ...slot, handlerMs: slot.handlerMs * 10 },
      { ...slot, sqsUrl: `${slot.sqsUrl}-other` },
      { ...slot, maxConcurrency: 250 },
      { ...slot, seal: '' },
    ];
    for (const forged of altered) {
      expect(await outcomeOf(d.host.delivery.register(forged, got))).toBe('unknown_batch');
    }
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    // The genuine slot still registers the message, exactly once.
    const reg = await d.host.delivery.register(slot, got);
    expect(reg.deliver).toEqual([{ received: 0, attempts: 1 }]);
    for (const forged of altered) {
      expect(await outcomeOf(d.host.delivery.acquireNext(forged, reg.credential))).toBe('unknown_batch');
      expect(
        await outcomeOf(
          d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', { slot: forged }),
        ),
      ).toBe('unknown_batch');
    }
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    // The manifest registration handed over, altered: another attempt count, another handle.
    const manifest = reg.manifest as NonNullable<typeof reg.manifest>;
    const [entry] = manifest.entries;
    expect(entry?.id).toBe(got[0]?.envelope.id);
    for (const changed of [
      { ...manifest, entries: [{ ...entry!, attempts: 2 }] },
      { ...manifest, entries: [{ ...entry!, handles: ['forged-handle'] }] },
      { ...manifest, moves: [entry!] },
    ]) {
      expect(
        await outcomeOf(
          d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', {
            slot,
            manifest: changed,
          }),
        ),
      ).toBe('unknown_batch');
    }
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    // A wrong credential closes nothing, even with the genuine slot.
    expect(
      await outcomeOf(
        d.host.delivery.finalizeAsRunner(slot.batchId, `${reg.credential}x`, 'returned', { slot }),
      ),
    ).toBe('unknown_batch');
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', { slot, manifest });
    await waitDrained(d, queue, 10_000);
  });

  it('DL-09 a replayed registration of a registered slot leaves the batch as it was: with the same receipts it is answered as the first call (its answer was lost), with others refused', async () => {
    const { queue, consumerUid } = await consumer('replayed');
    await d.host.producer.send(queue, 'r');
    const slot = await slotOf(consumerUid);
    const got = await receive(queue);
    const reg = await d.host.delivery.register(slot, got);
    expect(reg.deliver).toHaveLength(1);
    const head = await batchHead(d, slot.batchId);
    expect(await d.host.delivery.register(slot, got)).toMatchObject({
      credential: reg.credential,
      deliver: reg.deliver,
    });
    const forged = got.map((r) => ({ ...r, receiptHandle: `${r.receiptHandle}-other` }));
    expect(await outcomeOf(d.host.delivery.register(slot, forged))).toBe('unknown_batch');
    expect(await batchHead(d, slot.batchId)).toEqual(head);
    // Still hidden for the handler: the replay gave nothing back.
    expect((await queueCounts(d, queue)).visible).toBe(0);
    expect(await slotsOf(consumerUid)).toEqual([slot.batchId]);
    await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', { slot });
    await waitDrained(d, queue, 10_000);
  });

  it('DL-02 finalisation hands the slot to the lane’s next batch in one write: at maxConcurrency 1 the lane goes on, and a repeated finalisation takes no second slot', async () => {
    const { queue, consumerUid } = await consumer('handover');
    let slot = await slotOf(consumerUid);
    for (let round = 0; round < 3; round++) {
      await d.host.producer.send(queue, `m${round}`);
      const got = await receive(queue);
      const reg = await d.host.delivery.register(slot, got);
      expect(reg.deliver).toHaveLength(1);
      const fin = await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', {
        slot,
        next: true,
      });
      expect(fin.deadLetter).toEqual([]);
      expect(fin.next?.status).toBe('acquired');
      const next = (fin.next as { slot: Slot }).slot;
      expect(next.batchId.startsWith(`${slot.batchId.split('.')[0]}.`)).toBe(true);
      // The bound: one slot, the next batch's, never two.
      expect(await slotsOf(consumerUid)).toEqual([next.batchId]);
      // The answer was lost and the runner asks again: the same next slot, still only one.
      const again = await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned', {
        slot,
        next: true,
      });
      expect(again.next?.status).toBe('acquired');
      expect((again.next as { slot: Slot }).slot.batchId).toBe(next.batchId);
      expect(await slotsOf(consumerUid)).toEqual([next.batchId]);
      slot = next;
    }
    expect((await queueCounts(d, queue)).visible + (await queueCounts(d, queue)).inFlight).toBe(0);
    // An empty receive frees the slot the last hand-over took.
    await d.host.delivery.register(slot, []);
    expect(await slotsOf(consumerUid)).toEqual([]);
  });

  it('QC-07 DL-02 a slot the replaced generation took before an update registers nothing once the update succeeded: the message returns at once', async () => {
    const { queue, consumerUid } = await consumer('replaced');
    await d.host.producer.send(queue, 'r');
    const slot = await slotOf(consumerUid);
    const got = await receive(queue);
    expect(got).toHaveLength(1);
    // The update through the Host API, to its success (the executor fences generation 1 off).
    const current = await d.host.request({ path: `/resources/${consumerUid}` });
    const put = await d.host.request({
      method: 'PUT',
      path: `/resources/${consumerUid}`,
      body: { spec: { ...(current.body.spec as Record<string, unknown>), maxRetries: 5 } },
      headers: {
        'idempotency-key': d.host.newKey(),
        'takoform-expected-generation': String(current.body.generation),
      },
    });
    expect(put.status).toBe(202);
    await d.host.settle();
    expect((await d.host.request({ path: `/resources/${consumerUid}` })).body.generation).toBe(2);
    // Refused either way: the slot was revoked with the replaced generation's idle slots
    // (`unknown_batch`), or, where the registration ran first, fenced off (nothing delivered).
    const reg = await d.host.delivery.register(slot, got).catch((err: Error) => {
      if (err.name !== 'unknown_batch') throw err;
      return { deliver: [] };
    });
    expect(reg.deliver).toEqual([]);
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    expect((await queueCounts(d, queue)).visible).toBe(1);
  });

  it('QC-07 DL-02 the fence an update writes refuses the replaced generation’s registration in a slot that outlived the revocation of idle slots', async () => {
    const { queue, consumerUid } = await consumer('fenced', 20);
    await d.host.producer.send(queue, 'f');
    const slot = await slotOf(consumerUid);
    const got = await receive(queue);
    // What an update to generation 2 writes first: generations below 2 are fenced off in every
    // shard a maxConcurrency of 20 may use, the slot itself left in place (taken after the revoke).
    await d.host.delivery.fenceGenerations(consumerUid, 2, 20);
    const reg = await d.host.delivery.register(slot, got);
    expect(reg.deliver).toEqual([]);
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    expect((await queueCounts(d, queue)).visible).toBe(1);
    // A fence is never lowered: a repeated or late fence for generation 1 leaves it at 2.
    await d.host.delivery.fenceGenerations(consumerUid, 1, 20);
    const again = await slotOf(consumerUid);
    expect((await d.host.delivery.register(again, await receive(queue))).deliver).toEqual([]);
  });

  it('QC-08 a consumer stopped after its lane took a slot registers nothing: the messages return at once and the slot is freed', async () => {
    const { queue, consumerUid } = await consumer('stopped');
    await d.host.producer.send(queue, 's');
    const slot = await slotOf(consumerUid);
    const got = await receive(queue);
    expect(got).toHaveLength(1);
    await stopConsumer(d, consumerUid);
    const reg = await d.host.delivery.register(slot, got);
    expect(reg.credential).toBe('');
    expect(reg.deliver).toEqual([]);
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    expect(await slotsOf(consumerUid)).toEqual([]);
    // Given back, not hidden for the 60 s of the receive.
    expect((await queueCounts(d, queue)).visible).toBe(1);
  });
});
