/**
 * The delivery control loop as the local Host runs it — the policy AWS runs (issue 12): lanes are
 * executions of the production dispatcher definition under the local Step Functions stand-in
 * (history limit on), started by sends, full batches and the supervisor round; the slot map alone
 * bounds concurrency (DL-02).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createDeliveryHost,
  peakConcurrency,
  readEvents,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';

type DeliveryHost = Awaited<ReturnType<typeof createDeliveryHost>>;

const logFile = (name: string) => path.join(mkdtempSync(path.join(tmpdir(), 'tf-loop-')), `${name}.jsonl`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * Worker code: a batch of the backlog waits until `overlap` handlers have started after the first
 * message's (or 30 s passed), then 2 s more; the first message's batch only waits 2 s.
 */
const overlapThen2s = (overlap: number) => `
  const { readFileSync } = await import('node:fs');
  const first = new TextDecoder().decode(batch.messages[0].body) === 'first';
  const started = () => readFileSync(log, 'utf8').split('\\n').filter((l) => l.includes('"ev":"start"')).length;
  for (const until = Date.now() + 30_000; !first && Date.now() < until && started() < ${overlap} + 1; )
    await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 2_000));`;

/** Long enough that no test here sees a supervisor round after the first: only the loop acts. */
const NO_SUPERVISOR = { supervisorMs: 3_600_000 };

describe('one control loop: scale up, shed, wake on send', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    // A worker timeout well above the scale test's barrier (≤ 30 s + 2 s): no handler is cut off.
    d = await createDeliveryHost({ workerTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    await d.close();
  });
  // Each test counts its own dispatcher's lanes: an earlier test's dispatcher (its supervisor
  // round every second) would otherwise start lanes for this test's backlog in its own count.
  beforeEach(async () => {
    await d.stopDispatchers();
  });

  for (const maxConcurrency of [3, 60]) {
    it(`DL-02 a consumer started for one message scales to maxConcurrency ${maxConcurrency} under a later backlog, never above it, and sheds its lanes when idle`, async () => {
      const log = logFile(`scale-${maxConcurrency}`);
      const { queue, consumerUid } = await d.setup(
        `scale${maxConcurrency}`,
        // Each handler waits (at most 30 s) until `overlap` handlers have started, then 2 s more:
        // overlapping handlers then prove the lanes, whatever the machine's load.
        recordingWorker(log, overlapThen2s(maxConcurrency > 40 ? 41 : maxConcurrency)),
        { maxBatchSize: 1, maxConcurrency, maxRetries: 5 },
      );
      const lanes = d.startDispatcher(NO_SUPERVISOR);
      // One message: one lane, woken by the send.
      await d.host.producer.send(queue, 'first');
      await waitFor('the first delivery', () => readEvents(log).some((e) => e.ev === 'end'));
      expect(peakConcurrency(readEvents(log))).toBe(1);

      // A backlog far larger than maxConcurrency batches.
      const total = maxConcurrency * 8;
      for (let sent = 0; sent < total; sent += 100) {
        const n = Math.min(100, total - sent);
        await d.host.producer.sendBatch(
          queue,
          Array.from({ length: n }, (_, i) => ({ body: `m${sent + i}` })),
        );
      }
      const backlogAt = Date.now();
      let peakSlots = 0;
      let peakLanes = 0;
      let fullAt: number | undefined;
      await waitFor(
        'the backlog drained',
        async () => {
          const held = Object.keys(await d.host.delivery.slotsOf(consumerUid)).length;
          if (held === maxConcurrency) fullAt ??= Date.now();
          peakSlots = Math.max(peakSlots, held);
          peakLanes = Math.max(peakLanes, lanes.running().length);
          return readEvents(log).filter((e) => e.ev === 'msg').length >= total + 1;
        },
        120_000,
      );
      const events = readEvents(log);
      console.info(
        `maxConcurrency ${maxConcurrency}: all slots held ${fullAt === undefined ? 'never' : `${fullAt - backlogAt} ms`} after the backlog was sent`,
      );
      // Every slot taken, never more (DL-02); handlers overlap past the Inline Map's 40 where the
      // bound allows it (a slot also covers receiving, registering and finalising).
      expect(peakSlots).toBe(maxConcurrency);
      expect(peakConcurrency(events)).toBeLessThanOrEqual(maxConcurrency);
      expect(peakConcurrency(events)).toBeGreaterThanOrEqual(maxConcurrency > 40 ? 41 : maxConcurrency);
      // Every message once (nothing lost, nothing duplicated on this clean run).
      const bodies = events
        .filter((e) => e.ev === 'msg')
        .map((e) => Buffer.from(e.body ?? '', 'base64').toString());
      expect(new Set(bodies).size).toBe(total + 1);

      // Idle: every lane ends after its idle wait; no slot is left.
      await waitFor('every lane ended', () => lanes.running().length === 0, 30_000);
      expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});
      expect(peakLanes).toBeGreaterThanOrEqual(maxConcurrency);
      // No execution came near the history limit, and none failed.
      const stats = lanes.stats();
      expect(stats.failed).toBe(0);
      expect(stats.maxHistoryEvents).toBeLessThan(25_000);
    }, 180_000);
  }

  it('a send through the Host wakes a consumer whose lanes have all ended: delivered within maxBatchTimeoutSeconds + 1 s, with no supervisor round', async () => {
    const log = logFile('wake');
    const { queue, consumerUid } = await d.setup('wake', recordingWorker(log), {
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 1,
      maxConcurrency: 2,
    });
    const lanes = d.startDispatcher(NO_SUPERVISOR);
    await d.host.producer.send(queue, 'warm-up');
    await waitFor('the warm-up', () => readEvents(log).some((e) => e.ev === 'end'));
    // Idle: the lane ends after its idle wait (1 s here), and nothing runs for the consumer.
    await waitFor('the lane ended', () => lanes.running().length === 0, 30_000);
    await sleep(3_000);
    expect(lanes.running()).toEqual([]);
    expect(await d.host.delivery.slotsOf(consumerUid)).toEqual({});

    const latencies: number[] = [];
    for (let i = 0; i < 3; i++) {
      const sentAt = Date.now();
      await d.host.producer.send(queue, `wake-${i}`);
      await waitFor(`wake ${i}`, () =>
        readEvents(log).some(
          (e) => e.ev === 'msg' && Buffer.from(e.body ?? '', 'base64').toString() === `wake-${i}`,
        ),
      );
      const at = readEvents(log).find(
        (e) => e.ev === 'msg' && Buffer.from(e.body ?? '', 'base64').toString() === `wake-${i}`,
      )?.t as number;
      latencies.push(at - sentAt);
      await waitFor('the lane ended again', () => lanes.running().length === 0, 30_000);
    }
    console.info(
      `wake on send: send → handler ${latencies.map((ms) => `${ms} ms`).join(', ')} (no lane running)`,
    );
    // maxBatchTimeoutSeconds (1 s) + 1 s.
    for (const ms of latencies) expect(ms).toBeLessThan(2_000);
  }, 90_000);

  it('a send racing a lane’s idle end is not left for the supervisor (the wake count)', async () => {
    const log = logFile('race');
    const { queue } = await d.setup('race', recordingWorker(log), { maxBatchSize: 1, maxConcurrency: 1 });
    d.startDispatcher(NO_SUPERVISOR);
    // Sends spread over several idle-wait ends: each lands before, during or just after one.
    for (let i = 0; i < 12; i++) {
      await d.host.producer.send(queue, `r${i}`);
      await sleep(250 + ((i * 137) % 900));
    }
    await waitFor(
      'every message delivered',
      () => readEvents(log).filter((e) => e.ev === 'msg').length >= 12,
      20_000,
    );
  }, 60_000);

  it('the supervisor round starts lanes for messages sent straight to SQS (no wake)', async () => {
    const log = logFile('direct');
    const { queue } = await d.setup('direct', recordingWorker(log), { maxBatchSize: 10, maxConcurrency: 2 });
    const { SendMessageCommand } = await import('@aws-sdk/client-sqs');
    d.startDispatcher({ supervisorMs: 1_000 });
    await d.host.sqs.send(new SendMessageCommand({ QueueUrl: queue.sqsUrl, MessageBody: 'raw' }));
    await waitFor('the raw message', () => readEvents(log).some((e) => e.ev === 'msg'), 10_000);
  }, 30_000);

  it('DL-02 a supervisor round’s lanes are a cohort: they cover the backlog, so their first batches start no further lanes', async () => {
    const log = logFile('cohort');
    const maxConcurrency = 30;
    const { queue, consumerUid } = await d.setup(
      'cohort',
      // Handlers of 3 s: the round's first batches have all started before any second one.
      recordingWorker(log, 'await new Promise((r) => setTimeout(r, 3_000));'),
      { maxBatchSize: 1, maxConcurrency },
    );
    const { SendMessageBatchCommand } = await import('@aws-sdk/client-sqs');
    // Two batches per slot, sent straight to SQS: no wake, the supervisor's first round finds them.
    const total = maxConcurrency * 2;
    for (let sent = 0; sent < total; sent += 10) {
      await d.host.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queue.sqsUrl,
          Entries: Array.from({ length: 10 }, (_, i) => ({ Id: `m${i}`, MessageBody: `m${sent + i}` })),
        }),
      );
    }
    const lanes = d.startDispatcher(NO_SUPERVISOR);
    // Once the round's 30 first batches run, every one of them has registered (and started any
    // lane it would start, before its handler).
    await waitFor(
      'the round’s first batches running',
      () => readEvents(log).filter((e) => e.ev === 'start').length >= maxConcurrency,
      30_000,
    );
    // One execution per slot: the round's 30. Before cohorts, each lane whose take saw the others'
    // slots still free started one more lane from its first full batch, only to find every slot
    // taken (measured: 46 such starts for a round of 50).
    expect(lanes.stats().started).toBe(maxConcurrency);
    // (Later batches may start lanes again where a slot frees, as any full batch does.)
    let peakSlots = 0;
    await waitFor(
      'the backlog drained',
      async () => {
        peakSlots = Math.max(peakSlots, Object.keys(await d.host.delivery.slotsOf(consumerUid)).length);
        return readEvents(log).filter((e) => e.ev === 'msg').length >= total;
      },
      60_000,
    );
    await waitFor('every lane ended', () => lanes.running().length === 0, 30_000);
    expect(peakSlots).toBe(maxConcurrency);
    expect(peakConcurrency(readEvents(log))).toBeLessThanOrEqual(maxConcurrency);
  }, 120_000);
});
