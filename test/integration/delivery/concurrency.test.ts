/**
 * DL-02: at no moment do more than `maxConcurrency` batches of one consumer run (across
 * dispatcher executions and restarts), and with a backlog the consumer reaches `maxConcurrency`.
 * Concurrency is measured from the handlers' own start/end records (`peakConcurrency`), never from
 * the Host's bookkeeping. Each test has a Host of its own, so they run side by side.
 */
import { describe, it } from 'vitest';
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
  peak,
  type Rec,
  records,
  storeOf,
  waitDrained,
} from './delivery-kit.ts';

const SLEEP = `await new Promise((r) => setTimeout(r, 100 + Math.floor(Math.random() * 100)));`;

/**
 * A handler that stays running until `n` handlers have started in total (or a bound passed),
 * then a little longer; once n have started it no longer waits. It only ever keeps itself alive:
 * whether the Host starts the others is what the test measures (a Host running fewer than n at
 * once leaves it waiting out the bound with a peak below n; one running more shows a peak above
 * n). On cores shared with other suites, a plain short sleep may end before the next lane has
 * even started its batch, so "reaches n" would depend on the load rather than on the Host.
 */
const holdUntilStarted = (n: number, boundMs: number) => `
  { const { readFileSync } = await import('node:fs');
    const until = Date.now() + ${boundMs};
    while (Date.now() < until) {
      const starts = readFileSync(log, 'utf8').split('\\n').filter((l) => l.includes('"ev":"start"')).length;
      if (starts >= ${n}) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 150)); }`;

/**
 * Nothing failed, so every message is delivered exactly once, with attempts 1: those that were
 * not, with their attempts (a failure then says whether it was a second delivery or a count).
 */
const notOnceEach = (events: Rec[]) =>
  [...attemptsById(events)].filter(([, a]) => a.length !== 1 || a[0] !== 1);

/**
 * A Host of its own for one test, closed after it. The worker bound is generous unless a test
 * needs it short: it counts from before a thread starts, which on loaded cores takes a while,
 * and a handler cut off by it leaves a start without an end.
 */
async function withHost<T>(
  opts: Parameters<typeof createDeliveryHost>[0],
  fn: (d: DeliveryHost) => Promise<T>,
): Promise<T> {
  const d = await createDeliveryHost(opts);
  try {
    return await fn(d);
  } finally {
    await d.close();
  }
}

/** A backlog of `messages` on a new queue, then a consumer on it; waits until all is acknowledged. */
async function run(
  d: DeliveryHost,
  name: string,
  opts: { messages: number; maxBatchSize: number; maxConcurrency: number; body: string },
) {
  const log = d.logFile(name);
  const queue = await d.createQueue('team', `${name}-q`);
  const ids: string[] = [];
  for (let i = 0; i < opts.messages; i += 100) {
    const n = Math.min(100, opts.messages - i);
    ids.push(
      ...(await d.host.producer.sendBatch(
        queue,
        Array.from({ length: n }, (_, k) => ({ body: `m${i + k}` })),
      )),
    );
  }
  await consumerOn(d, name, queue, recordingWorker(log, opts.body), {
    maxBatchSize: opts.maxBatchSize,
    maxConcurrency: opts.maxConcurrency,
  });
  await waitFor(
    `${name}: all ${opts.messages} delivered`,
    () => attemptsById(records(log)).size >= opts.messages,
    60_000,
  );
  await waitDrained(d, queue);
  // Acknowledged means deleted; the record is complete once the last handler has ended.
  const events = await waitFor(`${name}: handlers ended`, () => {
    const e = records(log);
    return allEnded(e) ? e : undefined;
  });
  return { events, ids };
}

describe.concurrent('DL-02 concurrency per consumer', () => {
  it('DL-02 maxConcurrency 3 with 200 messages: exactly 3 batches run at once at the peak', async ({
    expect,
  }) => {
    await withHost({ workerTimeoutMs: 20_000 }, async (d) => {
      d.startDispatcher();
      const { events, ids } = await run(d, 'c3', {
        messages: 200,
        maxBatchSize: 10,
        maxConcurrency: 3,
        body: holdUntilStarted(3, 6_000) + SLEEP,
      });
      expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
      expect(notOnceEach(events)).toEqual([]);
      expect(peak(events)).toBe(3);
    });
  });

  it('DL-02 maxConcurrency 1: batches never overlap', async ({ expect }) => {
    await withHost({ workerTimeoutMs: 20_000 }, async (d) => {
      d.startDispatcher();
      const { events, ids } = await run(d, 'c1', {
        messages: 20,
        maxBatchSize: 2,
        maxConcurrency: 1,
        body: SLEEP,
      });
      expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
      expect(notOnceEach(events)).toEqual([]);
      expect(peak(events)).toBe(1);
    });
  });

  it('DL-02 maxConcurrency 50 with a backlog of single-message batches reaches exactly 50', async ({
    expect,
  }) => {
    // A long worker bound: starting 50 worker threads on 2 busy cores takes seconds.
    await withHost({ workerTimeoutMs: 30_000 }, async (d) => {
      d.startDispatcher();
      const { events, ids } = await run(d, 'c50', {
        messages: 60,
        maxBatchSize: 1,
        maxConcurrency: 50,
        body: holdUntilStarted(50, 25_000),
      });
      expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
      expect(notOnceEach(events)).toEqual([]);
      expect(events.filter((e) => e.ev === 'start').every((e) => e.size === 1)).toBe(true);
      expect(peak(events)).toBe(50);
    });
  });

  it.for([
    ['one slot map item', 0],
    ['one item per slot (three shards, lanes in each)', 1],
  ] as const)(
    'DL-02 two dispatchers driving one consumer (duplicate executions) still never exceed 3: %s',
    async ([, slotsPerShard], { expect }) => {
      await withHost({ workerTimeoutMs: 20_000, ...(slotsPerShard ? { slotsPerShard } : {}) }, async (d) => {
        d.startDispatcher();
        d.startDispatcher(); // a second execution of the same consumer generation: 6 lanes for 3 slots
        const { events, ids } = await run(d, `c3dup${slotsPerShard ?? ''}`, {
          messages: 100,
          maxBatchSize: 5,
          maxConcurrency: 3,
          body: holdUntilStarted(3, 6_000) + SLEEP,
        });
        expect(new Set(attemptsById(events).keys())).toEqual(new Set(ids));
        expect(notOnceEach(events)).toEqual([]);
        expect(peak(events)).toBe(3);
      });
    },
  );

  it('DL-02 RC-01 maxConcurrency 3 across a crash and restart: peak ≤ 3 throughout (dead batches keep their slots); every message is acknowledged', async ({
    expect,
  }) => {
    // Small bounds so that the cut-off batches' slots expire soon: deadline = acquire + idle wait
    // (1 s) + batch timeout (0) + worker timeout (6 s) + the service's fixed 30 s margin; their
    // messages stay invisible until deadline + grace (0.5 s). The worker timeout stays well above
    // the handler's 1 s (thread start-up on loaded cores included): a handler cut off by it
    // before the crash would leave a start without an end, counted as still running.
    await withHost({ workerTimeoutMs: 6_000, graceMs: 500 }, async (d) => {
      const log = d.logFile('restart');
      const queue = await d.createQueue('team', 'restart-q');
      const ids = await d.host.producer.sendBatch(
        queue,
        Array.from({ length: 30 }, (_, i) => ({ body: `r${i}` })),
      );
      const { consumerUid } = await consumerOn(
        d,
        'restart',
        queue,
        recordingWorker(log, `await new Promise((r) => setTimeout(r, 1_000));`),
        {
          maxBatchSize: 2,
          maxConcurrency: 3,
        },
      );
      d.startDispatcher();
      const running = (e: Rec[]) =>
        e.filter((x) => x.ev === 'start').length - e.filter((x) => x.ev === 'end').length;
      await waitFor('two batches running', () => running(records(log)) >= 2);
      await d.crash();
      // Every handler thread is gone: the log now holds all the old process did.
      const before = records(log);
      const ended = new Set(before.filter((e) => e.ev === 'end').map((e) => e.batch));
      const cutOff = new Set(
        before.filter((e) => e.ev === 'start' && !ended.has(e.batch)).map((e) => e.batch),
      );
      expect(cutOff.size).toBeGreaterThan(0);
      // The dead process's slots, with their deadlines: the cut-off batches' are among them.
      const slots = await storeOf(d).slots(consumerUid);
      const deadlineOf = (batch: unknown) => slots[batch as string] as number;
      for (const b of cutOff) expect(deadlineOf(b)).toBeGreaterThan(Date.now());
      const firstDeadline = Math.min(...[...cutOff].map(deadlineOf));

      d.startDispatcher();
      // Acknowledged means deleted: wait until SQS holds none of the messages any more.
      await waitDrained(d, queue, 90_000);
      const all = await waitFor('the last handlers ended', () => {
        const e = records(log);
        return allEnded(e.slice(before.length)) ? e : undefined;
      });
      const after = all.slice(before.length);

      expect(peak(before)).toBeLessThanOrEqual(3);
      expect(peak(after)).toBeLessThanOrEqual(3);
      // The cut-off batches keep their slots until their deadline: meanwhile the new dispatcher
      // runs at most 3 − (cut-off batches) at once.
      const whileHeld = after.filter((e) => e.t < firstDeadline);
      expect(peak(whileHeld)).toBeLessThanOrEqual(3 - cutOff.size);
      expect(new Set(attemptsById(all).keys())).toEqual(new Set(ids));

      // Messages of cut-off batches were never taken as acknowledged: they came back only after
      // their batch's slot deadline + grace, with that delivery counted (attempts 2).
      const cutOffMsgs = before.filter((e) => e.ev === 'msg' && cutOff.has(e.batch));
      const redelivered = after.filter((e) => e.ev === 'msg' && cutOffMsgs.some((m) => m.id === e.id));
      expect(new Set(redelivered.map((e) => e.id))).toEqual(new Set(cutOffMsgs.map((m) => m.id)));
      expect(redelivered.every((e) => e.attempts === 2)).toBe(true);
      for (const m of cutOffMsgs) {
        const back = redelivered.find((e) => e.id === m.id) as Rec;
        expect(back.t).toBeGreaterThanOrEqual(deadlineOf(m.batch) + 500);
      }
      // Attempts only grow, and one crash costs at most one extra attempt. (A batch registered
      // just before the crash, whose handler had not started yet, still counts as a delivery:
      // the Host cannot know whether the handler saw it, so its messages may show up first with
      // attempts 2.)
      for (const a of attemptsById(all).values()) {
        expect(a.every((n, i) => i === 0 || n > (a[i - 1] as number))).toBe(true);
        expect(Math.max(...a)).toBeLessThanOrEqual(2);
      }
    });
  });
});
