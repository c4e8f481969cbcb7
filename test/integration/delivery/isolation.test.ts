/**
 * DL-09: a worker can settle only the batches delivered to it — a forged or foreign batch id,
 * or a batch already finalised, rejects `unknown_batch` — and (host-profile §2) a handler that
 * throws, hangs or kills its thread does not disturb another consumer running at the same time.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, type ExpectStatic, it } from 'vitest';
import type { SettleCall } from '../../../lambdas/delivery/settlement-protocol.ts';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import {
  allEnded,
  attemptsById,
  batchHead,
  consumerOn,
  customWorker,
  outcomeOf,
  type Rec,
  raiseFlag,
  records,
  serial,
  waitDrained,
  waitForFlag,
} from './delivery-kit.ts';

const CALLS: SettleCall[] = [
  { kind: 'ack', index: 0 },
  { kind: 'retry', index: 0, delaySeconds: 5 },
  { kind: 'ackAll' },
  { kind: 'retryAll' },
];

describe.concurrent('DL-09 batch ownership and isolation', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  it('DL-09 a forged batch id rejects unknown_batch for every settlement and for finalisation', async ({
    expect,
  }) => {
    const forged = [`b${randomBytes(18).toString('base64url')}`, 'x'.repeat(256), 'b'];
    for (const batchId of forged) {
      for (const call of CALLS) {
        expect(
          await outcomeOf(d.host.delivery.settle(batchId, d.host.delivery.credentialOf(batchId), call)),
        ).toBe('unknown_batch');
      }
      expect(await outcomeOf(d.host.delivery.finalizeAsRunner(batchId, 'anything', 'returned'))).toBe(
        'unknown_batch',
      );
    }
  });

  it("DL-09 another consumer's open batch rejects unknown_batch with a foreign credential, and is not touched", async ({
    expect,
  }) => {
    const flag = `${d.logFile('own')}.go`;
    const hold = (log: string) => recordingWorker(log, waitForFlag(flag));
    const logA = d.logFile('own-a');
    const logB = d.logFile('own-b');
    const a = await serial(() => d.setup('own-a', hold(logA)));
    const b = await serial(() => d.setup('own-b', hold(logB)));
    const idA = await d.host.producer.send(a.queue, 'for A');
    const idB = await d.host.producer.send(b.queue, 'for B');
    const batchOf = (log: string) =>
      waitFor(
        'a batch started',
        () => records(log).find((e) => e.ev === 'start')?.batch as string | undefined,
      );
    const batchA = await batchOf(logA);
    const batchB = await batchOf(logB);
    // B's worker holds B's credential; it tries A's batch with it (and with made-up ones).
    const foreign = [d.host.delivery.credentialOf(batchB), '', randomBytes(32).toString('base64url')];
    for (const credential of foreign) {
      for (const call of CALLS) {
        expect(await outcomeOf(d.host.delivery.settle(batchA, credential, call))).toBe('unknown_batch');
      }
      expect(await outcomeOf(d.host.delivery.finalizeAsRunner(batchA, credential, 'returned'))).toBe(
        'unknown_batch',
      );
    }
    // A's batch is still open and unsettled: none of it landed.
    const head = await batchHead(d, batchA);
    expect(head?.closed).toBe(false);
    expect(head?.settled).toEqual({});
    expect(head?.all).toBeUndefined();

    raiseFlag(flag);
    await waitDrained(d, a.queue);
    await waitDrained(d, b.queue);
    const eventsA = await waitFor('A ended', () => (allEnded(records(logA)) ? records(logA) : undefined));
    expect(attemptsById(eventsA)).toEqual(new Map([[idA, [1]]]));
    expect(attemptsById(records(logB))).toEqual(new Map([[idB, [1]]]));
    // Once finalised, even the batch's own credential settles nothing more.
    for (const call of CALLS) {
      expect(
        await outcomeOf(d.host.delivery.settle(batchA, d.host.delivery.credentialOf(batchA), call)),
      ).toBe('unknown_batch');
    }
  });

  it('DL-09 handlers that throw synchronously, hang (async and in a busy loop) or exit their thread do not disturb a healthy consumer', async ({
    expect,
  }) => {
    // A Host of its own whose hung handlers are cut off after 4 s. (The bound counts from before
    // the thread starts and loads the module, which on cores shared with other suites can take
    // more than a second: a much shorter bound would cut off the healthy handlers too.)
    const h = await createDeliveryHost({ workerTimeoutMs: 4_000 });
    h.startDispatcher();
    try {
      await isolation(h, expect);
    } finally {
      await h.close();
    }
  });
});

/** Bad workers beside a healthy consumer, all on the Host `h`. */
async function isolation(h: DeliveryHost, expect: ExpectStatic): Promise<void> {
  const bad = {
    'sync-throw': {
      source: (log: string) =>
        customWorker(log, `queue(batch) { recStart(batch); throw new Error('sync'); },`),
      maxRetries: 2,
      messages: 2,
    },
    'hang-async': {
      source: (log: string) => recordingWorker(log, `await new Promise(() => {});`),
      maxRetries: 1,
      messages: 1,
    },
    'hang-loop': {
      source: (log: string) => customWorker(log, `queue(batch) { recStart(batch); for (;;) {} },`),
      maxRetries: 0,
      messages: 1,
    },
    exit: {
      source: (log: string) => recordingWorker(log, `process.exit(1);`),
      maxRetries: 2,
      messages: 2,
    },
  };
  const healthyLog = h.logFile('healthy');
  const { healthy, queues } = await serial(async () => {
    const healthy = await h.setup(
      'healthy',
      recordingWorker(healthyLog, `await new Promise((r) => setTimeout(r, 200));`),
      {
        maxBatchSize: 5,
        maxConcurrency: 2,
      },
    );
    const qs: Record<string, Awaited<ReturnType<typeof h.createQueue>>> = {};
    for (const [name, spec] of Object.entries(bad)) {
      qs[name] = await h.createQueue('team', `${name}-q`);
      await consumerOn(h, name, qs[name], spec.source(h.logFile(name)), {
        maxRetries: spec.maxRetries,
        maxBatchSize: 1,
        retryDelaySeconds: 0,
      });
    }
    return { healthy, queues: qs };
  });
  const badIds: Record<string, string[]> = {};
  for (const [name, spec] of Object.entries(bad)) {
    badIds[name] = await Promise.all(
      Array.from({ length: spec.messages }, (_, i) =>
        h.host.producer.send(queues[name] as never, `${name}${i}`),
      ),
    );
  }
  const ids = await h.host.producer.sendBatch(
    healthy.queue,
    Array.from({ length: 50 }, (_, i) => ({ body: `ok${i}` })),
  );

  await waitDrained(h, healthy.queue);
  const events = await waitFor('healthy handlers ended', () => {
    const e = records(healthyLog);
    return allEnded(e) ? e : undefined;
  });
  // Every healthy message delivered once and acknowledged.
  expect(attemptsById(events)).toEqual(new Map(ids.map((id) => [id, [1]])));

  for (const [name, spec] of Object.entries(bad)) {
    await waitDrained(h, queues[name] as never);
    // Never taken as acknowledged: each message was retried until its deliveries ran out.
    const got = attemptsById(records(h.logFile(name)));
    expect(got, name).toEqual(
      new Map(
        (badIds[name] as string[]).map((id) => [
          id,
          Array.from({ length: 1 + spec.maxRetries }, (_, i) => i + 1),
        ]),
      ),
    );
  }
  // The healthy consumer ran while the hung handler was still held (not before, not after).
  const hang = records(h.logFile('hang-async')).find((e) => e.ev === 'start') as Rec;
  const healthyStarts = events.filter((e) => e.ev === 'start').map((e) => e.t);
  expect(Math.min(...healthyStarts)).toBeLessThan(hang.t + 4_000);
  expect(Math.max(...healthyStarts)).toBeGreaterThan(hang.t);
}
