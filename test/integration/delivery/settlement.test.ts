/**
 * DL-03..DL-05: the settlement matrix, observed from inside real worker threads. Handlers record
 * what each call answered (`Error.name`) and redeliveries show up as higher `attempts`.
 */
import { writeFileSync } from 'node:fs';
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
  batchHead,
  consumerOn,
  customWorker,
  type Rec,
  raiseFlag,
  records,
  serial,
  waitDrained,
  waitForFlag,
} from './delivery-kit.ts';

/** Worker JS: records the rejection name of a settlement call (`resolved` when it resolves). */
const tryCall = (label: string, call: string) =>
  `try { await ${call}; rec({ ev: 'call', label: ${JSON.stringify(label)}, name: 'resolved' }); } catch (e) { rec({ ev: 'call', label: ${JSON.stringify(label)}, name: e.name, type: e instanceof TypeError }); }`;
const FIRST = `batch.messages.every((m) => m.attempts === 1)`;
const text = `const text = (m) => new TextDecoder().decode(m.body);`;

describe.concurrent('DL-03..DL-05 settlement', () => {
  let d: DeliveryHost;
  beforeAll(async () => {
    d = await createDeliveryHost();
    d.startDispatcher();
  });
  afterAll(async () => d.close());

  /** A queue holding `bodies`, then a consumer taking them as one batch (retries at once). */
  async function scenario(
    name: string,
    source: (log: string) => string,
    bodies: string[],
    opts: { maxBatchSize?: number; beforeAttach?: (ids: string[]) => void } = {},
  ) {
    const log = d.logFile(name);
    const queue = await serial(() => d.createQueue('team', `${name}-q`));
    const ids =
      bodies.length === 1
        ? [await d.host.producer.send(queue, bodies[0] as string)]
        : await d.host.producer.sendBatch(
            queue,
            bodies.map((body) => ({ body })),
          );
    const byBody = Object.fromEntries(bodies.map((b, i) => [b, ids[i] as string]));
    opts.beforeAttach?.(ids);
    await serial(() =>
      consumerOn(d, name, queue, source(log), {
        maxBatchSize: opts.maxBatchSize ?? bodies.length,
        maxBatchTimeoutSeconds: 1,
        maxConcurrency: 1,
        maxRetries: 3,
        retryDelaySeconds: 0,
      }),
    );
    /** Waits until every message is gone from SQS (acknowledged) and every handler ended. */
    const finish = async () => {
      await waitDrained(d, queue);
      return waitFor(`${name} handlers ended`, () => {
        const e = records(log);
        return allEnded(e) ? e : undefined;
      });
    };
    return { log, queue, ids, byBody, finish };
  }
  const calls = (e: Rec[]) =>
    Object.fromEntries(e.filter((x) => x.ev === 'call').map((x) => [x.label, x.name]));

  it('DL-03 acknowledge then retry: the retry rejects already_settled; the ack is durable once resolved and stands', async ({
    expect,
  }) => {
    const flag = `${d.logFile('ack-retry')}.go`;
    const s = await scenario(
      'ack-retry',
      (log) =>
        recordingWorker(
          log,
          `if (${FIRST}) {
            const m = batch.messages[0];
            ${tryCall('ack', 'batch.acknowledge(m.id)')}
            rec({ ev: 'acked', batch: batch.batchId });
            ${waitForFlag(flag)}
            ${tryCall('ack again', 'batch.acknowledge(m.id)')}
            ${tryCall('retry', 'batch.retry(m.id)')}
            ${tryCall('retry with delay', 'batch.retry(m.id, 0)')}
            ${tryCall('retryAll', 'batch.retryAll()')}
            throw new Error('a throw after the ack does not undo it');
          }`,
        ),
      ['one'],
    );
    const acked = await waitFor('the ack resolved', () => records(s.log).find((e) => e.ev === 'acked'));
    // A resolved acknowledge means the settlement is already recorded (the handler still runs).
    const head = await batchHead(d, acked.batch as string);
    expect(head?.closed).toBe(false);
    expect(head?.settled).toEqual({ '0': 'a' });
    raiseFlag(flag);
    const events = await s.finish();
    expect(calls(events)).toEqual({
      ack: 'resolved',
      'ack again': 'already_settled',
      retry: 'already_settled',
      'retry with delay': 'already_settled',
      retryAll: 'resolved', // nothing left to settle; it reverses nothing
    });
    expect(attemptsById(events).get(s.ids[0] as string)).toEqual([1]);
  });

  it('DL-03 retry then acknowledge: the ack rejects already_settled and the message comes back with attempts 2', async ({
    expect,
  }) => {
    const s = await scenario(
      'retry-ack',
      (log) =>
        recordingWorker(
          log,
          `if (${FIRST}) {
            const m = batch.messages[0];
            ${tryCall('retry', 'batch.retry(m.id)')}
            ${tryCall('ack', 'batch.acknowledge(m.id)')}
            ${tryCall('ackAll', 'batch.acknowledgeAll()')}
          }`,
        ),
      ['one'],
    );
    const events = await s.finish();
    expect(calls(events)).toEqual({ retry: 'resolved', ack: 'already_settled', ackAll: 'resolved' });
    expect(attemptsById(events).get(s.ids[0] as string)).toEqual([1, 2]);
  });

  it('DL-04 acknowledgeAll after some retries: the retried come back, the others do not', async ({
    expect,
  }) => {
    const s = await scenario(
      'ackall',
      (log) =>
        recordingWorker(
          log,
          `${text}
          if (${FIRST}) {
            for (const m of batch.messages) if (text(m).startsWith('r')) await batch.retry(m.id);
            ${tryCall('ackAll', 'batch.acknowledgeAll()')}
            const r = batch.messages.find((m) => text(m).startsWith('r'));
            const a = batch.messages.find((m) => text(m).startsWith('a'));
            ${tryCall('ack a retried one', 'batch.acknowledge(r.id)')}
            ${tryCall('retry an acked one', 'batch.retry(a.id)')}
            ${tryCall('retryAll', 'batch.retryAll()')}
          }`,
        ),
      ['r0', 'r1', 'a2', 'a3'],
    );
    const events = await s.finish();
    expect(events.find((e) => e.ev === 'start')?.size).toBe(4);
    expect(calls(events)).toEqual({
      ackAll: 'resolved',
      'ack a retried one': 'already_settled',
      'retry an acked one': 'already_settled',
      retryAll: 'resolved',
    });
    const a = attemptsById(events);
    expect(a.get(s.byBody.r0 as string)).toEqual([1, 2]);
    expect(a.get(s.byBody.r1 as string)).toEqual([1, 2]);
    expect(a.get(s.byBody.a2 as string)).toEqual([1]);
    expect(a.get(s.byBody.a3 as string)).toEqual([1]);
  });

  it('DL-04 DL-06 retryAll(2) after an ack: the rest come back after 2 s; the ack and later calls are not reversed', async ({
    expect,
  }) => {
    const s = await scenario(
      'retryall',
      (log) =>
        recordingWorker(
          log,
          `${text}
          if (${FIRST}) {
            const k = batch.messages.find((m) => text(m) === 'k0');
            const x = batch.messages.find((m) => text(m) === 'x1');
            await batch.acknowledge(k.id);
            rec({ ev: 'retryAll', at: Date.now() });
            ${tryCall('retryAll', 'batch.retryAll(2)')}
            ${tryCall('ack after retryAll', 'batch.acknowledge(x.id)')}
            ${tryCall('ackAll after retryAll', 'batch.acknowledgeAll()')}
          }`,
        ),
      ['k0', 'x1', 'x2'],
    );
    const events = await s.finish();
    expect(calls(events)).toEqual({
      retryAll: 'resolved',
      'ack after retryAll': 'already_settled',
      'ackAll after retryAll': 'resolved',
    });
    const a = attemptsById(events);
    expect(a.get(s.byBody.k0 as string)).toEqual([1]);
    expect(a.get(s.byBody.x1 as string)).toEqual([1, 2]);
    expect(a.get(s.byBody.x2 as string)).toEqual([1, 2]);
    const calledAt = events.find((e) => e.ev === 'retryAll')?.at as number;
    const back = events.filter((e) => e.ev === 'msg' && e.attempts === 2).map((e) => e.t);
    expect(Math.min(...back) - calledAt).toBeGreaterThanOrEqual(2_000);
  });

  it('DL-05 a throw after partial acks: the acked stay acknowledged, the rest are retried', async ({
    expect,
  }) => {
    const s = await scenario(
      'throw',
      (log) =>
        recordingWorker(
          log,
          `${text}
          if (${FIRST}) {
            for (const m of batch.messages) if (text(m).startsWith('a')) await batch.acknowledge(m.id);
            throw new Error('fails after acknowledging some');
          }`,
        ),
      ['a0', 'a1', 'x2'],
    );
    const events = await s.finish();
    const a = attemptsById(events);
    expect(a.get(s.byBody.a0 as string)).toEqual([1]);
    expect(a.get(s.byBody.a1 as string)).toEqual([1]);
    expect(a.get(s.byBody.x2 as string)).toEqual([1, 2]);
  });

  it('DL-05 a returned rejected Promise (non-async handler): the acked stay acknowledged, the rest are retried', async ({
    expect,
  }) => {
    const s = await scenario(
      'reject',
      (log) =>
        customWorker(
          log,
          `queue(batch) {
            recStart(batch);
            const end = () => rec({ ev: 'end', batch: batch.batchId });
            if (!${FIRST}) { end(); return undefined; }
            const acks = batch.messages.filter((m) => new TextDecoder().decode(m.body).startsWith('a'));
            return Promise.all(acks.map((m) => batch.acknowledge(m.id))).then(() => {
              end();
              return Promise.reject(new Error('rejected after acknowledging some'));
            });
          },`,
        ),
      ['a0', 'x1', 'x2'],
    );
    const events = await s.finish();
    const a = attemptsById(events);
    expect(a.get(s.byBody.a0 as string)).toEqual([1]);
    expect(a.get(s.byBody.x1 as string)).toEqual([1, 2]);
    expect(a.get(s.byBody.x2 as string)).toEqual([1, 2]);
  });

  it('DL-05 a synchronous throw right after an unawaited acknowledge: the ack (resolved) stands, the rest are retried', async ({
    expect,
  }) => {
    const s = await scenario(
      'sync-throw',
      (log) =>
        customWorker(
          log,
          `queue(batch) {
            recStart(batch);
            const end = () => rec({ ev: 'end', batch: batch.batchId });
            if (!${FIRST}) { end(); return undefined; }
            for (const m of batch.messages) {
              if (new TextDecoder().decode(m.body).startsWith('a'))
                batch.acknowledge(m.id).then(() => rec({ ev: 'call', label: 'ack', name: 'resolved' }), (e) => rec({ ev: 'call', label: 'ack', name: e.name }));
            }
            end();
            throw new Error('synchronous');
          },`,
        ),
      ['a0', 'x1'],
    );
    const events = await s.finish();
    expect(calls(events)).toEqual({ ack: 'resolved' });
    const a = attemptsById(events);
    expect(a.get(s.byBody.a0 as string)).toEqual([1]);
    expect(a.get(s.byBody.x1 as string)).toEqual([1, 2]);
  });

  it('DL-03 ids outside the batch reject unknown_message and settle nothing', async ({ expect }) => {
    const idsFile = `${d.logFile('unknown-id')}.ids`;
    const s = await scenario(
      'unknown-id',
      (log) =>
        recordingWorker(
          log,
          `const { readFileSync } = await import('node:fs');
          const mine = batch.messages[0].id;
          const other = JSON.parse(readFileSync(${JSON.stringify(idsFile)}, 'utf8')).find((id) => id !== mine);
          if (${FIRST}) {
            ${tryCall("another batch's message (ack)", 'batch.acknowledge(other)')}
            ${tryCall("another batch's message (retry)", 'batch.retry(other, 5)')}
            ${tryCall('an invented id (ack)', `batch.acknowledge('m-not-in-this-batch')`)}
            ${tryCall('an invented id (retry)', `batch.retry('x'.repeat(256))`)}
          }`,
        ),
      ['one', 'two'],
      // One message per batch: the other message is a real id of this queue, in another batch.
      { maxBatchSize: 1, beforeAttach: (ids) => writeFileSync(idsFile, JSON.stringify(ids)) },
    );
    const events = await s.finish();
    const names = events.filter((e) => e.ev === 'call').map((e) => `${e.label}: ${e.name}`);
    expect(names).toHaveLength(8); // four calls in each of the two batches
    expect(names.every((n) => n.endsWith(': unknown_message'))).toBe(true);
    // Nothing of it settled the other message: each was delivered once and acknowledged by its own return.
    expect(attemptsById(events)).toEqual(new Map(s.ids.map((id) => [id, [1]])));
  });

  it('DL-03 DL-04 bad arguments reject with a TypeError (never a synchronous throw) and settle nothing', async ({
    expect,
  }) => {
    const bad = [
      ['acknowledge(42)', 'batch.acknowledge(42)'],
      ['acknowledge()', 'batch.acknowledge()'],
      ['acknowledge({})', 'batch.acknowledge({})'],
      ['retry(42)', 'batch.retry(42)'],
      ['retry(id, -1)', 'batch.retry(m.id, -1)'],
      ['retry(id, 1.5)', 'batch.retry(m.id, 1.5)'],
      ['retry(id, 43201)', 'batch.retry(m.id, 43201)'],
      ["retry(id, '5')", "batch.retry(m.id, '5')"],
      ['retry(id, NaN)', 'batch.retry(m.id, NaN)'],
      ['retry(id, null)', 'batch.retry(m.id, null)'],
      ['retryAll(-1)', 'batch.retryAll(-1)'],
      ['retryAll(0.5)', 'batch.retryAll(0.5)'],
      ["retryAll('1')", "batch.retryAll('1')"],
      ['retryAll(Infinity)', 'batch.retryAll(Infinity)'],
    ];
    const s = await scenario(
      'bad-args',
      (log) =>
        recordingWorker(
          log,
          `const m = batch.messages[0];
          const probe = (label, f) => {
            let p;
            try { p = f(); } catch (e) { rec({ ev: 'call', label, name: 'sync ' + e.name }); return; }
            return p.then(() => rec({ ev: 'call', label, name: 'resolved' }), (e) => rec({ ev: 'call', label, name: e.name, type: e instanceof TypeError }));
          };
          if (${FIRST}) {
            ${bad.map(([label, call]) => `await probe(${JSON.stringify(label)}, () => ${call});`).join(' ')}
          }`,
        ),
      ['one'],
    );
    const events = await s.finish();
    const got = events.filter((e) => e.ev === 'call');
    expect(Object.fromEntries(got.map((e) => [e.label, e.name]))).toEqual(
      Object.fromEntries(bad.map(([label]) => [label, 'TypeError'])),
    );
    expect(got.every((e) => e.type === true)).toBe(true);
    // None of them settled anything: the normal return acknowledged the message, delivered once.
    expect(attemptsById(events).get(s.ids[0] as string)).toEqual([1]);
  });

  it('DL-03 calls after the handler returned (a timer not covered by waitUntil) reject unknown_batch and change nothing', async ({
    expect,
  }) => {
    const s = await scenario(
      'late',
      (log) =>
        recordingWorker(
          log,
          `const m = batch.messages[0];
          if (${FIRST}) {
            setTimeout(async () => {
              ${tryCall('late retry', 'batch.retry(m.id)')}
              ${tryCall('late retryAll', 'batch.retryAll()')}
              ${tryCall('late ack', 'batch.acknowledge(m.id)')}
            }, 300);
          }`,
        ),
      ['one'],
    );
    await s.finish();
    const events = await waitFor('the late calls answered', () => {
      const e = records(s.log);
      return e.filter((x) => x.ev === 'call').length === 3 ? e : undefined;
    });
    expect(calls(events)).toEqual({
      'late retry': 'unknown_batch',
      'late retryAll': 'unknown_batch',
      'late ack': 'unknown_batch',
    });
    // The return acknowledged it; the late retry did not bring it back.
    expect(attemptsById(events).get(s.ids[0] as string)).toEqual([1]);
  });

  it('DL-03 MW-03 a settlement inside ctx.waitUntil after the handler returned is honoured', async ({
    expect,
  }) => {
    const s = await scenario(
      'wait-until',
      (log) =>
        recordingWorker(
          log,
          `const m = batch.messages[0];
          if (${FIRST}) {
            ctx.waitUntil(new Promise((r) => setTimeout(r, 300)).then(async () => {
              ${tryCall('retry in waitUntil', 'batch.retry(m.id)')}
            }));
          }`,
        ),
      ['one'],
    );
    const events = await s.finish();
    expect(calls(events)).toEqual({ 'retry in waitUntil': 'resolved' });
    // The retry counted although the handler had returned: the message came back.
    expect(attemptsById(events).get(s.ids[0] as string)).toEqual([1, 2]);
  });
});
