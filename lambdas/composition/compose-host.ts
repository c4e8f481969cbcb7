import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoAttachments } from '../adapters/aws/dynamodb-attachments.ts';
import { DynamoCommitStore } from '../adapters/aws/dynamodb-commit-store.ts';
import { DynamoDeadLetterRecords } from '../adapters/aws/dynamodb-dead-letter-records.ts';
import { DynamoDeliveryStore } from '../adapters/aws/dynamodb-delivery-store.ts';
import { DynamoHostStore } from '../adapters/aws/dynamodb-host-store.ts';
import { DynamoObservedStore } from '../adapters/aws/dynamodb-observed-store.ts';
import { DynamoQueueDirectory } from '../adapters/aws/dynamodb-queue-directory.ts';
import { DynamoSupervisorLedger } from '../adapters/aws/dynamodb-supervisor-ledger.ts';
import { sqsMessageQueue } from '../adapters/aws/sqs-message-queue.ts';
import { SqsMessageReader } from '../adapters/aws/sqs-message-reader.ts';
import { type QueueSettings, SqsQueueBackend } from '../adapters/aws/sqs-queue-backend.ts';
import { createConsoleRoutes } from '../console/console-routes.ts';
import { type ConsumerOfQueue, ControlLoop, type LaneLauncher } from '../delivery/control-loop.ts';
import { DeliveryService } from '../delivery/delivery-service.ts';
import type { MessageQueue, QueueTarget } from '../delivery/ports.ts';
import { QueueProducer } from '../delivery/producer.ts';
import { superviseActivated } from '../delivery/supervision.ts';
import { createDocsRoutes } from '../docs/docs-routes.ts';
import type { Authenticator } from '../engine/auth.ts';
import { CursorCodec } from '../engine/cursor.ts';
import { OperationExecutor } from '../engine/executor.ts';
import { formRegistry } from '../engine/forms.ts';
import { HostEngine } from '../engine/host-engine.ts';
import { ResourceObserver } from '../engine/resource-observer.ts';
import { createAtLeastOnceQueueForm } from '../forms/at-least-once-queue/at-least-once-queue-form.ts';
import { createModuleWorkerForm } from '../forms/module-worker/module-worker-form.ts';
import type { WorkerRegistry } from '../forms/module-worker/worker-registry.ts';
import { consumerClaimKey, createQueueConsumerForm } from '../forms/queue-consumer/queue-consumer-form.ts';
import { createApiRoutes } from '../http/api-routes.ts';
import { LIMITS } from '../http/discovery.ts';
import { createHttpHandler, type HttpCoreOptions, type HttpHandler } from '../http/handler.ts';
import { createOperatorRoutes } from '../http/operator-routes.ts';
import { createProducerRoutes } from '../http/producer-routes.ts';
import type { QueueHistorySource } from '../operator/queue-history.ts';
import { QueueOperator } from '../operator/queue-operator.ts';
import { RECENT_BATCHES_KEPT_MS, summarizeHead } from '../operator/recent-batches.ts';
import { log } from '../shared/log.ts';

export interface HostDeps {
  dynamodb: DynamoDBClient;
  tableName: string;
  sqs: SQSClient;
  /** SQS queue names are `<prefix><uid>`; IAM on AWS is scoped to the prefix. */
  queueNamePrefix: string;
  /** Encryption, TLS-only policy and tags of the queues the Host creates. @default SQS-managed SSE only */
  queueSettings?: QueueSettings;
  workers: WorkerRegistry;
  authenticator: Authenticator;
  cursorKey: Buffer;
  origin: () => string;
  clock?: () => number;
  onAccepted?: (operationId: string) => void;
  /**
   * Starts dispatcher lanes (Step Functions on AWS, in process locally). Without one, sends wake
   * no consumer and lanes start only from the supervisor.
   */
  lanes?: LaneLauncher;
  /** The age of a queue's oldest message, where the platform reports one (operator stats). */
  oldestMessageAgeSeconds?: (target: QueueTarget) => Promise<number | undefined>;
  /** The last hour of queue counts for the console: the local Host's memory, CloudWatch on AWS. */
  history?: QueueHistorySource;
  /** How long an executor's claim on an Operation lasts (default: the executor's 60 s). */
  operationLeaseMs?: number;
  /** Delivery: the bound on one worker invocation, and where a worker's code runs. */
  delivery: {
    workerTimeoutMs: number;
    credentialKey: Buffer;
    workerFunction(space: string, name: string): Promise<string | undefined>;
    /** A worker's own invocation bound (its Lambda timeout); slots use it when below the Host's. */
    workerTimeoutMsOf?(space: string, name: string): Promise<number | undefined>;
    graceMs?: number;
    idleWaitSeconds?: number;
    /** Extra time in a slot's deadline (default: the delivery service's 30 s). */
    slotMarginMs?: number;
    /** Slots per item of a consumer's slot map (default 1: `slot-groups.ts`). */
    slotsPerShard?: number;
    /** Slot items per partition key (default 25: `slot-groups.ts`). */
    shardsPerGroup?: number;
    /** Messages due this much later or more are deferred, not hidden (default 60 s: `deferrals.ts`). */
    deferAfterMs?: number;
  };
}

/** Wires adapters, Forms and the engine; used by the Lambda entries and the local Host alike. */
export function composeHost(deps: HostDeps) {
  const store = new DynamoHostStore({
    client: deps.dynamodb,
    tableName: deps.tableName,
    replayWindowSeconds: LIMITS.replayWindowSeconds,
  });
  const queues = new SqsQueueBackend(deps.sqs, deps.queueNamePrefix, deps.queueSettings);
  const attachments = new DynamoAttachments(deps.dynamodb, deps.tableName);
  const commits = new DynamoCommitStore(deps.dynamodb, deps.tableName);
  const queueDirectory = new DynamoQueueDirectory({
    getResource: (uid) => store.getResource(uid),
    queueUrl: (uid) => queues.queueUrl(uid),
  });
  // The delivery service tells the control loop about messages hidden until later and moved to
  // other queues; the loop, built on the service, is bound once both exist.
  let loopRef: ControlLoop | undefined;
  const now = deps.clock ?? Date.now;
  const deliveryStore = new DynamoDeliveryStore(deps.dynamodb, deps.tableName, {
    ...(deps.delivery.slotsPerShard !== undefined ? { slotsPerShard: deps.delivery.slotsPerShard } : {}),
    ...(deps.delivery.shardsPerGroup !== undefined ? { shardsPerGroup: deps.delivery.shardsPerGroup } : {}),
  });
  const messages = sqsMessageQueue(deps.sqs);
  const delivery = composeDeliveryService(
    deps,
    { store, deliveryStore, messages, queueDirectory, commits, attachments },
    () => loopRef,
  );
  const forms = formRegistry([
    createAtLeastOnceQueueForm(queues),
    createModuleWorkerForm(deps.workers),
    createQueueConsumerForm({
      queues,
      workers: deps.workers,
      attachments,
      delivery: {
        inFlightBatches: (uid) => delivery.inFlightBatches(uid),
        fence: (uid, closedBelow, max) => delivery.fenceGenerations(uid, closedBelow, max),
        replacing: (uid) => delivery.freeUnregistered(uid),
        // Where lanes can be started (locally, and by any AWS function given a launcher).
        ...(deps.lanes
          ? {
              activated: async (a) => {
                const loop = loopRef;
                if (loop) await superviseActivated({ loop, queueDirectory, messages }, a, now());
              },
            }
          : {}),
      },
      getResource: (uid) => store.getResource(uid),
    }),
  ]);
  const engine = new HostEngine({
    store,
    forms,
    cursors: new CursorCodec(deps.cursorKey),
    replayWindowSeconds: LIMITS.replayWindowSeconds,
    clock: deps.clock,
    onAccepted: deps.onAccepted,
  });
  const executor = new OperationExecutor({ store, forms, clock: deps.clock, leaseMs: deps.operationLeaseMs });
  // The background refresh of `observed`: the local Host runs it on a timer, AWS in the supervisor.
  const observer = new ResourceObserver({
    store: new DynamoObservedStore(deps.dynamodb, deps.tableName),
    forms,
    ...(deps.clock ? { clock: deps.clock } : {}),
  });
  const api = createApiRoutes({ origin: deps.origin, engine, forms, authenticator: deps.authenticator });
  const loop = new ControlLoop({
    service: delivery,
    launcher: deps.lanes ?? { start: async () => 'exists' },
    consumerOfQueue: consumerOfQueue(store, attachments, deps.clock),
    ...(deps.clock ? { clock: deps.clock } : {}),
    // A due lane polls for its idle wait: asks for a moment within it start nothing more.
    dueLanes: {
      claim: (uid, at) => deliveryStore.claimDueLane(uid, at, delivery.idleWaitSeconds),
      forget: (uid, at) => deliveryStore.forgetDueLane(uid, at),
    },
  });
  loopRef = loop;
  const producer = new QueueProducer({
    messages,
    commits,
    clock: deps.clock,
    ...(deps.lanes ? { onSent: (target, due) => loop.wake(target.queueUid, due.later, due.now) } : {}),
  });
  const producerRoutes = createProducerRoutes({
    authenticator: deps.authenticator,
    getResource: (uid) => store.getResource(uid),
    targetOf: (r) => queueDirectory.targetOf(r),
    sendBatch: (target, messages) => producer.sendBatch(target, messages),
  });
  const operator = composeQueueOperator(deps, {
    store,
    queues,
    attachments,
    commits,
    deliveryStore,
    producer,
  });
  const operatorRoutes = createOperatorRoutes({
    authenticator: deps.authenticator,
    getResource: (uid) => store.getResource(uid),
    targetOf: (r) => queueDirectory.targetOf(r),
    operator,
    ...(deps.history ? { history: deps.history } : {}),
  });
  const http = composeHttpHandler(deps, store, {
    api,
    extensions: async (req) => (await operatorRoutes(req)) ?? producerRoutes(req),
  });
  return {
    store,
    forms,
    engine,
    executor,
    observer,
    http,
    queues,
    attachments,
    commits,
    queueDirectory,
    producer,
    delivery,
    loop,
    operator,
    /** SQS as the delivery core reaches it (runners and supervision take it from here). */
    messages,
    /** The supervisor's lease, where its last round stopped, and the queues it tagged. */
    supervisorLedger: new DynamoSupervisorLedger(deps.dynamodb, deps.tableName),
  };
}

/**
 * The delivery service on the Host's stores. `loop` answers the control loop once it is built
 * (it is built on this service); until then, and without lanes, hides and sends wake nothing.
 */
function composeDeliveryService(
  deps: HostDeps,
  parts: {
    store: DynamoHostStore;
    deliveryStore: DynamoDeliveryStore;
    messages: MessageQueue;
    queueDirectory: DynamoQueueDirectory;
    commits: DynamoCommitStore;
    attachments: DynamoAttachments;
  },
  loop: () => ControlLoop | undefined,
): DeliveryService {
  const { store } = parts;
  const lanes = deps.lanes;
  return new DeliveryService({
    delivery: {
      hidden: async (consumerUid, generation, seconds) =>
        lanes ? loop()?.wakeLater(consumerUid, generation, seconds) : undefined,
      sent: async (queueUid) => (lanes ? loop()?.wake(queueUid) : undefined),
      acknowledged: (queueUid, count) => deps.history?.acknowledged?.(queueUid, count),
    },
    store: parts.deliveryStore,
    messages: parts.messages,
    directory: parts.queueDirectory,
    commits: parts.commits,
    attachments: parts.attachments,
    getWorker: async (uid) => {
      const r = await store.getResource(uid);
      return r ? { space: r.space, name: r.name, deleted: r.deletedAt !== undefined } : undefined;
    },
    workerFunction: deps.delivery.workerFunction,
    credentialKey: deps.delivery.credentialKey,
    workerTimeoutMs: deps.delivery.workerTimeoutMs,
    ...(deps.delivery.workerTimeoutMsOf ? { workerTimeoutMsOf: deps.delivery.workerTimeoutMsOf } : {}),
    ...(deps.delivery.graceMs !== undefined ? { graceMs: deps.delivery.graceMs } : {}),
    ...(deps.delivery.slotMarginMs !== undefined ? { slotMarginMs: deps.delivery.slotMarginMs } : {}),
    ...(deps.delivery.deferAfterMs !== undefined ? { deferAfterMs: deps.delivery.deferAfterMs } : {}),
    ...(deps.delivery.idleWaitSeconds !== undefined
      ? { idleWaitSeconds: deps.delivery.idleWaitSeconds }
      : {}),
    ...(deps.clock ? { clock: deps.clock } : {}),
  });
}

/** The operator's view of queues: stats, peek, redrive, purge, dispatch state, recent batches. */
function composeQueueOperator(
  deps: HostDeps,
  parts: {
    store: DynamoHostStore;
    queues: SqsQueueBackend;
    attachments: DynamoAttachments;
    commits: DynamoCommitStore;
    deliveryStore: DynamoDeliveryStore;
    producer: QueueProducer;
  },
): QueueOperator {
  const { store, queues, attachments, commits, deliveryStore, producer } = parts;
  const now = deps.clock ?? Date.now;
  const deadLetterRecords = new DynamoDeadLetterRecords(deps.dynamodb, deps.tableName);
  return new QueueOperator({
    stats: (uid) => queues.stats(uid),
    ...(deps.oldestMessageAgeSeconds ? { oldestAgeSeconds: deps.oldestMessageAgeSeconds } : {}),
    reader: new SqsMessageReader(deps.sqs),
    sendBatch: (target, messages) => producer.sendBatch(target, messages),
    committed: (ids) => commits.committed(ids),
    deadLetterRecords: (uid, ids) => deadLetterRecords.get(uid, ids),
    consumerOf: async (queueUid) =>
      (await store.getClaim(consumerClaimKey(queueUid)))?.attributes.consumer ?? undefined,
    attachment: (uid) => attachments.get(uid),
    dispatchState: (uid) => deliveryStore.dispatchState(uid),
    // The close lists a batch (its head in the recent index): no write of its own per batch.
    recentBatches: async (uid, limit) =>
      (await deliveryStore.recentlyClosed(uid, limit, now() - RECENT_BATCHES_KEPT_MS)).flatMap(
        (head) => summarizeHead(head) ?? [],
      ),
  });
}

/** The HTTP edge: the API, console, docs and extension routes, the health check and error logging. */
function composeHttpHandler(
  deps: HostDeps,
  store: DynamoHostStore,
  routes: Pick<HttpCoreOptions, 'api' | 'extensions'>,
): HttpHandler {
  return createHttpHandler({
    get origin() {
      return deps.origin();
    },
    api: routes.api,
    console: createConsoleRoutes(),
    docs: createDocsRoutes(),
    extensions: routes.extensions,
    health: () =>
      withinMs(
        HEALTH_CHECK_MS,
        store.getResource('healthz').then(() => undefined),
      ),
    onError: (err, req, transient) =>
      transient
        ? log.warn('a backing store did not answer; answered 503', {
            method: req.method,
            path: req.path,
            err,
          })
        : log.error('unexpected error', { method: req.method, path: req.path, err }),
  });
}

/** A health check that takes longer than this reports the Host unavailable. */
const HEALTH_CHECK_MS = 3_000;

function withinMs<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** How long a send's lookup of its queue's consumer is reused: a consumer change shows within it. */
const CONSUMER_CACHE_MS = 5_000;

/**
 * The live consumer of a queue (its claim, then its attachment), cached briefly: a busy producer
 * would otherwise pay two reads per send. A stale answer at worst wakes an old generation, whose
 * lane stops at its first step, or misses a wake the supervisor makes up for.
 */
function consumerOfQueue(
  store: DynamoHostStore,
  attachments: DynamoAttachments,
  clock: () => number = Date.now,
): ConsumerOfQueue {
  const cache = new Map<string, { at: number; value: Awaited<ReturnType<ConsumerOfQueue>> }>();
  return async (queueUid) => {
    const hit = cache.get(queueUid);
    if (hit && clock() - hit.at < CONSUMER_CACHE_MS) return hit.value;
    const consumerUid = (await store.getClaim(consumerClaimKey(queueUid)))?.attributes.consumer;
    const a = consumerUid ? await attachments.get(consumerUid) : undefined;
    const value =
      a?.state === 'active'
        ? { consumerUid: a.consumerUid, generation: a.generation, maxConcurrency: a.spec.maxConcurrency }
        : undefined;
    if (cache.size >= 1_000) cache.clear();
    cache.set(queueUid, { at: clock(), value });
    return value;
  };
}
