/**
 * Overlap inside a lane (issue 13): while a batch's handler runs, the lane receives its next batch,
 * which no handler sees until the lane's next slot registers it. So the lane never runs two
 * handlers (DL-02), the messages received ahead are hidden only briefly, a lane that does not go
 * on gives them back at once, and a lane with a slot free beside it receives nothing ahead (the
 * free slot's lane would run those messages sooner).
 */

import { ChangeMessageVisibilityBatchCommand, type ReceiveMessageCommandInput } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import {
  AHEAD_HIDDEN_MS,
  type LaneLimits,
  type QueueInvoker,
  runLane,
} from '../../../lambdas/delivery/batch-runner.ts';
import type { ControlLoop } from '../../../lambdas/delivery/control-loop.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { createDeliveryHost, type DeliveryHost } from '../../support/delivery-harness.ts';
import { queueCounts, sleep } from './delivery-kit.ts';

interface SqsCall {
  at: number;
  command: string;
  input: Record<string, unknown>;
}

/** Every SQS call the Host's client makes from now on, with when it was sent. */
function recordSqs(d: DeliveryHost): SqsCall[] {
  const calls: SqsCall[] = [];
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      calls.push({
        at: performance.now(),
        command: String(context.commandName),
        input: args.input as Record<string, unknown>,
      });
      return next(args);
    },
    { step: 'initialize', name: `record-${Math.random()}` },
  );
  return calls;
}

/** A consumer (batches of 10) with `count` messages waiting, and its first lane's slot. */
async function laneOnBacklog(d: DeliveryHost, name: string, maxConcurrency: number, count: number) {
  const { queue, consumerUid } = await d.setup(name, 'export default { async queue() {} };', {
    maxBatchSize: 10,
    maxConcurrency,
  });
  await d.host.producer.sendBatch(
    queue,
    Array.from({ length: count }, (_, i) => ({ body: `${name}${i}` })),
  );
  const first = await d.host.delivery.acquire(consumerUid, 1);
  if (first.status !== 'acquired') throw new Error('no slot');
  return { queue, consumerUid, slot: first.slot, calls: recordSqs(d) };
}

/** Runs one lane from `slot` through the local Host's runner (the control loop's own lanes off). */
function laneFrom(
  d: DeliveryHost,
  slot: Slot,
  invoke: QueueInvoker['invoke'],
  limits: LaneLimits,
  loop: Pick<ControlLoop, 'register'> = d.host.loop,
) {
  return runLane(
    slot,
    {
      messages: sqsMessageQueue(d.host.sqs),
      host: directBatchHost(d.host.delivery, loop),
      idleWaitSeconds: 1,
      invoker: { invoke },
    },
    limits,
  );
}

describe('a lane receives its next batch while the handler runs', () => {
  let d: DeliveryHost | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  it('DL-02 DL-01 batches 2–4 of a backlog are received during the handler before them; one handler at a time; every message once, attempts 1', async () => {
    d = await createDeliveryHost();
    const host = d;
    const { consumerUid, slot, calls } = await laneOnBacklog(host, 'ahead', 1, 40);
    const windows: { start: number; end: number }[] = [];
    const seen: { id: string; attempts: number }[] = [];
    const slotsAtStart: number[] = [];
    const result = await laneFrom(
      host,
      slot,
      async (delivery) => {
        const start = performance.now();
        slotsAtStart.push(Object.keys(await host.host.delivery.slotsOf(consumerUid)).length);
        for (const m of delivery.messages) seen.push({ id: m.id, attempts: m.attempts });
        await sleep(300);
        windows.push({ start, end: performance.now() });
        return 'returned';
      },
      { maxBatches: 100, budgetMs: 60_000 },
    );
    expect(result.delivered).toBe(40);
    expect(result.idle).toBe(true);
    // Every message once, on its first attempt: nothing received ahead was counted or lost.
    expect(new Set(seen.map((m) => m.id)).size).toBe(40);
    expect(seen.every((m) => m.attempts === 1)).toBe(true);
    // One handler at a time, each in the lane's one slot (maxConcurrency 1).
    expect(windows).toHaveLength(4);
    for (let i = 1; i < windows.length; i++) {
      expect(windows[i]!.start).toBeGreaterThanOrEqual(windows[i - 1]!.end);
    }
    expect(slotsAtStart).toEqual([1, 1, 1, 1]);
    // During each handler the next batch was received: short polls, hidden only briefly (10 s,
    // the batch timeout being 0), so a lane that dies leaves them back within seconds (RC-01).
    const receives = calls.filter((c) => c.command === 'ReceiveMessageCommand');
    const during = windows.map((w) => receives.filter((r) => r.at > w.start && r.at < w.end));
    for (const r of during.flat()) {
      const input = r.input as unknown as ReceiveMessageCommandInput;
      expect(input.WaitTimeSeconds).toBe(0);
      expect(input.VisibilityTimeout).toBe(AHEAD_HIDDEN_MS / 1000);
    }
    // Handlers 1–3 each saw batches 2–4 received; handler 4, with nothing left, one empty try.
    expect(during.map((r) => r.length > 0)).toEqual([true, true, true, true]);
    // Received ahead, then no receive between handlers for batches 2–4 (they were ready).
    for (let i = 1; i < windows.length; i++) {
      const between = receives.filter((r) => r.at > windows[i - 1]!.end && r.at < windows[i]!.start);
      expect(between).toEqual([]);
    }
    expect(calls.some((c) => c.command === 'ChangeMessageVisibilityBatchCommand' && isGiveBack(c))).toBe(
      false,
    );
  });

  it('DL-02 with a slot free, a lane receives nothing ahead: the messages stay for a lane that runs them now', async () => {
    d = await createDeliveryHost();
    const host = d;
    const { slot, calls } = await laneOnBacklog(host, 'free', 3, 30);
    const windows: { start: number; end: number }[] = [];
    const result = await laneFrom(
      host,
      slot,
      async () => {
        const start = performance.now();
        await sleep(200);
        windows.push({ start, end: performance.now() });
        return 'returned';
      },
      { maxBatches: 100, budgetMs: 60_000 },
      // Registration without the control loop's lane starts: this lane stays alone.
      { register: (s, r) => host.host.delivery.register(s, r) },
    );
    expect(result.delivered).toBe(30);
    const receives = calls.filter((c) => c.command === 'ReceiveMessageCommand');
    expect(windows).toHaveLength(3);
    for (const w of windows) expect(receives.filter((r) => r.at > w.start && r.at < w.end)).toEqual([]);
  });

  it('DL-02 a lane whose budget ran out during the handler gives what it received ahead back at once: visible again, no attempt counted', async () => {
    d = await createDeliveryHost();
    const host = d;
    const { queue, consumerUid, slot, calls } = await laneOnBacklog(host, 'back', 1, 30);
    const seen: number[] = [];
    const result = await laneFrom(
      host,
      slot,
      async (delivery) => {
        seen.push(...delivery.messages.map((m) => m.attempts));
        // Long enough for the receive ahead, and past the lane's budget.
        await sleep(2_500);
        return 'returned';
      },
      { maxBatches: 100, budgetMs: 1_500 },
    );
    expect(result).toMatchObject({ idle: false, delivered: 10, batches: 1 });
    expect(seen).toEqual(Array.from({ length: 10 }, () => 1));
    // Ten were received ahead and given back in one call, not left hidden for 30 s.
    const backs = calls.filter(isGiveBack);
    expect(backs).toHaveLength(1);
    expect((backs[0]!.input.Entries as unknown[]).length).toBe(10);
    expect(await queueCounts(host, queue)).toEqual({ visible: 20, inFlight: 0, delayed: 0 });
    // The next lane gets them on their first attempt.
    const again = await host.host.delivery.acquire(consumerUid, 1);
    if (again.status !== 'acquired') throw new Error('no slot');
    const later: number[] = [];
    await laneFrom(
      host,
      again.slot,
      async (delivery) => {
        later.push(...delivery.messages.map((m) => m.attempts));
        return 'returned';
      },
      { maxBatches: 100, budgetMs: 60_000 },
    );
    expect(later).toEqual(Array.from({ length: 20 }, () => 1));
  });
});

/** A ChangeMessageVisibilityBatch that makes messages visible at once. */
function isGiveBack(c: SqsCall): boolean {
  if (c.command !== ChangeMessageVisibilityBatchCommand.name) return false;
  const entries = (c.input.Entries ?? []) as { VisibilityTimeout?: number }[];
  return entries.length > 0 && entries.every((e) => e.VisibilityTimeout === 0);
}
