/**
 * DL-01: batches hold 1..maxBatchSize messages; a batch is handed over when full or when
 * maxBatchTimeoutSeconds has passed since its first message (0 = no wait); an empty queue never
 * invokes the handler.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import {
  allEnded,
  attemptsById,
  consumerOn,
  type Rec,
  records,
  serial,
  sleep,
  waitDrained,
} from './delivery-kit.ts';

describe.concurrent('DL-01 batch forming', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  const starts = (e: Rec[]) => e.filter((x) => x.ev === 'start');
  /** Waits until `n` distinct messages were delivered and every handler ended. */
  const delivered = (log: string, n: number, timeoutMs = 30_000) =>
    waitFor(
      `${n} messages delivered`,
      () => {
        const e = records(log);
        return attemptsById(e).size >= n && allEnded(e) ? e : undefined;
      },
      timeoutMs,
    );

  it('DL-01 maxBatchSize 1: every batch holds exactly one message', async ({ expect }) => {
    const log = d.logFile('size1');
    const { queue } = await serial(() =>
      d.setup('size1', recordingWorker(log), { maxBatchSize: 1, maxConcurrency: 2 }),
    );
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 5 }, (_, i) => ({ body: `s${i}` })),
    );
    const events = await delivered(log, 5);
    expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
    expect(starts(events)).toHaveLength(5);
    expect(starts(events).every((s) => s.size === 1)).toBe(true);
    await waitDrained(d, queue);
  });

  it('DL-01 maxBatchSize 100: a backlog of 100 arrives as one batch of 100, gathered over several receives', async ({
    expect,
  }) => {
    const log = d.logFile('size100');
    const queue = await serial(() => d.createQueue('team', 'size100-q'));
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 100 }, (_, i) => ({ body: `h${i}` })),
    );
    const attachedAt = Date.now();
    await serial(() =>
      consumerOn(d, 'size100', queue, recordingWorker(log), {
        maxBatchSize: 100,
        // The Form's longest wait: a full batch that waited it out would start 60 s late.
        maxBatchTimeoutSeconds: 60,
        maxConcurrency: 1,
      }),
    );
    const events = await delivered(log, 100);
    expect(starts(events)).toHaveLength(1);
    expect(starts(events)[0]?.size).toBe(100);
    expect(
      events
        .filter((e) => e.ev === 'msg')
        .map((e) => e.id)
        .sort(),
    ).toEqual([...ids].sort());
    // A full batch is handed over at once: it does not wait out the 60 s timeout (attaching and
    // gathering take a few seconds, more on a loaded machine).
    expect((starts(events)[0]?.t ?? 0) - attachedAt).toBeLessThan(30_000);
    await waitDrained(d, queue);
  });

  it('DL-01 maxBatchTimeoutSeconds 0: five lone messages are delivered promptly, in batches of 1..10', async ({
    expect,
  }) => {
    const log = d.logFile('t0');
    const { queue } = await serial(() =>
      d.setup('t0', recordingWorker(log), { maxBatchSize: 10, maxBatchTimeoutSeconds: 0 }),
    );
    await sleep(1_500); // the consumer is idle: its lanes have found nothing and rested
    const sentAt = new Map<string, number>();
    for (let i = 0; i < 5; i++) {
      const t = Date.now();
      sentAt.set(await d.host.producer.send(queue, `lone${i}`), t);
    }
    const events = await delivered(log, 5);
    const sizes = starts(events).map((s) => s.size ?? 0);
    expect(sizes.every((n) => n >= 1 && n <= 10)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(5);
    for (const m of events.filter((e) => e.ev === 'msg')) {
      expect(m.t - (sentAt.get(m.id as string) ?? 0)).toBeLessThan(3_000);
    }
    await waitDrained(d, queue);
  });

  it('DL-01 maxBatchTimeoutSeconds 3 with fewer messages than maxBatchSize: the batch waits, then goes', async ({
    expect,
  }) => {
    const log = d.logFile('t3');
    const { queue } = await serial(() =>
      d.setup('t3', recordingWorker(log), {
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 3,
        maxConcurrency: 1,
      }),
    );
    await sleep(1_500);
    const firstSend = Date.now();
    const ids = [await d.host.producer.send(queue, 'w0'), await d.host.producer.send(queue, 'w1')];
    await sleep(1_000);
    ids.push(await d.host.producer.send(queue, 'w2'), await d.host.producer.send(queue, 'w3'));
    const events = await delivered(log, 4);
    // One batch: the later messages joined the one waiting for more.
    expect(starts(events)).toHaveLength(1);
    expect(starts(events)[0]?.size).toBe(4);
    expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
    const delay = (starts(events)[0]?.t ?? 0) - firstSend;
    expect(delay).toBeGreaterThanOrEqual(3_000);
    expect(delay).toBeLessThanOrEqual(3_000 + 3_000);
    await waitDrained(d, queue);
  });

  it('DL-01 a batch that fills up is handed over before its timeout', async ({ expect }) => {
    const log = d.logFile('full');
    const { queue } = await serial(() =>
      d.setup('full', recordingWorker(log), {
        maxBatchSize: 4,
        maxBatchTimeoutSeconds: 10,
        maxConcurrency: 1,
      }),
    );
    await sleep(1_500);
    const sent = Date.now();
    const ids = await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 4 }, (_, i) => ({ body: `f${i}` })),
    );
    const events = await delivered(log, 4);
    expect(starts(events)).toHaveLength(1);
    expect(starts(events)[0]?.size).toBe(4);
    expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
    expect((starts(events)[0]?.t ?? 0) - sent).toBeLessThan(5_000);
    await waitDrained(d, queue);
  });

  it('DL-01 an empty queue never invokes the handler', async ({ expect }) => {
    const log = d.logFile('empty');
    await serial(() =>
      d.setup('empty', recordingWorker(log), {
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 2,
        maxConcurrency: 3,
      }),
    );
    await sleep(3_500); // several idle rounds of every lane
    expect(records(log)).toEqual([]);
  });
});
