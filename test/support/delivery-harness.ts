import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sqsMessageQueue } from '../../lambdas/adapters/aws/sqs-message-queue.ts';
import type { QueueInvoker } from '../../lambdas/delivery/batch-runner.ts';
import { ControlLoop, type LaneLauncher } from '../../lambdas/delivery/control-loop.ts';
import { directBatchHost } from '../../lambdas/delivery/direct-batch-host.ts';
import { NamedError } from '../../lambdas/delivery/limits.ts';
import type { ProduceCall } from '../../lambdas/delivery/settlement-protocol.ts';
import { LocalLanes } from '../../lambdas/local/lanes/local-lanes.ts';
import { LocalSupervisor } from '../../lambdas/local/lanes/local-supervisor.ts';
import type { LambdaConcurrency } from '../../lambdas/local/physics/lambda-concurrency.ts';
import type { StartExecutionBudget } from '../../lambdas/local/physics/start-execution-budget.ts';
import { WorkerPool } from '../../lambdas/local/workers/worker-pool.ts';
import { createTestHost, FORMS, type TestHost } from './host-harness.ts';

export interface ConsumerSettings {
  maxBatchSize?: number;
  maxBatchTimeoutSeconds?: number;
  maxConcurrency?: number;
  maxRetries?: number;
  retryDelaySeconds?: number;
  deadLetter?: boolean;
}

/** One record a test worker appends per event (see `recordingWorker`). */
export interface WorkerEvent {
  ev: 'start' | 'end' | 'msg';
  batch: string;
  queue?: string;
  id?: string;
  attempts?: number;
  size?: number;
  body?: string;
  t: number;
}

/**
 * A worker module that appends JSON lines to `log` for every batch (start/end) and message, then
 * runs `body` (JavaScript statements with `batch`, `env`, `ctx` in scope) — the Host never sees
 * inside it, exactly like a user's worker.
 */
export function recordingWorker(log: string, body = ''): string {
  return `
import { appendFileSync } from 'node:fs';
const log = ${JSON.stringify(log)};
const rec = (o) => appendFileSync(log, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
  async queue(batch, env, ctx) {
    rec({ ev: 'start', batch: batch.batchId, queue: batch.queue, size: batch.messages.length });
    for (const m of batch.messages) {
      rec({ ev: 'msg', batch: batch.batchId, id: m.id, attempts: m.attempts, body: Buffer.from(m.body).toString('base64') });
    }
    try {
      ${body}
    } finally {
      rec({ ev: 'end', batch: batch.batchId });
    }
  },
};`;
}

export function readEvents(log: string): WorkerEvent[] {
  let text = '';
  try {
    text = readFileSync(log, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as WorkerEvent);
}

/** The most batches that ran at once, from the order the handlers themselves recorded. */
export function peakConcurrency(events: WorkerEvent[]): number {
  let now = 0;
  let peak = 0;
  for (const e of events) {
    if (e.ev === 'start') peak = Math.max(peak, ++now);
    if (e.ev === 'end') now--;
  }
  return peak;
}

export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  timeoutMs = 30_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The in-process Host plus real delivery: the production dispatcher definition under
 * aws-local-stepfunctions, the worker-thread pool and worker modules written by the test.
 */
export async function createDeliveryHost(
  opts: {
    workerTimeoutMs?: number;
    graceMs?: number;
    clock?: () => number;
    slotsPerShard?: number;
    shardsPerGroup?: number;
    /** How long an idle lane long-polls (default 1 s here; the local Host's is 10 s). */
    idleWaitSeconds?: number;
    /** Another DynamoDB endpoint than the suite's (e.g. a physics proxy in front of it). */
    ddbEndpoint?: string;
    /** Messages due this much later or more are deferred, not hidden (default 60 s). */
    deferAfterMs?: number;
  } = {},
) {
  const workerTimeoutMs = opts.workerTimeoutMs ?? 10_000;
  const idleWaitSeconds = opts.idleWaitSeconds ?? 1;
  /** Running delivery sides; `kill` makes one behave like a dead process from then on. */
  const dispatchers: {
    lanes: LocalLanes;
    supervisor: LocalSupervisor;
    kill: () => void;
    dead: () => boolean;
  }[] = [];
  // Sends through the Host wake a consumer through the newest live delivery side, as they would
  // reach the one Step Functions state machine on AWS.
  const wakeLauncher: LaneLauncher = {
    start: (name, input, kind) => {
      const live = dispatchers.filter((d) => !d.dead()).at(-1);
      return live ? live.lanes.start(name, input, kind) : Promise.resolve('exists');
    },
  };
  const host = await createTestHost({
    lanes: wakeLauncher,
    delivery: {
      workerTimeoutMs,
      graceMs: opts.graceMs ?? 1_000,
      idleWaitSeconds,
      ...(opts.slotsPerShard ? { slotsPerShard: opts.slotsPerShard } : {}),
      ...(opts.shardsPerGroup ? { shardsPerGroup: opts.shardsPerGroup } : {}),
      ...(opts.deferAfterMs ? { deferAfterMs: opts.deferAfterMs } : {}),
    },
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.ddbEndpoint ? { ddbEndpoint: opts.ddbEndpoint } : {}),
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'tf-workers-'));
  const files = new Map<
    string,
    {
      file: string;
      config: { vars?: Record<string, unknown>; queueProducers?: Record<string, { queue: string }> };
    }
  >();
  // As many threads per worker as a consumer may run batches (QC-01: maxConcurrency ≤ 250), so
  // the pool never holds a consumer below its maxConcurrency (DL-02).
  const newPool = () =>
    new WorkerPool({ timeoutMs: workerTimeoutMs, maxThreadsPerWorker: 250, output: () => {} });
  let pool = newPool();

  const invokerFor = async (slot: {
    workerName: string;
    workerSpace: string;
    deadline: number;
  }): Promise<QueueInvoker> => {
    const entry = files.get(`${slot.workerSpace}/${slot.workerName}`);
    const produce = async (call: ProduceCall) => {
      const queueName = entry?.config.queueProducers?.[call.binding]?.queue;
      const uid = queueName ? await host.store.uidByName(slot.workerSpace, queueName) : undefined;
      const target = uid ? await host.queueDirectory.queue(uid) : undefined;
      if (!target) throw new NamedError('backend_unavailable', 'no such queue');
      return host.producer.sendBatch(target, call.messages);
    };
    const current = pool;
    return {
      stopsAbandonedHandlers: current.stopsAbandonedHandlers,
      invoke: async (delivery, settle, batchSlot, failed) =>
        entry
          ? current.invokeQueue({
              file: entry.file,
              config: entry.config,
              delivery,
              settle,
              produce,
              deadline: batchSlot.deadline,
              ...(failed ? { failed } : {}),
            })
          : 'abandoned',
    };
  };

  /**
   * Starts a delivery side — the control loop's lanes and its supervisor round (every
   * `supervisorMs`, default 1 s: AWS runs it every minute; sends through the Host wake lanes
   * either way). A second call starts another one beside it (duplicate executions).
   */
  function startDispatcher(
    o: {
      supervisorMs?: number;
      waitTimeOverrides?: Record<string, number>;
      /** Lambda's concurrency pool the lanes' invocations share (TAKOFORM_PHYSICS's model). */
      concurrency?: LambdaConcurrency;
      /** Step Functions' StartExecution quota the lane starts share (TAKOFORM_PHYSICS's model). */
      startBudget?: StartExecutionBudget;
    } = {},
  ): LocalLanes {
    let dead = false;
    // Each dispatcher reaches the delivery service through its own handle. After a crash that
    // handle never answers, like a dead process: no runner of the old dispatcher registers,
    // settles, finalises or dead-letters anything any more.
    const service = new Proxy(host.delivery, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) =>
          dead ? new Promise(() => {}) : (value as (...a: unknown[]) => unknown).apply(target, args);
      },
    });
    const lanes = new LocalLanes();
    const loop = new ControlLoop({ service, launcher: lanes });
    lanes.attach({
      loop,
      host: directBatchHost(service, loop),
      messages: sqsMessageQueue(host.sqs),
      idleWaitSeconds,
      invokerFor,
      ...(o.waitTimeOverrides ? { waitTimeOverrides: o.waitTimeOverrides } : {}),
      ...(o.concurrency ? { concurrency: o.concurrency } : {}),
      ...(o.startBudget ? { startBudget: o.startBudget } : {}),
    });
    const supervisor = new LocalSupervisor(
      {
        loop,
        attachments: host.attachments,
        queueDirectory: host.queueDirectory,
        messages: sqsMessageQueue(host.sqs),
      },
      o.supervisorMs ?? 1_000,
    );
    dispatchers.push({ lanes, supervisor, kill: () => (dead = true), dead: () => dead });
    supervisor.start();
    return lanes;
  }

  async function stopDispatchers(): Promise<void> {
    await Promise.all(
      dispatchers.splice(0).map(async (d) => {
        await d.supervisor.stop();
        await d.lanes.stop(2_000);
      }),
    );
  }

  /** Writes a worker module and registers its code (MW-02) under (space, name). */
  function writeWorker(
    space: string,
    name: string,
    source: string,
    config: { vars?: Record<string, unknown>; queueProducers?: Record<string, { queue: string }> } = {},
  ) {
    mkdirSync(path.join(dir, space), { recursive: true });
    const file = path.join(dir, space, `${name}-${files.size}.mjs`);
    writeFileSync(file, source);
    files.set(`${space}/${name}`, { file, config });
    host.workers.set(space, name, ['queue']);
    return file;
  }

  async function createQueue(
    space: string,
    name: string,
    spec: Record<string, unknown> = { messageRetentionSeconds: 86_400 },
  ) {
    const res = await host.create({ form: FORMS.queue, space, name, spec });
    if (res.status !== 202) throw new Error(`queue create answered ${res.status}`);
    await host.settle();
    const target = await host.queueDirectory.queue(res.body.resourceUid);
    if (!target) throw new Error('queue not live');
    return target;
  }

  /** Queue + worker + consumer (+ dead-letter queue), all settled; returns their handles. */
  async function setup(name: string, workerSource: string, s: ConsumerSettings = {}, space = 'team') {
    const queue = await createQueue(space, `${name}-q`);
    const dlq = s.deadLetter ? await createQueue(space, `${name}-dlq`) : undefined;
    writeWorker(space, `${name}-w`, workerSource);
    const w = await host.create({ form: FORMS.moduleWorker, space, name: `${name}-w`, spec: {} });
    await host.settle();
    const spec: Record<string, unknown> = {
      queue: { resourceUid: queue.queueUid },
      worker: { resourceUid: w.body.resourceUid },
      maxBatchSize: s.maxBatchSize ?? 10,
      maxBatchTimeoutSeconds: s.maxBatchTimeoutSeconds ?? 0,
      maxConcurrency: s.maxConcurrency ?? 2,
      maxRetries: s.maxRetries ?? 3,
      retryDelaySeconds: s.retryDelaySeconds ?? 0,
    };
    if (dlq) spec.deadLetterQueue = { resourceUid: dlq.queueUid };
    const c = await host.create({ form: FORMS.consumer, space, name, spec });
    if (c.status !== 202) throw new Error(`consumer create answered ${c.status}: ${JSON.stringify(c.body)}`);
    await host.settle();
    return { queue, dlq, consumerUid: c.body.resourceUid as string, workerUid: w.body.resourceUid as string };
  }

  return {
    host,
    dir,
    writeWorker,
    createQueue,
    setup,
    startDispatcher,
    /**
     * Simulates a crash of the delivery side: running handlers are cut off and the dispatchers
     * stop dead — nothing they started is finalised, settled or released (slots stay taken until
     * their deadline, received messages stay invisible), exactly as after `kill -9`.
     */
    async crash(): Promise<void> {
      const old = pool;
      pool = newPool();
      const stopped = dispatchers.splice(0);
      for (const d of stopped) d.kill();
      // Handlers die at once (stopping a dispatcher may first wait for its current check).
      await old.close();
      // A dead side's supervisor round never returns (its service never answers): not awaited.
      for (const d of stopped) void d.supervisor.stop();
      await Promise.all(stopped.map((d) => d.lanes.stop(0)));
    },
    /**
     * What the local Host does when it starts after a crash: recovers every batch the dead run
     * left in flight (its handlers died with it), then delivers again.
     */
    async restart(): Promise<void> {
      await host.delivery.recoverAfterRestart();
      startDispatcher();
    },
    /** Stops every dispatcher started so far (their supervisors first, then their lanes). */
    stopDispatchers,
    async close(): Promise<void> {
      await stopDispatchers();
      await pool.close();
    },
    logFile: (name: string) => path.join(dir, `${name}.jsonl`),
  };
}

export type DeliveryHost = Awaited<ReturnType<typeof createDeliveryHost>>;
export type { TestHost };
