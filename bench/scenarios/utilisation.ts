/**
 * Concurrency utilisation under a backlog: handlers that take 50 ± 40 ms (uniform), a pre-filled
 * queue, and two views of "concurrent batches ÷ maxConcurrency" over the busy period:
 *
 * - handlers: the worker's own start/end records, integrated over the window from the first
 *   handler start to the last handler start (after that the queue is empty and fewer batches
 *   can run, whatever the dispatcher does);
 * - slots: the consumer's held slots (`dispatchState`, as the control loop reads them) sampled
 *   every 25 ms over the same window, i.e. batches the Host counts as running, including their
 *   receive/register/finalise time.
 */
import { createBenchHost, recordFile } from '../support/bench-host.ts';
import { type CpuSpent, cpuMark, cpuSince } from '../support/cpu.ts';
import { attribute } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { readRecords, round, sleep, until } from '../support/stats.ts';
import { SLEEPING_WORKER } from '../support/workers.ts';

export interface UtilisationSample {
  ok: boolean;
  maxConcurrency: number;
  batchSize: number;
  messages: number;
  batches: number;
  windowMs: number;
  /** Mean running handlers ÷ maxConcurrency over the window. */
  handlerUtilisation: number;
  /** Mean slot-map size ÷ maxConcurrency over the window. */
  slotUtilisation: number;
  slotSampleCount: number;
  /** Raw: each handler's start and end, ms after the first start. */
  handlers: { start: number; end: number }[];
  /** Raw: slot-map size samples, ms after the first handler start. */
  slots: { t: number; n: number }[];
  /** Mean handler time, ms (the worker's own records). */
  meanHandlerMs: number;
  /** Mean time a slot is held per batch (window × mean slots ÷ batches started in it), ms. */
  meanSlotMs: number;
  peakHandlers: number;
  /** CPU of the bench process and the stand-ins from the dispatcher's start to the last message (absent in older results). */
  cpu?: CpuSpent;
}

interface HandlerRecord {
  start: number;
  end: number;
  size: number;
}

export async function utilisationRun(
  endpoints: Endpoints,
  o: { maxConcurrency: number; batchSize: number; messages: number; timeoutMs: number },
): Promise<UtilisationSample> {
  const bench = await createBenchHost(endpoints, { idleWaitSeconds: 1 });
  const records = recordFile('utilisation');
  try {
    const { queue, consumerUid } = await bench.setupConsumer(
      'util',
      SLEEPING_WORKER,
      { maxBatchSize: o.batchSize, maxBatchTimeoutSeconds: 0, maxConcurrency: o.maxConcurrency },
      { RECORDS: records, BASE_MS: 50, JITTER_MS: 40 },
    );
    await bench.prefill(queue, o.messages);
    let delivered = 0;
    bench.onFinalized((n) => {
      delivered += n;
    });
    const samples: { t: number; slots: number }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const t = performance.timeOrigin + performance.now();
        // Through the service, as the control loop reads it, not the store's item layout.
        const state = await attribute('probe', () => bench.host.delivery.dispatchState(consumerUid));
        const slots = Object.keys(state.slots).length;
        samples.push({ t, slots });
        await sleep(25);
      }
    })();
    const cpuAtStart = cpuMark();
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: 1, supervisorMs: 200 });
    const ok = await until(() => delivered >= o.messages, o.timeoutMs, 5);
    const cpu = cpuSince(cpuAtStart);
    sampling = false;
    await sampler;
    await dispatcher.stop(10_000);

    const handlers = readRecords<HandlerRecord>(records);
    const from = Math.min(...handlers.map((h) => h.start));
    const to = Math.max(...handlers.map((h) => h.start));
    const windowMs = to - from;
    let busy = 0;
    for (const h of handlers) busy += Math.max(0, Math.min(h.end, to) - Math.max(h.start, from));
    const inWindow = samples.filter((s) => s.t >= from && s.t <= to);
    const meanSlots = inWindow.reduce((a, s) => a + s.slots, 0) / Math.max(1, inWindow.length);
    const startedInWindow = handlers.filter((h) => h.start < to).length;
    let peak = 0;
    const edges = handlers.flatMap((h) => [
      { t: h.start, d: 1 },
      { t: h.end, d: -1 },
    ]);
    edges.sort((a, b) => a.t - b.t || a.d - b.d);
    let running = 0;
    for (const e of edges) {
      running += e.d;
      peak = Math.max(peak, running);
    }
    return {
      ok,
      maxConcurrency: o.maxConcurrency,
      batchSize: o.batchSize,
      messages: o.messages,
      batches: handlers.length,
      windowMs,
      handlerUtilisation: busy / (windowMs * o.maxConcurrency),
      slotUtilisation: meanSlots / o.maxConcurrency,
      slotSampleCount: inWindow.length,
      handlers: handlers.map((h) => ({ start: round(h.start - from, 2), end: round(h.end - from, 2) })),
      slots: samples.map((x) => ({ t: round(x.t - from, 2), n: x.slots })),
      meanHandlerMs: handlers.reduce((a, h) => a + (h.end - h.start), 0) / Math.max(1, handlers.length),
      meanSlotMs: (windowMs * meanSlots) / Math.max(1, startedInWindow),
      peakHandlers: peak,
      cpu,
    };
  } finally {
    await bench.close();
  }
}
