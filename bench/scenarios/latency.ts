/**
 * Latencies, each run beside a bare DynamoDB conditional write measured in the same run:
 *
 * - `acknowledge()` and `acknowledgeAll()`, timed inside the worker around the call (worker
 *   thread → Host thread → DeliveryService.settle → DynamoDB → back);
 * - send-to-handler on an idle consumer: `producer.send()` called while the consumer's lane
 *   waits on an empty queue or has just ended (idleWaitSeconds 3, dispatcher check every 500 ms),
 *   until the handler starts;
 * - Operation create→succeeded (POST /resources of a queue, then GET /operations/{id} every 5 ms
 *   while the executor loop runs as in `npm start`) and Resource GET.
 */
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { createBenchHost, FORMS, recordFile, SPACE } from '../support/bench-host.ts';
import { attribute } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { quantile, readRecords, sleep, until } from '../support/stats.ts';
import { ACK_ALL_WORKER, ACK_WORKER, ARRIVAL_WORKER } from '../support/workers.ts';

export interface Percentiles {
  samples: number;
  p50: number;
  p99: number;
  max: number;
}

export const percentiles = (ms: readonly number[]): Percentiles => ({
  samples: ms.length,
  p50: quantile(ms, 0.5),
  p99: quantile(ms, 0.99),
  max: ms.length ? Math.max(...ms) : Number.NaN,
});

type BenchHost = Awaited<ReturnType<typeof createBenchHost>>;

/** `count` sequential conditional UpdateItems on one item of the Host's table (the bare write). */
export async function bareConditionalWrites(bench: BenchHost, count: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 1; i <= count; i++) {
    const t0 = performance.now();
    await attribute('bare-write', () =>
      bench.dynamodb.send(
        new UpdateItemCommand({
          TableName: bench.tableName,
          Key: marshall({ pk: 'BENCH#bare-write', sk: '_' }),
          UpdateExpression: 'SET n = :n',
          ConditionExpression: 'attribute_not_exists(n) OR n < :n',
          ExpressionAttributeValues: marshall({ ':n': i }),
        }),
      ),
    );
    ms.push(performance.now() - t0);
  }
  return ms;
}

export interface SettleLatencySample {
  ok: boolean;
  acknowledge: number[];
  acknowledgeAll: number[];
  /** Bare conditional writes started while an acknowledge() handler ran. */
  bareWrite: number[];
  /** Bare conditional writes started while an acknowledgeAll() handler ran. */
  bareWriteAll: number[];
  /** SDK calls per settlement call (`service:Operation` → calls), as the Host made them. */
  callsPerSettle: Record<string, number>;
}

/**
 * Samples bare conditional writes (one at a time, 5 ms apart) until stopped, each with the time it
 * started, so that only those made while a handler ran can be set beside the handler's calls.
 */
function bareWriteSampler(bench: BenchHost): { stop(): Promise<{ at: number; ms: number }[]> } {
  let running = true;
  const ms: { at: number; ms: number }[] = [];
  let n = 0;
  const loop = (async () => {
    while (running) {
      n++;
      const at = performance.timeOrigin + performance.now();
      const t0 = performance.now();
      await attribute('bare-write', () =>
        bench.dynamodb.send(
          new UpdateItemCommand({
            TableName: bench.tableName,
            Key: marshall({ pk: 'BENCH#bare-write-sampler', sk: '_' }),
            UpdateExpression: 'SET n = :n',
            ConditionExpression: 'attribute_not_exists(n) OR n < :n',
            ExpressionAttributeValues: marshall({ ':n': n }),
          }),
        ),
      );
      ms.push({ at, ms: performance.now() - t0 });
      await sleep(5);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return ms;
    },
  };
}

/**
 * One settlement phase on a Host of its own: a consumer with maxConcurrency 1 (so the only other
 * DynamoDB traffic while its handler runs is the bare-write sampler beside it), a pre-filled
 * queue, and the worker's own timings of each settlement call.
 */
async function settlePhase(
  endpoints: Endpoints,
  worker: string,
  batchSize: number,
  messages: number,
  timeoutMs: number,
) {
  const bench = await createBenchHost(endpoints, { idleWaitSeconds: 1 });
  const records = recordFile('settle');
  try {
    const { queue } = await bench.setupConsumer(
      'settle',
      worker,
      { maxBatchSize: batchSize, maxBatchTimeoutSeconds: 0, maxConcurrency: 1 },
      { RECORDS: records },
    );
    let delivered = 0;
    bench.onFinalized((n) => {
      delivered += n;
    });
    await bench.prefill(queue, messages);
    const sampler = bareWriteSampler(bench);
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: 1, supervisorMs: 200 });
    const ok = await until(() => delivered >= messages, timeoutMs, 5);
    const bare = await sampler.stop();
    await dispatcher.stop(10_000);
    const counted = bench.meter.snapshot();
    const handlers = readRecords<{ ms: number[]; start: number; end: number }>(records);
    // Only bare writes that started while a handler ran: those met exactly the load the
    // settlement calls met (no receive, register or finalise of the lane in between).
    const during = bare
      .filter((b) => handlers.some((h) => b.at >= h.start && b.at <= h.end))
      .map((b) => b.ms);
    return {
      ok,
      bare: during,
      ms: handlers.flatMap((r) => r.ms),
      settles: counted.lambda['batch-host:settle']?.invocations ?? 0,
      calls: counted.sdk['batch-host:settle'] ?? {},
    };
  } finally {
    await bench.close();
  }
}

/** acknowledge() (batches of 10) and acknowledgeAll() (batches of 1), each beside its bare writes. */
export async function settleLatencyRun(
  endpoints: Endpoints,
  o: { ackMessages: number; ackAllBatches: number; timeoutMs: number },
): Promise<SettleLatencySample> {
  const ack = await settlePhase(endpoints, ACK_WORKER, 10, o.ackMessages, o.timeoutMs);
  const all = await settlePhase(endpoints, ACK_ALL_WORKER, 1, o.ackAllBatches, o.timeoutMs);
  const settles = ack.settles + all.settles;
  const callsPerSettle: Record<string, number> = {};
  for (const calls of [ack.calls, all.calls])
    for (const [op, e] of Object.entries(calls))
      callsPerSettle[op] = (callsPerSettle[op] ?? 0) + e.calls / Math.max(1, settles);
  return {
    ok: ack.ok && all.ok,
    acknowledge: ack.ms,
    acknowledgeAll: all.ms,
    bareWrite: ack.bare,
    bareWriteAll: all.bare,
    callsPerSettle,
  };
}

export interface ArrivalSample {
  ok: boolean;
  maxBatchTimeoutSeconds: number;
  sendToHandler: number[];
  /** One send after the consumer sat idle `idleMinutes` with no lane running. */
  afterIdle?: { idleMinutes: number; ms: number };
}

/**
 * Send-to-handler on an idle consumer, through the control loop as the deployment runs it: one
 * message at a time, each sent after a random pause (0.2–4 s) once the previous one reached its
 * handler. A lane that finds the queue empty for idleWaitSeconds (3 s) ends; the next send wakes
 * the consumer (a new lane), so some sends meet a waiting long poll and some the wake. Then the
 * consumer sits idle for `idleMinutes` with every lane ended and no supervisor round (its period
 * is longer than the run), and one more send measures the wake alone.
 */
export async function arrivalRun(
  endpoints: Endpoints,
  o: { samples: number; maxBatchTimeoutSeconds: number; idleMinutes: number; timeoutMs: number },
): Promise<ArrivalSample> {
  const idleWaitSeconds = 3;
  const bench = await createBenchHost(endpoints, { idleWaitSeconds });
  const records = recordFile('arrival');
  try {
    const { queue } = await bench.setupConsumer(
      'arrive',
      ARRIVAL_WORKER,
      { maxBatchSize: 10, maxBatchTimeoutSeconds: o.maxBatchTimeoutSeconds, maxConcurrency: 1 },
      { RECORDS: records },
    );
    const dispatcher = bench.startDispatcher({ idleWaitSeconds, supervisorMs: 3_600_000 });
    const arrivals = new Map<string, number>();
    const seen = () => {
      for (const r of readRecords<{ at: number; ids: string[] }>(records))
        for (const id of r.ids) if (!arrivals.has(id)) arrivals.set(id, r.at);
    };
    const sendOne = async (): Promise<number | undefined> => {
      const sentAt = performance.timeOrigin + performance.now();
      const id = await attribute('producer', () => bench.host.producer.send(queue, 'x'));
      const arrived = await until(
        () => {
          seen();
          return arrivals.has(id);
        },
        o.timeoutMs,
        2,
      );
      return arrived ? (arrivals.get(id) as number) - sentAt : undefined;
    };
    const out: number[] = [];
    let ok = true;
    for (let i = 0; i < o.samples; i++) {
      await sleep(200 + Math.random() * 3_800);
      const ms = await sendOne();
      if (ms === undefined) {
        ok = false;
        break;
      }
      out.push(ms);
    }
    let afterIdle: ArrivalSample['afterIdle'];
    if (ok) {
      await sleep(o.idleMinutes * 60_000);
      if (dispatcher.running().length > 0) ok = false; // a lane still running would not be idle
      const ms = await sendOne();
      if (ms === undefined) ok = false;
      else afterIdle = { idleMinutes: o.idleMinutes, ms };
    }
    await dispatcher.stop(10_000);
    return {
      ok,
      maxBatchTimeoutSeconds: o.maxBatchTimeoutSeconds,
      sendToHandler: out,
      ...(afterIdle ? { afterIdle } : {}),
    };
  } finally {
    await bench.close();
  }
}

export interface ControlPlaneSample {
  ok: boolean;
  createToSucceeded: number[];
  resourceGet: number[];
  bareWrite: number[];
}

/** Operation create→succeeded and Resource GET, with the bare write in the same run. */
export async function controlPlaneRun(
  endpoints: Endpoints,
  o: { creates: number; gets: number; bareWrites: number; timeoutMs: number },
): Promise<ControlPlaneSample> {
  const bench = await createBenchHost(endpoints);
  try {
    bench.startExecutorLoop();
    const createToSucceeded: number[] = [];
    const uids: string[] = [];
    let ok = true;
    for (let i = 0; i < o.creates; i++) {
      const t0 = performance.now();
      const res = await bench.create({
        form: FORMS.queue,
        space: SPACE,
        name: `lat-${i}`,
        spec: { messageRetentionSeconds: 86_400 },
      });
      if (res.status !== 202) throw new Error(`create answered ${res.status}`);
      const opId = res.body.id as string;
      let status = res.body.status as string;
      const deadline = t0 + o.timeoutMs;
      while (status !== 'succeeded' && performance.now() < deadline) {
        await sleep(5);
        const op = await bench.request({ path: `/operations/${opId}` });
        status = op.body?.status;
        if (status === 'failed') break;
      }
      if (status !== 'succeeded') {
        ok = false;
        break;
      }
      createToSucceeded.push(performance.now() - t0);
      uids.push(res.body.resourceUid as string);
    }
    const resourceGet: number[] = [];
    for (let i = 0; i < o.gets && uids.length > 0; i++) {
      const uid = uids[i % uids.length] as string;
      const t0 = performance.now();
      const res = await bench.request({ path: `/resources/${uid}` });
      if (res.status !== 200) throw new Error(`GET answered ${res.status}`);
      resourceGet.push(performance.now() - t0);
    }
    const bareWrite = await bareConditionalWrites(bench, o.bareWrites);
    return { ok, createToSucceeded, resourceGet, bareWrite };
  } finally {
    await bench.close();
  }
}
