/**
 * Registration's writes — manifest, head, then the slot's mark, each a plain write — under the
 * failures AWS has: an answer lost after the write committed (dropped for good, or retried),
 * a write that never reached DynamoDB, and a stop that lands between the head and the mark.
 * Whatever happens, a handler runs only with head and mark written, its messages are never
 * handed out beside it, and a batch that did not start leaves nothing behind that holds them.
 */
import type { UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { batchHead, queueCounts, receiveAsRunner, stopConsumer, waitDrained } from './delivery-kit.ts';

type Write = 'head' | 'mark';

/** Which registration write a DynamoDB command is, if it is one. */
function writeOf(command: string, input: unknown): Write | undefined {
  const i = input as { Item?: { sk?: { S?: string } } } & UpdateItemCommandInput;
  if (command === 'PutItemCommand' && i.Item?.sk?.S === 'head') return 'head';
  if (command === 'UpdateItemCommand' && i.UpdateExpression?.startsWith('SET registered.#b')) return 'mark';
  return undefined;
}

/**
 * Runs `fn` while the first `write` of a registration meets `fault`: `committed` — it reaches
 * DynamoDB, then `afterCommit` runs and the answer is replaced by `error`; `unsent` — `error` before it
 * is sent. Answers how many writes met it.
 */
async function withFault<T>(
  d: DeliveryHost,
  write: Write,
  fault: {
    at: 'committed' | 'unsent';
    error: { name: string; message: string };
    afterCommit?: () => Promise<void>;
  },
  fn: () => Promise<T>,
): Promise<{ result: T; met: number }> {
  let met = 0;
  const name = `fault-${write}-${fault.at}`;
  const fail = () => Object.assign(new Error(fault.error.message), { name: fault.error.name, $metadata: {} });
  const middleware: Parameters<typeof d.host.dynamodb.middlewareStack.add>[0] =
    (next, context) => async (args) => {
      const hit = writeOf(context.commandName ?? '', args.input) === write && met === 0;
      if (!hit) return next(args);
      met++;
      if (fault.at === 'unsent') throw fail();
      await next(args);
      await fault.afterCommit?.();
      throw fail();
    };
  d.host.dynamodb.middlewareStack.add(middleware, {
    step: (fault.at === 'unsent' ? 'initialize' : 'deserialize') as 'deserialize',
    name,
  });
  try {
    return { result: await fn(), met };
  } finally {
    d.host.dynamodb.middlewareStack.remove(name);
  }
}

const dropped = { name: 'ConnectionLost', message: 'the connection dropped' };
// A throttle the SDK retries: its retry meets the write its first try made.
const throttled = { name: 'ProvisionedThroughputExceededException', message: 'throttled' };

describe('registration: manifest, head and slot mark as three plain writes (DL-02, DL-07, QC-08)', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost({ graceMs: 5_000 });
  });
  afterAll(async () => d.close());

  async function oneMessage(name: string): Promise<{ queue: QueueTarget; consumerUid: string; slot: Slot }> {
    const { queue, consumerUid } = await d.setup(name, recordingWorker(d.logFile(name)), {
      maxConcurrency: 1,
    });
    await d.host.producer.send(queue, name);
    const a = await d.host.attachments.get(consumerUid);
    const got = await d.host.delivery.acquire(consumerUid, a?.generation ?? 1);
    if (got.status !== 'acquired') throw new Error(`no slot: ${got.status}`);
    return { queue, consumerUid, slot: got.slot };
  }

  const registered = async (consumerUid: string, batchId: string) =>
    (await d.host.delivery.dispatchState(consumerUid)).registered[batchId] === true;

  /**
   * Registers while every mark fails before it reaches DynamoDB: the registration gives up with
   * its head written, as a runner lost between the two writes leaves it. Answers the marks tried.
   */
  async function registerWithoutMark(slot: Slot, got: Awaited<ReturnType<typeof receiveAsRunner>>) {
    const name = 'refuseMarks';
    let refused = 0;
    d.host.dynamodb.middlewareStack.add(
      (next, context) => async (args) => {
        if (writeOf(context.commandName ?? '', args.input) !== 'mark') return next(args);
        refused++;
        throw Object.assign(new Error(dropped.message), { name: dropped.name, $metadata: {} });
      },
      { step: 'initialize', name },
    );
    try {
      await d.host.delivery.register(slot, got).then(
        () => expect.fail('registered without its mark'),
        () => undefined,
      );
    } finally {
      d.host.dynamodb.middlewareStack.remove(name);
    }
    return refused;
  }

  for (const [write, error] of [
    ['head', dropped],
    ['head', throttled],
    ['mark', dropped],
    ['mark', throttled],
  ] as const) {
    it(`DL-07 RC-04 the ${write}'s write commits and its answer is lost (${error.name}): the batch runs once, as its first attempt, held for it`, async ({
      expect,
    }) => {
      const { queue, consumerUid, slot } = await oneMessage(`lost-${write}-${error.name.length}`);
      const got = await receiveAsRunner(d, queue);
      const { result: reg, met } = await withFault(d, write, { at: 'committed', error }, () =>
        d.host.delivery.register(slot, got),
      );
      expect(met).toBe(1);
      expect(reg.deliver.map((x) => x.attempts)).toEqual([1]);
      expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
      expect(await registered(consumerUid, slot.batchId)).toBe(true);
      // Held for the batch, not given back to be delivered beside it.
      expect(await receiveAsRunner(d, queue)).toEqual([]);
      await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned');
      await waitDrained(d, queue, 10_000);
    });
  }

  it('DL-02 RC-04 the mark never reaches DynamoDB: registration makes sure of it before any handler gets the batch', async ({
    expect,
  }) => {
    const { queue, consumerUid, slot } = await oneMessage('unsent-mark');
    const got = await receiveAsRunner(d, queue);
    const { result: reg, met } = await withFault(d, 'mark', { at: 'unsent', error: dropped }, () =>
      d.host.delivery.register(slot, got),
    );
    expect(met).toBe(1);
    expect(reg.deliver.map((x) => x.attempts)).toEqual([1]);
    expect(await registered(consumerUid, slot.batchId)).toBe(true);
    await d.host.delivery.finalizeAsRunner(slot.batchId, reg.credential, 'returned');
    await waitDrained(d, queue, 10_000);
  });

  for (const error of [dropped, throttled]) {
    it(`QC-08 DL-07 a stop between the head and the mark (the head's answer ${error.name}): the batch never starts, its head is taken back, its slot freed and its message returned unattempted`, async ({
      expect,
    }) => {
      const { queue, consumerUid, slot } = await oneMessage(`stop-between-${error.name.length}`);
      const got = await receiveAsRunner(d, queue);
      // The head commits; the consumer stops before the mark is written.
      let stopped = false;
      const { result: reg } = await withFault(
        d,
        'head',
        {
          at: 'committed',
          error,
          afterCommit: async () => {
            await stopConsumer(d, consumerUid);
            stopped = true;
          },
        },
        () => d.host.delivery.register(slot, got).catch((err: Error) => err),
      );
      expect(stopped).toBe(true);
      // Told either way that nothing runs: an empty registration, or the batch refused.
      if (reg instanceof Error) expect(reg).toMatchObject({ name: 'unknown_batch' });
      else expect(reg).toMatchObject({ credential: '', deliver: [] });
      expect(await batchHead(d, slot.batchId)).toBeUndefined();
      expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
      expect(await queueCounts(d, queue)).toMatchObject({ visible: 1, inFlight: 0 });
    });
  }

  it('DL-02 RC-04 a runner lost between the head and the mark: recovery frees its slot and takes the head back, nothing counted', async ({
    expect,
  }) => {
    const { queue, consumerUid, slot } = await oneMessage('lost-between');
    expect(await registerWithoutMark(slot, await receiveAsRunner(d, queue))).toBeGreaterThanOrEqual(2);
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    expect(await registered(consumerUid, slot.batchId)).toBe(false);
    // The lane's invocation failed: RecoverBatch recovers its slot.
    await d.host.delivery.recoverBatch(consumerUid, slot.batchId);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
    // The message returns when its short visibility ends, as its first attempt.
    const again = await waitFor(
      'the message back in the queue',
      async () => {
        const r = await receiveAsRunner(d, queue);
        return r.length > 0 ? r : undefined;
      },
      60_000,
    );
    const next = await d.host.delivery.acquire(consumerUid, slot.generation);
    if (next.status !== 'acquired') throw new Error(`no slot: ${next.status}`);
    const reg = await d.host.delivery.register(next.slot, again);
    expect(reg.deliver.map((x) => x.attempts)).toEqual([1]);
    await d.host.delivery.finalizeAsRunner(next.slot.batchId, reg.credential, 'returned');
    await waitDrained(d, queue, 10_000);
  });

  it('QC-08 a runner lost between the head and the mark, then the consumer stops: the stop frees the slot and takes the head back', async ({
    expect,
  }) => {
    const { queue, consumerUid, slot } = await oneMessage('stop-after-lost');
    await registerWithoutMark(slot, await receiveAsRunner(d, queue));
    expect((await batchHead(d, slot.batchId))?.closed).toBe(false);
    await stopConsumer(d, consumerUid);
    expect(await d.host.delivery.inFlightBatches(consumerUid)).toBe(0);
    expect(await batchHead(d, slot.batchId)).toBeUndefined();
  });
});
