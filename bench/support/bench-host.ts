/**
 * An in-process Host for the bench, composed exactly as the local Host composes it
 * (`composeHost` over DynamoDB Local and the SQS stand-in, the production dispatcher definition
 * under aws-local-stepfunctions, worker modules in the worker-thread pool), with metered clients
 * and a table of its own. Nothing in lambdas/ is changed: counting happens in SDK middleware,
 * in a wrapper around the delivery service the dispatcher is handed, in the Step Functions hook
 * (sfn-hook.ts) and around the Host's logger (log-meter.ts).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand, ListQueuesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { dynamoDbClient, sqsClient } from '../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../lambdas/adapters/aws/create-host-table.ts';
import { sqsMessageQueue } from '../../lambdas/adapters/aws/sqs-message-queue.ts';
import { composeHost } from '../../lambdas/composition/compose-host.ts';
import type { QueueInvoker } from '../../lambdas/delivery/batch-runner.ts';
import { ControlLoop, type LaneLauncher } from '../../lambdas/delivery/control-loop.ts';
import type { DeliveryService } from '../../lambdas/delivery/delivery-service.ts';
import { directBatchHost } from '../../lambdas/delivery/direct-batch-host.ts';
import type { QueueTarget } from '../../lambdas/delivery/ports.ts';
import { hashApiKey, StaticKeyAuthenticator } from '../../lambdas/engine/auth.ts';
import type { WorkerCode, WorkerRegistry } from '../../lambdas/forms/module-worker/worker-registry.ts';
import { API_ROOT } from '../../lambdas/http/origin.ts';
import { ExecutorLoop } from '../../lambdas/local/executor-loop.ts';
import { LocalLanes } from '../../lambdas/local/lanes/local-lanes.ts';
import { LocalSupervisor } from '../../lambdas/local/lanes/local-supervisor.ts';
import type { LambdaConcurrency } from '../../lambdas/local/physics/lambda-concurrency.ts';
import type { StartExecutionBudget } from '../../lambdas/local/physics/start-execution-budget.ts';
import { WorkerPool } from '../../lambdas/local/workers/worker-pool.ts';
import { batchHostLogBytes, installLogMeter } from './log-meter.ts';
import { attribute, Meter } from './meter.ts';
import { unwatchConsumer, watchConsumer } from './sfn-hook.ts';
import type { Endpoints } from './standins.ts';

export const FORMS = {
  moduleWorker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
  queue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
  consumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
} as const;

export const SPACE = 'bench';

/**
 * The supervisor's first round runs as its dispatcher starts. A send inside it can meet a round
 * that sees the message and no lane receiving yet, and start a second lane beside the one the send
 * wakes — which on AWS, with a round a minute, is rare. Runs that count lanes wait this long first.
 */
export const FIRST_ROUND_MS = 1_000;

// --- worker code shared by every Host of this process ------------------------------------------

let workDir: string | undefined;
let pool: WorkerPool | undefined;

/** A scratch folder for worker modules and their records; removed by `closeShared`. */
export function benchDir(): string {
  workDir ??= mkdtempSync(path.join(tmpdir(), 'takoform-bench-'));
  return workDir;
}

/**
 * One pool for the whole run, so that threads (one per running batch) are started once and
 * reused across runs, as in a long-running Host. Sized for the largest maxConcurrency measured.
 */
export function sharedPool(): WorkerPool {
  pool ??= new WorkerPool({ timeoutMs: 60_000, maxThreadsPerWorker: 64, output: () => {} });
  return pool;
}

/** The module file of a worker source; the same source always gets the same file (and threads). */
export function workerFile(source: string): string {
  const file = path.join(
    benchDir(),
    `w-${createHash('sha256').update(source).digest('hex').slice(0, 16)}.mjs`,
  );
  writeFileSync(file, source);
  return file;
}

export async function closeShared(): Promise<void> {
  await pool?.close();
  pool = undefined;
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  workDir = undefined;
}

/** Starts `count` threads of `file` at once and leaves them idle in the pool. */
export async function warmThreads(file: string, count: number): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      sharedPool().invokeQueue({
        file,
        config: {},
        delivery: { batchId: `warm-${i}`, credential: '', queue: 'warm', messages: [] },
        settle: async () => undefined,
        produce: async () => [],
      }),
    ),
  );
}

class BenchWorkers implements WorkerRegistry {
  readonly files = new Map<string, { file: string; vars: Record<string, unknown> }>();
  async lookup(space: string, name: string): Promise<WorkerCode | undefined> {
    return this.files.has(`${space}/${name}`)
      ? { deploymentUid: `bench-${space}-${name}`, handlers: ['queue'] }
      : undefined;
  }
}

export interface ConsumerSettings {
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  maxConcurrency: number;
  maxRetries?: number;
  retryDelaySeconds?: number;
  /** The resourceUid of a queue that takes messages past their retries. */
  deadLetterQueue?: string;
}

export interface BenchHostOptions {
  meter?: Meter;
  /** How long a lane long-polls an empty queue before it rests (the Host's idleWaitSeconds). */
  idleWaitSeconds?: number;
  workerTimeoutMs?: number;
  graceMs?: number;
  /** Lambda's concurrency pool the lanes' invocations share (the scale bench's physics); none: no limit. */
  concurrency?: LambdaConcurrency;
  /** Step Functions' StartExecution quota the lane starts share (the scale bench's physics); none: no limit. */
  startBudget?: StartExecutionBudget;
  /** Slot-map items to a partition key (the Host's default: 25). */
  shardsPerGroup?: number;
}

/**
 * Service methods behind the runner's batch-host calls (`directBatchHost`), each one Lambda
 * invocation on AWS (`batch-host-protocol.ts`), by the role the bench counts them under.
 */
const BATCH_HOST_ROLES: Record<string, string> = {
  acquireNext: 'batch-host:acquire',
  register: 'batch-host:register',
  settle: 'batch-host:settle',
  settleMany: 'batch-host:settle',
  finalizeAsRunner: 'batch-host:finalize',
  deadLetterAsRunner: 'batch-host:deadLetter',
  deferAsRunner: 'batch-host:defer',
};

export type BenchHost = Awaited<ReturnType<typeof createBenchHost>>;

type ComposedHost = ReturnType<typeof composeHost>;

/**
 * The delivery service as the dispatcher sees it: each batch-host call is timed and counted as
 * one Lambda invocation, and the SDK calls inside it are attributed to it.
 */
function meteredDelivery(delivery: DeliveryService, meter: Meter) {
  const finalizedListeners = new Set<(delivered: number, consumerUid: string) => void>();
  /** Batch-host calls that threw, by role (a finalisation that failed, for the retry storm). */
  const failures: Record<string, number> = {};
  /** Messages each registered batch delivered, until it is finalised. */
  const delivered = new Map<string, { n: number; consumerUid: string }>();
  const service = new Proxy(delivery, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...a: unknown[]) => Promise<unknown>;
      const role = typeof prop === 'string' ? BATCH_HOST_ROLES[prop] : undefined;
      if (!role) return fn.bind(target);
      return async (...args: unknown[]) => {
        const t0 = performance.now();
        const span = meter.lambdaStarted(role);
        let out: unknown;
        try {
          out = await attribute(role, () => fn.apply(target, args), meter);
        } catch (err) {
          failures[role] = (failures[role] ?? 0) + 1;
          meter.logged(role, batchHostLogBytes(role, args, { err }));
          throw err;
        } finally {
          meter.lambdaEnded(role, performance.now() - t0, span);
        }
        meter.logged(role, batchHostLogBytes(role, args, { out }));
        if (prop === 'register') {
          const slot = args[0] as { batchId: string; consumerUid: string };
          delivered.set(slot.batchId, {
            n: (out as { deliver: unknown[] }).deliver.length,
            consumerUid: slot.consumerUid,
          });
        }
        if (prop === 'finalizeAsRunner') {
          const batchId = args[0] as string;
          const d = delivered.get(batchId);
          for (const l of finalizedListeners) l(d?.n ?? 0, d?.consumerUid ?? '');
          delivered.delete(batchId);
        }
        return out;
      };
    },
  }) as DeliveryService;
  return {
    service,
    failures,
    onFinalized(listener: (delivered: number, consumerUid: string) => void): () => void {
      finalizedListeners.add(listener);
      return () => finalizedListeners.delete(listener);
    },
  };
}

/** Runs a slot's worker in the shared pool; a worker the bench did not register is abandoned. */
function poolInvoker(workers: BenchWorkers) {
  return async (slot: { workerSpace: string; workerName: string }): Promise<QueueInvoker> => {
    const entry = workers.files.get(`${slot.workerSpace}/${slot.workerName}`);
    return {
      invoke: async (delivery, settle) =>
        entry
          ? sharedPool().invokeQueue({
              file: entry.file,
              config: { vars: entry.vars },
              delivery,
              settle,
              produce: async () => {
                throw new Error('no producer bindings in the bench');
              },
            })
          : 'abandoned',
    };
  };
}

/** The Host's HTTP API as a client sees it, with the bench's key; its calls count as control plane. */
function controlPlaneClient(host: ComposedHost, token: string) {
  async function request(r: {
    method?: string;
    path: string;
    body?: unknown;
    headers?: Record<string, string>;
  }) {
    const headers: Record<string, string[]> = { authorization: [`Bearer ${token}`] };
    let body: Uint8Array | undefined;
    if (r.body !== undefined) {
      body = new TextEncoder().encode(JSON.stringify(r.body));
      headers['content-type'] = ['application/json'];
    }
    for (const [k, v] of Object.entries(r.headers ?? {})) headers[k.toLowerCase()] = [v];
    const out = await attribute('control-plane', () =>
      host.http({ method: r.method ?? 'GET', path: `${API_ROOT}${r.path}`, rawQuery: '', headers, body }),
    );
    return { status: out.status, body: out.body ? JSON.parse(out.body) : undefined };
  }

  const create = (body: { form: string; space: string; name: string; spec: unknown }) =>
    request({
      method: 'POST',
      path: '/resources',
      body,
      headers: { 'idempotency-key': `k-${randomUUID()}` },
    });

  /** Runs the executor until nothing is due (bounded), as the test harness does. */
  async function settle(rounds = 50): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      if ((await attribute('control-plane', () => host.executor.runDue())) === 0) return;
    }
  }

  async function createQueue(name: string): Promise<QueueTarget> {
    const res = await create({
      form: FORMS.queue,
      space: SPACE,
      name,
      spec: { messageRetentionSeconds: 86_400 },
    });
    if (res.status !== 202) throw new Error(`queue create answered ${res.status}`);
    await settle();
    const target = await attribute('control-plane', () => host.queueDirectory.queue(res.body.resourceUid));
    if (!target) throw new Error('the queue is not live');
    return target;
  }

  return { request, create, settle, createQueue };
}

/** Queue, worker and consumer created through the API and settled, in that order. */
async function createConsumer(
  api: ReturnType<typeof controlPlaneClient>,
  workers: BenchWorkers,
  o: { name: string; workerSource: string; settings: ConsumerSettings; vars: Record<string, unknown> },
) {
  const { name, settings: s } = o;
  const queue = await api.createQueue(`${name}-q`);
  workers.files.set(`${SPACE}/${name}-w`, { file: workerFile(o.workerSource), vars: o.vars });
  const w = await api.create({ form: FORMS.moduleWorker, space: SPACE, name: `${name}-w`, spec: {} });
  if (w.status !== 202) throw new Error(`worker create answered ${w.status}`);
  await api.settle();
  const c = await api.create({
    form: FORMS.consumer,
    space: SPACE,
    name,
    spec: {
      queue: { resourceUid: queue.queueUid },
      worker: { resourceUid: w.body.resourceUid },
      maxBatchSize: s.maxBatchSize,
      maxBatchTimeoutSeconds: s.maxBatchTimeoutSeconds,
      maxConcurrency: s.maxConcurrency,
      maxRetries: s.maxRetries ?? 3,
      retryDelaySeconds: s.retryDelaySeconds ?? 0,
      ...(s.deadLetterQueue ? { deadLetterQueue: { resourceUid: s.deadLetterQueue } } : {}),
    },
  });
  if (c.status !== 202) throw new Error(`consumer create answered ${c.status}: ${JSON.stringify(c.body)}`);
  await api.settle();
  return { queue, consumerUid: c.body.resourceUid as string };
}

/** Lanes under a control loop, and its supervisor, not yet started. */
function localDispatcher(
  deps: {
    host: ComposedHost;
    service: DeliveryService;
    sqs: SQSClient;
    invokerFor: ReturnType<typeof poolInvoker>;
    concurrency?: LambdaConcurrency;
    startBudget?: StartExecutionBudget;
  },
  idleWaitSeconds: number,
  supervisorMs: number,
): { lanes: LocalLanes; supervisor: LocalSupervisor } {
  const { host, service, sqs, invokerFor, concurrency, startBudget } = deps;
  const lanes = new LocalLanes();
  const loop = new ControlLoop({ service, launcher: lanes });
  const messages = sqsMessageQueue(sqs);
  lanes.attach({
    loop,
    host: directBatchHost(service, loop),
    messages,
    idleWaitSeconds,
    invokerFor,
    ...(concurrency ? { concurrency } : {}),
    ...(startBudget ? { startBudget } : {}),
  });
  const supervisor = new LocalSupervisor(
    { loop, attachments: host.attachments, queueDirectory: host.queueDirectory, messages },
    supervisorMs,
  );
  return { lanes, supervisor };
}

/** Sends `count` messages in sendBatch calls of ≤100, `parallel` at a time (producer context). */
async function prefillQueue(
  host: ComposedHost,
  target: QueueTarget,
  count: number,
  bodyBytes: number,
  parallel: number,
): Promise<void> {
  const body = new Uint8Array(bodyBytes).fill(97);
  let left = count;
  const one = async () => {
    while (left > 0) {
      const n = Math.min(100, left);
      left -= n;
      await attribute('producer', () =>
        host.producer.sendBatch(
          target,
          Array.from({ length: n }, () => ({ body })),
        ),
      );
    }
  };
  await Promise.all(Array.from({ length: parallel }, one));
}

/** Removes what a bench Host created on the stand-ins; what is already gone is not an error. */
async function dropResources(
  clients: { dynamodb: DynamoDBClient; sqs: SQSClient },
  names: { tableName: string; queueNamePrefix: string },
): Promise<void> {
  const { dynamodb, sqs } = clients;
  await attribute('teardown', async () => {
    const listed = await sqs
      .send(new ListQueuesCommand({ QueueNamePrefix: names.queueNamePrefix }))
      .catch(() => ({ QueueUrls: [] as string[] }));
    for (const url of listed.QueueUrls ?? [])
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    await dynamodb.send(new DeleteTableCommand({ TableName: names.tableName })).catch(() => undefined);
  });
}

export async function createBenchHost(endpoints: Endpoints, opts: BenchHostOptions = {}) {
  installLogMeter();
  const meter = opts.meter ?? new Meter();
  const dynamodb = meter.instrumentDynamoDb(dynamoDbClient(endpoints.dynamodb));
  const sqs = meter.instrumentSqs(sqsClient(endpoints.sqs));
  const tableName = `bench-${randomUUID()}`;
  await attribute('setup', () => createHostTable(dynamodb, tableName));
  const token = `bench-${randomBytes(24).toString('hex')}`;
  const workers = new BenchWorkers();
  const queueNamePrefix = `b${randomBytes(4).toString('hex')}-`;
  let onAccepted: () => void = () => {};
  /** Running delivery sides (lanes + supervisor); sends wake the newest. */
  const dispatchers: { lanes: LocalLanes; supervisor: LocalSupervisor }[] = [];
  // The kind too: a lane a send wakes runs on Express where its consumer fits, as on AWS.
  const wakeLauncher: LaneLauncher = {
    start: (name, input, kind) =>
      dispatchers.at(-1)?.lanes.start(name, input, kind) ?? Promise.resolve('exists'),
  };
  const host = composeHost({
    lanes: wakeLauncher,
    dynamodb,
    tableName,
    sqs,
    queueNamePrefix,
    workers,
    authenticator: new StaticKeyAuthenticator([
      { keyHash: hashApiKey(token), principal: 'bench', spaces: { [SPACE]: 'write' } },
    ]),
    cursorKey: randomBytes(32),
    origin: () => 'https://bench.invalid',
    onAccepted: () => onAccepted(),
    delivery: {
      workerTimeoutMs: opts.workerTimeoutMs ?? 30_000,
      credentialKey: randomBytes(32),
      workerFunction: async (space, name) => (workers.files.has(`${space}/${name}`) ? 'local' : undefined),
      graceMs: opts.graceMs ?? 5_000,
      idleWaitSeconds: opts.idleWaitSeconds ?? 1,
      ...(opts.shardsPerGroup !== undefined ? { shardsPerGroup: opts.shardsPerGroup } : {}),
    },
  });
  const { service, onFinalized, failures } = meteredDelivery(host.delivery, meter);
  const invokerFor = poolInvoker(workers);
  const api = controlPlaneClient(host, token);
  const consumers: string[] = [];
  let loop: ExecutorLoop | undefined;

  /**
   * Queue + worker + consumer, all settled; the dispatcher is not started. `vars` reach the
   * worker as `env` (record paths, timings), so one source keeps one module file and its threads.
   */
  async function setupConsumer(
    name: string,
    workerSource: string,
    s: ConsumerSettings,
    vars: Record<string, unknown> = {},
  ) {
    const created = await createConsumer(api, workers, { name, workerSource, settings: s, vars });
    watchConsumer(created.consumerUid, meter);
    consumers.push(created.consumerUid);
    return created;
  }

  /**
   * Starts the delivery side as the local Host runs it: the control loop's lanes (the production
   * dispatcher definition) and its supervisor round every `supervisorMs` (AWS: every minute).
   */
  function startDispatcher(o: { idleWaitSeconds?: number; supervisorMs?: number } = {}): LocalLanes {
    const dispatcher = localDispatcher(
      {
        host,
        service,
        sqs,
        invokerFor,
        ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
        ...(opts.startBudget ? { startBudget: opts.startBudget } : {}),
      },
      o.idleWaitSeconds ?? opts.idleWaitSeconds ?? 1,
      o.supervisorMs ?? 60_000,
    );
    dispatchers.push(dispatcher);
    // Its rounds (timers started here) run in this context, so none of their calls count as
    // delivery; the lanes it starts are attributed by their Task states.
    attribute('supervisor', () => dispatcher.supervisor.start());
    return dispatcher.lanes;
  }

  /** The executor as `npm start` runs it: woken on acceptance, else every 250 ms. */
  function startExecutorLoop(): void {
    loop = new ExecutorLoop(host.executor);
    onAccepted = () => loop?.poke();
    attribute('control-plane', () => loop?.start());
  }

  async function close(): Promise<void> {
    await Promise.all(
      dispatchers.splice(0).map(async (d) => {
        await d.supervisor.stop();
        await d.lanes.stop(5_000);
      }),
    );
    await loop?.stop();
    for (const c of consumers.splice(0)) unwatchConsumer(c);
    await dropResources({ dynamodb, sqs }, { tableName, queueNamePrefix });
    dynamodb.destroy();
    sqs.destroy();
  }

  return {
    host,
    meter,
    dynamodb,
    sqs,
    tableName,
    queueNamePrefix,
    service,
    ...api,
    setupConsumer,
    startDispatcher,
    startExecutorLoop,
    prefill: (target: QueueTarget, count: number, bodyBytes = 64, parallel = 4) =>
      prefillQueue(host, target, count, bodyBytes, parallel),
    onFinalized,
    failures,
    close,
  };
}

/** A file in the bench folder for a worker's own records (JSON lines). */
export function recordFile(name: string): string {
  const dir = path.join(benchDir(), 'records');
  mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}-${randomUUID()}.jsonl`);
}
