/**
 * A consumer with a backlog, updated while its handlers run, goes on delivering at its new
 * settings within seconds — not at the supervisor's next round — and from the update's success
 * on never runs more batches than the new maxConcurrency (DL-02). Runs the local Host's control
 * loop at its default timings (a supervisor round a minute, a 10 s idle wait), through the real
 * dispatcher definition, with the update made through the Host API and applied by the executor.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createDeliveryHost,
  type DeliveryHost,
  recordingWorker,
  waitFor,
} from '../../support/delivery-harness.ts';
import { type Rec, records } from './delivery-kit.ts';

/** The local Host's defaults: a supervisor round every 60 s, a 10 s idle wait. */
const SUPERVISOR_MS = 60_000;
const IDLE_WAIT_SECONDS = 10;
const WORKER_TIMEOUT_MS = 30_000;

/**
 * Each handler keeps itself running until `target` handlers run (a file the test writes; bounded),
 * then 1.5 s more: it never starts another, it only lets the test see whether the Host does.
 */
const holdUntilTarget = (target: string) => `
  { const { readFileSync } = await import('node:fs');
    const count = (text, key) => text.split(key).length - 1;
    const running = () => { const t = readFileSync(log, 'utf8'); return count(t, '"ev":"start"') - count(t, '"ev":"end"'); };
    const until = Date.now() + 20_000;
    while (Date.now() < until && running() < Number(readFileSync(${JSON.stringify(target)}, 'utf8'))) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 1_500)); }`;

/** Batches running by the handlers' own records, just before each start at or after `from`. */
function runningAtStarts(events: Rec[], from: number): { t: number; before: number }[] {
  let running = 0;
  const out: { t: number; before: number }[] = [];
  for (const e of events) {
    if (e.ev === 'start') {
      if (e.t >= from) out.push({ t: e.t, before: running });
      running++;
    }
    if (e.ev === 'end') running--;
  }
  return out;
}

const runningNow = (events: Rec[]) =>
  events.filter((e) => e.ev === 'start').length - events.filter((e) => e.ev === 'end').length;

describe('an update of a busy consumer (DL-02, default timings)', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost({
      workerTimeoutMs: WORKER_TIMEOUT_MS,
      graceMs: 5_000,
      idleWaitSeconds: IDLE_WAIT_SECONDS,
    });
  });
  afterAll(async () => d.close());

  /** Updates the consumer's maxConcurrency through the Host API; resolves at the update's success. */
  async function updateTo(consumerUid: string, maxConcurrency: number): Promise<number> {
    const current = await d.host.request({ path: `/resources/${consumerUid}` });
    const spec = { ...(current.body.spec as Record<string, unknown>), maxConcurrency };
    const put = await d.host.request({
      method: 'PUT',
      path: `/resources/${consumerUid}`,
      body: { spec },
      headers: {
        'idempotency-key': d.host.newKey(),
        'takoform-expected-generation': String(current.body.generation),
      },
    });
    if (put.status !== 202) throw new Error(`update answered ${put.status}: ${JSON.stringify(put.body)}`);
    await d.host.settle();
    const after = await d.host.request({ path: `/resources/${consumerUid}` });
    if (after.body.spec.maxConcurrency !== maxConcurrency || after.body.phase !== 'idle') {
      throw new Error(`update not applied: ${JSON.stringify(after.body)}`);
    }
    return Date.now();
  }

  it('DL-02 lowered 30 → 10 with a backlog while 30 handlers run: the next handler starts within 5 s of the update’s success, never while 10 or more run; raised 10 → 30, it reaches 30', async ({
    expect,
  }) => {
    const log = d.logFile('updated');
    const target = `${log}.target`;
    writeFileSync(target, '30');
    const { queue, consumerUid } = await d.setup('updated', recordingWorker(log, holdUntilTarget(target)), {
      maxBatchSize: 1,
      maxConcurrency: 30,
    });
    d.startDispatcher({ supervisorMs: SUPERVISOR_MS });
    for (let i = 0; i < 500; i += 100) {
      await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 100 }, (_, k) => ({ body: `m${i + k}` })),
      );
    }
    await waitFor('30 handlers running', () => runningNow(records(log)) >= 30, 60_000);

    // Lowered while the 30 run: they end within 1.5 s; the new generation's handlers then hold
    // until 10 run, so a Host that started an eleventh would show it.
    writeFileSync(target, '10');
    const lowered = await updateTo(consumerUid, 10);
    const next = await waitFor(
      'a handler started after the update',
      () => records(log).find((e) => e.ev === 'start' && e.t >= lowered),
      SUPERVISOR_MS,
    );
    const afterLowered = next.t - lowered;
    console.info(`DL-02 lowered 30 → 10: next handler ${afterLowered} ms after the update's success`);
    expect(afterLowered).toBeLessThan(5_000);
    await waitFor('10 handlers of the new bound running', () => runningNow(records(log)) >= 10, 20_000);

    // Raised while 10 run: handlers now hold until 30 run.
    writeFileSync(target, '30');
    const raising = Date.now();
    const raised = await updateTo(consumerUid, 30);
    await waitFor('30 handlers running again', () => runningNow(records(log)) >= 30, 30_000);
    const events = records(log);
    const starts = runningAtStarts(events, lowered).filter((s) => s.t < raising);
    expect(starts.length).toBeGreaterThan(0);
    expect(Math.max(...starts.map((s) => s.before))).toBeLessThan(10);
    expect(Math.max(...runningAtStarts(events, raised).map((s) => s.before))).toBeLessThan(30);
    writeFileSync(target, '0');
  });

  it('DL-02 lowered 3 → 1 while two slots of the old generation hold no batch (AcquireSlot steps whose answers were lost): the new generation’s first handler starts within 5 s of the update’s success, one at a time', async ({
    expect,
  }) => {
    const log = d.logFile('orphaned');
    const { queue, consumerUid } = await d.setup(
      'orphaned',
      recordingWorker(log, 'await new Promise((r) => setTimeout(r, 200));'),
      { maxBatchSize: 1, maxConcurrency: 3 },
    );
    d.startDispatcher({ supervisorMs: SUPERVISOR_MS });
    // Two AcquireSlot steps ran and took a slot each while their callers saw Lambda.ServiceException
    // (the state machine's retry took others): nothing knows these slots until their deadline.
    for (let i = 0; i < 2; i++) {
      const lost = await d.host.delivery.acquire(consumerUid, 1);
      expect(lost.status).toBe('acquired');
    }
    // A send wakes no lane while slots look like lanes receiving: the backlog waits for the update.
    await d.host.producer.sendBatch(
      queue,
      Array.from({ length: 4 }, (_, k) => ({ body: `o${k}` })),
    );
    const lowered = await updateTo(consumerUid, 1);
    const next = await waitFor(
      'a handler started after the update',
      () => records(log).find((e) => e.ev === 'start' && e.t >= lowered),
      15_000,
    ).catch(() => undefined);
    expect(next, 'no handler started within 15 s of the update’s success').toBeDefined();
    const afterLowered = (next?.t ?? Number.POSITIVE_INFINITY) - lowered;
    console.info(
      `DL-02 lowered 3 → 1 beside lost slots: next handler ${afterLowered} ms after the update's success`,
    );
    expect(afterLowered).toBeLessThan(5_000);
    await waitFor(
      'the 4 messages delivered',
      () => records(log).filter((e) => e.ev === 'end').length >= 4,
      20_000,
    );
    const events = records(log);
    expect(Math.max(...runningAtStarts(events, 0).map((s) => s.before))).toBe(0);
    // The lost slots counted no attempt: each message was delivered once, as its first attempt.
    expect(events.filter((e) => e.ev === 'msg').map((e) => e.attempts)).toEqual([1, 1, 1, 1]);
  });
});
