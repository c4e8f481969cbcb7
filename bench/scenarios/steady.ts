/**
 * Steady stream: producers send at a fixed rate while the consumer drains, instead of a backlog
 * drained at once. After a warm-up the bench opens a measurement window; in it, it counts what
 * the handlers received (achieved throughput), send → handler latency of the messages sent in it
 * (the envelope's send time against the handler's start) and every call the Host made per
 * finalised batch. The baseline, in the same run on the same SQS server, is the raw loop under the
 * same producer: `concurrency` loops that form batches as the Host's runner does (long poll for a
 * first message, then up to maxBatchTimeoutSeconds for the rest), then delete them.
 */
import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { sqsClient } from '../../lambdas/adapters/aws/clients.ts';
import { decodeEnvelope, encodeEnvelope } from '../../lambdas/delivery/envelope.ts';
import { newMessageId } from '../../lambdas/delivery/producer.ts';
import { createBenchHost, FIRST_ROUND_MS, recordFile } from '../support/bench-host.ts';
import { attribute, Meter, type Tally } from '../support/meter.ts';
import { type PaceResult, pace } from '../support/pacer.ts';
import type { Endpoints } from '../support/standins.ts';
import { readRecords, sleep, until } from '../support/stats.ts';
import { STEADY_WORKER } from '../support/workers.ts';
import { type Percentiles, percentiles } from './latency.ts';

export interface SteadySetting {
  /** Messages per second the producer sends. */
  rate: number;
  batchSize: number;
  concurrency: number;
  maxBatchTimeoutSeconds: number;
}

export interface SteadyTiming {
  warmupSeconds: number;
  seconds: number;
  /** How long to wait after the producer stops for what it sent to be handled. */
  drainTimeoutMs: number;
}

interface WindowCounts {
  ok: boolean;
  setting: SteadySetting;
  windowSeconds: number;
  /** Messages whose handler (or the raw loop's batch) started inside the window. */
  delivered: number;
  perSecond: number;
  /** Send → handler of the messages sent inside the window. */
  latency: Percentiles;
  /** Messages sent (in the whole run) that were never handled by the end of the drain. */
  undelivered: number;
  /** Batches finalised (raw loop: deleted) inside the window, and the messages in them. */
  batches: number;
  batchMessages: number;
  producer: PaceResult;
}

export interface SteadyHostSample extends WindowCounts {
  /** Everything the Host spent inside the window (the producer's sends included). */
  tally: Tally;
  /** Each handler's own work, ms (runs before 2026-12-05: none). */
  handlerMs?: number[];
  /** Messages whose send resolved inside the window (runs before 2026-12-05: none). */
  sentInWindow?: number;
}

export interface SteadyBaselineSample extends WindowCounts {
  /** SQS requests of the consumer loops inside the window. */
  receives: number;
  deletes: number;
}

/** What one side counted, turned into the window's figures. */
function windowCounts(o: {
  setting: SteadySetting;
  starts: { at: number; ts: number[] }[];
  window: { from: number; to: number };
  producer: PaceResult;
  /** Messages handled over the whole run, and whether that reached what was sent. */
  handled: number;
  drained: boolean;
  batches: number;
  batchMessages: number;
}): WindowCounts {
  const inWindow = (t: number) => t >= o.window.from && t < o.window.to;
  let delivered = 0;
  const latency: number[] = [];
  for (const s of o.starts) {
    if (inWindow(s.at)) delivered += s.ts.length;
    for (const ts of s.ts) if (inWindow(ts)) latency.push(s.at - ts);
  }
  const windowSeconds = (o.window.to - o.window.from) / 1000;
  return {
    ok: o.drained && o.producer.failed === 0,
    setting: o.setting,
    windowSeconds,
    delivered,
    perSecond: delivered / windowSeconds,
    latency: percentiles(latency),
    undelivered: Math.max(0, o.producer.sent - o.handled),
    batches: o.batches,
    batchMessages: o.batchMessages,
    producer: o.producer,
  };
}

/**
 * Runs the producer for warm-up + window, opening the window after the warm-up; `open`/`close`
 * snapshot the caller's counters at the window's edges.
 */
async function produceThroughWindow(
  setting: SteadySetting,
  timing: SteadyTiming & { tickMs?: number },
  send: (n: number) => Promise<void>,
  edges: { open(): void; close(): void },
) {
  const producing = pace({
    rate: setting.rate,
    seconds: timing.warmupSeconds + timing.seconds,
    send,
    ...(timing.tickMs !== undefined ? { tickMs: timing.tickMs } : {}),
  });
  await sleep(timing.warmupSeconds * 1000);
  const from = Date.now();
  edges.open();
  await sleep(timing.seconds * 1000);
  edges.close();
  const to = Date.now();
  const producer = await producing;
  return { window: { from, to }, producer };
}

/** How a stream runs beyond its setting; the defaults are the steady-stream cells'. */
export interface SteadyOptions {
  /** The lanes' idle wait (the steady cells: 1 s; AWS's is 20 s). */
  idleWaitSeconds?: number;
  /**
   * One send per message (a pacer tick of 1/rate s) instead of a `sendBatch` per 50 ms tick,
   * as independent producers send.
   */
  sendEachMessage?: boolean;
  /**
   * The window's edges bill what running invocations and Express executions ran inside it
   * (`Meter.cut`), instead of whole durations at their end: for lanes that outlive the window.
   */
  cutDurations?: boolean;
  /** After the window, wait this long at most for every lane to end, and count that apart. */
  tailTimeoutMs?: number;
  /** The first send waits for the supervisor's first round (`FIRST_ROUND_MS`): only sends start lanes. */
  quietStart?: boolean;
}

/** After the window: what the stream's end cost until every lane had ended. */
export interface StreamTail {
  tally: Tally;
  seconds: number;
  /** Lanes running when the window closed. */
  lanes: number;
  /** Every lane ended within the bound. */
  ended: boolean;
}

/** The Host under a steady producer (`sendBatch` through the Host, so sends wake the consumer). */
export async function hostSteady(
  endpoints: Endpoints,
  setting: SteadySetting,
  timing: SteadyTiming,
  o: SteadyOptions = {},
): Promise<SteadyHostSample & { tail?: StreamTail }> {
  const meter = new Meter();
  const idleWaitSeconds = o.idleWaitSeconds ?? 1;
  const bench = await createBenchHost(endpoints, { meter, idleWaitSeconds });
  const records = recordFile('steady');
  try {
    const { queue } = await bench.setupConsumer(
      'steady',
      STEADY_WORKER,
      {
        maxBatchSize: setting.batchSize,
        maxBatchTimeoutSeconds: setting.maxBatchTimeoutSeconds,
        maxConcurrency: setting.concurrency,
      },
      { RECORDS: records },
    );
    let handled = 0;
    let open = false;
    let batches = 0;
    let batchMessages = 0;
    bench.onFinalized((n) => {
      handled += n;
      if (!open) return;
      batches++;
      batchMessages += n;
    });
    // The supervisor's minute, as on AWS: lanes start from the sends themselves.
    const dispatcher = bench.startDispatcher({ idleWaitSeconds, supervisorMs: 60_000 });
    if (o.quietStart) await sleep(FIRST_ROUND_MS);
    const body = new Uint8Array(64).fill(97);
    const edge = () => (o.cutDurations ? meter.cut() : meter.reset());
    let tally: Tally | undefined;
    let sent = 0;
    let sentAtOpen = 0;
    let sentInWindow = 0;
    let lanesAtClose = 0;
    const { window, producer } = await produceThroughWindow(
      setting,
      { ...timing, ...(o.sendEachMessage ? { tickMs: 1000 / setting.rate } : {}) },
      async (n) => {
        await attribute('producer', () =>
          bench.host.producer.sendBatch(
            queue,
            Array.from({ length: n }, () => ({ body })),
          ),
        );
        sent += n;
      },
      {
        open: () => {
          edge();
          open = true;
          sentAtOpen = sent;
        },
        close: () => {
          open = false;
          tally = edge();
          lanesAtClose = dispatcher.running().length;
          sentInWindow = sent - sentAtOpen;
        },
      },
    );
    const drained = await until(() => handled >= producer.sent, timing.drainTimeoutMs, 20);
    let tail: StreamTail | undefined;
    if (o.tailTimeoutMs !== undefined) {
      const ended = await until(() => dispatcher.running().length === 0, o.tailTimeoutMs, 50);
      tail = { tally: meter.reset(), seconds: (Date.now() - window.to) / 1000, lanes: lanesAtClose, ended };
    }
    await dispatcher.stop(10_000);
    const starts = readRecords<{ at: number; ts: number[]; ms?: number }>(records);
    return {
      ...windowCounts({ setting, starts, window, producer, handled, drained, batches, batchMessages }),
      tally: tally as Tally,
      sentInWindow,
      handlerMs: starts.flatMap((s) => (s.ms === undefined ? [] : [s.ms])),
      ...(tail ? { tail } : {}),
    };
  } finally {
    await bench.close();
  }
}

/** Forms one batch as the Host's runner does: a long poll for the first message, then the window. */
async function gatherBatch(
  sqs: SQSClient,
  url: string,
  setting: SteadySetting,
  counts: { receives: number },
): Promise<Message[]> {
  const held: Message[] = [];
  let firstAt: number | undefined;
  while (held.length < setting.batchSize) {
    let wait = 1;
    if (firstAt !== undefined) {
      const left = setting.maxBatchTimeoutSeconds * 1000 - (Date.now() - firstAt);
      if (setting.maxBatchTimeoutSeconds === 0 || left <= 0) break;
      wait = Math.min(20, Math.ceil(left / 1000));
    }
    counts.receives++;
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: Math.min(10, setting.batchSize - held.length),
        WaitTimeSeconds: wait,
        VisibilityTimeout: 300,
      }),
    );
    const got = out.Messages ?? [];
    if (got.length === 0 && firstAt === undefined) break;
    if (got.length > 0) firstAt ??= Date.now();
    held.push(...got);
  }
  return held;
}

/** The raw receive+delete loop under the same producer (straight to SQS, same body size). */
export async function baselineSteady(
  endpoints: Endpoints,
  setting: SteadySetting,
  timing: SteadyTiming,
): Promise<SteadyBaselineSample> {
  const sqs = sqsClient(endpoints.sqs);
  const created = await sqs.send(
    new CreateQueueCommand({ QueueName: `bs-${randomBytes(6).toString('hex')}` }),
  );
  const url = created.QueueUrl as string;
  const body = new Uint8Array(64).fill(97);
  const counts = { receives: 0, deletes: 0 };
  const starts: { at: number; ts: number[] }[] = [];
  let open = false;
  let handled = 0;
  let batches = 0;
  let batchMessages = 0;
  let stopping = false;
  const loop = async () => {
    while (!stopping) {
      const held = await gatherBatch(sqs, url, setting, counts);
      if (held.length === 0) continue;
      // The raw loop's "handler" starts here: the batch is formed.
      starts.push({ at: Date.now(), ts: held.map((m) => decodeEnvelope(m.Body)?.ts ?? Number.NaN) });
      for (let i = 0; i < held.length; i += 10) {
        counts.deletes++;
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: url,
            Entries: held.slice(i, i + 10).map((m, n) => ({ Id: String(n), ReceiptHandle: m.ReceiptHandle })),
          }),
        );
      }
      handled += held.length;
      if (open) {
        batches++;
        batchMessages += held.length;
      }
    }
  };
  const consumers = Array.from({ length: setting.concurrency }, loop);
  try {
    let atOpen = { receives: 0, deletes: 0 };
    let inWindow = { receives: 0, deletes: 0 };
    const { window, producer } = await produceThroughWindow(
      setting,
      timing,
      async (n) => {
        const ts = Date.now();
        const sends: Promise<unknown>[] = [];
        for (let i = 0; i < n; i += 10) {
          sends.push(
            sqs.send(
              new SendMessageBatchCommand({
                QueueUrl: url,
                Entries: Array.from({ length: Math.min(10, n - i) }, (_, e) => ({
                  Id: String(e),
                  MessageBody: encodeEnvelope({ id: newMessageId(ts), ts, body }),
                })),
              }),
            ),
          );
        }
        await Promise.all(sends);
      },
      {
        open: () => {
          atOpen = { ...counts };
          open = true;
        },
        close: () => {
          open = false;
          inWindow = {
            receives: counts.receives - atOpen.receives,
            deletes: counts.deletes - atOpen.deletes,
          };
        },
      },
    );
    const drained = await until(() => handled >= producer.sent, timing.drainTimeoutMs, 20);
    stopping = true;
    await Promise.all(consumers);
    return {
      ...windowCounts({ setting, starts, window, producer, handled, drained, batches, batchMessages }),
      ...inWindow,
    };
  } finally {
    stopping = true;
    await Promise.allSettled(consumers);
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    sqs.destroy();
  }
}
