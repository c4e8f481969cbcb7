/**
 * The ModuleWorker runtime adapter for AWS Lambda: turns a worker module's default export into the
 * handler the dispatcher's `InvokeWorker` state calls with `{kind: 'takoform.queue-batch.v1',
 * slot}`. It forms the batch (`runBatch`: receives from SQS, registers with the Host), runs the
 * module's `queue(batch, env, ctx)` in this process, and reports how it ended; settlement,
 * producer and finalisation calls go to the Host's batch-host function, which holds the Host's
 * tables (this function has no DynamoDB permission at all).
 *
 * The handler is bounded by the Lambda's remaining time less a margin: when it runs out, the
 * invocation counts as `abandoned` (unsettled messages are retried, never acknowledged) and the
 * batch is finalised before Lambda itself would cut the function off. A handler cut off like that
 * is still running (a JavaScript function cannot be stopped from outside), so after its batch is
 * finalised the adapter ends the process: Lambda would otherwise reuse the sandbox and the stale
 * handler would resume next to later batches, beyond the concurrency bound (DL-02).
 */

import { types } from 'node:util';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { z } from 'zod';
import { withCallRecorder } from '../adapters/aws/call-recorder.ts';
import { sqsMessageQueue } from '../adapters/aws/sqs-message-queue.ts';
import { slotSchema } from '../delivery/batch-host-protocol.ts';
import { type BatchHostPort, type QueueInvoker, type RunResult, runLane } from '../delivery/batch-runner.ts';
import type { AcquireResult, Slot } from '../delivery/delivery-service.ts';
import { RUNTIME_MARGIN_MS } from '../delivery/lane-kinds.ts';
import { NamedError } from '../delivery/limits.ts';
import type { InvocationOutcome } from '../delivery/settlement-protocol.ts';
import { AWS_ENV } from '../shared/aws-env.ts';
import { log } from '../shared/log.ts';
import { errorReport, handlerError } from './error-report.ts';
import { createInvocationContext } from './invocation-context.ts';
import { createQueueBatch } from './queue-batch.ts';
import {
  DEFAULT_THROTTLE_RETRY,
  hostCallDeadlines,
  lambdaTransport,
  type RemoteBatchHost,
  remoteBatchHost,
} from './remote-batch-host.ts';
import { type SecretRefs, secretRefsSchema } from './secret-refs.ts';
import { createWorkerEnv } from './worker-env.ts';
import { type SecretClients, secretsOnce } from './worker-secrets.ts';

export interface QueueWorkerConfig {
  /** The worker's `vars`: JSON values, given to the handler as they are. */
  vars?: Record<string, unknown>;
  /** Binding name → the queue Resource (same Space) it sends to. Only the names matter here. */
  queueProducers?: Record<string, { queue: string }>;
  /** `env` name → where its value is read at cold start (never the value itself). */
  secrets?: SecretRefs;
}

export interface QueueWorkerRuntime {
  sqs: Pick<SQSClient, 'send'>;
  /**
   * A fresh Host client per invocation (it keeps the batch credential for dead-letter moves);
   * `limits.lambdaEnd` (epoch ms) is when the invocation ends, which bounds how long its calls
   * wait out throttles.
   */
  host: (limits?: { lambdaEnd: number }) => RemoteBatchHost;
  /** How long to long-poll an empty queue before handing the slot back (the Host's setting). */
  idleWaitSeconds: number;
  /** Clients for the worker's secrets (default: none, so a worker with secrets fails clearly). */
  secretClients?: SecretClients;
  /** Kept free at the end of the Lambda's time for finalisation (default 5 s). */
  marginMs?: number;
  clock?: () => number;
  /** Diagnostics (never bodies, never credentials). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /**
   * Ends the process after a handler was cut off (default `process.exit`). Tests pass a recorder;
   * if it returns, the invocation fails with `Runtime.ExitError` as Lambda reports an exit.
   */
  exit?: (code: number) => void;
}

/** The part of the Lambda context the adapter uses. */
export interface WorkerLambdaContext {
  getRemainingTimeInMillis(): number;
}

export const QUEUE_BATCH_EVENT_KIND = 'takoform.queue-batch.v1';

const eventSchema = z.strictObject({
  kind: z.literal(QUEUE_BATCH_EVENT_KIND),
  slot: slotSchema,
  // An Express lane's window (epoch ms): no batch starts that would not end before it.
  laneUntil: z.number().int().nonnegative().max(8.64e15).optional(),
});

const configSchema = z.strictObject({
  vars: z.record(z.string(), z.unknown()).optional(),
  queueProducers: z.record(z.string(), z.strictObject({ queue: z.string().min(1) })).optional(),
  secrets: secretRefsSchema.optional(),
});

/** `{vars, queueProducers, secrets}` from the function's environment (set by ModuleWorkerFunction). */
export function workerConfigFromEnv(env: NodeJS.ProcessEnv): QueueWorkerConfig {
  const raw = env[AWS_ENV.workerConfig];
  return configSchema.parse(raw ? JSON.parse(raw) : {});
}

function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}

/** The runtime on AWS: default clients and the batch-host function named in the environment. */
export function runtimeFromEnv(env: NodeJS.ProcessEnv): QueueWorkerRuntime {
  const fn = env[AWS_ENV.batchHostFunction];
  if (!fn) throw new Error(`${AWS_ENV.batchHostFunction} is not set`);
  const idle = Number(env[AWS_ENV.idleWaitSeconds] ?? 20);
  // Not clients.ts: the worker bundle stays free of the DynamoDB SDK and zod's fault schema.
  const lambda = withCallRecorder(new LambdaClient({}), 'lambda');
  return {
    sqs: withCallRecorder(new SQSClient({}), 'sqs'),
    host: (limits) =>
      remoteBatchHost(
        lambdaTransport(
          lambda,
          fn,
          limits
            ? { ...DEFAULT_THROTTLE_RETRY, until: hostCallDeadlines(limits.lambdaEnd) }
            : DEFAULT_THROTTLE_RETRY,
        ),
      ),
    // Created on first use: most workers declare no secrets.
    secretClients: {
      secretsManager: once(() => withCallRecorder(new SecretsManagerClient({}), 'secretsmanager')),
      ssm: once(() => withCallRecorder(new SSMClient({}), 'ssm')),
    },
    idleWaitSeconds: Number.isInteger(idle) && idle >= 0 && idle <= 20 ? idle : 20,
    log: (message, fields) => log.info(message, fields),
  };
}

/**
 * The module's `queue` handler if it declares one (MW-02): `default` is a plain object (not an
 * array, not a Proxy) with an own data property `queue` holding a function. No getter runs.
 */
export function declaredQueueHandler(
  moduleDefault: unknown,
): { self: object; fn: (...args: unknown[]) => unknown } | undefined {
  if (moduleDefault === null || typeof moduleDefault !== 'object' || types.isProxy(moduleDefault))
    return undefined;
  if (Array.isArray(moduleDefault)) return undefined;
  const proto = Object.getPrototypeOf(moduleDefault);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const desc = Object.getOwnPropertyDescriptor(moduleDefault, 'queue');
  if (!desc || !('value' in desc) || typeof desc.value !== 'function') return undefined;
  return { self: moduleDefault, fn: desc.value };
}

function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

/** What Lambda reports when the runtime process exits during an invocation. */
export const RUNTIME_EXIT_ERROR = 'Runtime.ExitError';

/** The exit code after a cut-off (any code, or none, fails the invocation the same way). */
export const CUT_OFF_EXIT_CODE = 1;

/**
 * Runs one delivery in this process: batch object, env and ctx exactly as the local runtime
 * builds them. Ends at `deadlineAt` at the latest, as `abandoned`; calls made after the end are
 * refused here (settlement `unknown_batch`, producers `backend_unavailable`).
 */
function inProcessInvoker(
  moduleDefault: unknown,
  config: QueueWorkerConfig,
  secrets: Readonly<Record<string, string>>,
  host: RemoteBatchHost,
  deadlineOf: (slot: Slot) => number,
  clock: () => number,
  log: NonNullable<QueueWorkerRuntime['log']>,
  onCutOff: (batchId: string) => void,
): QueueInvoker {
  return {
    invoke: async (delivery, settle, slot, failed): Promise<InvocationOutcome> => {
      const deadlineAt = () => deadlineOf(slot);
      const handler = declaredQueueHandler(moduleDefault);
      if (!handler) {
        log('the module does not declare a queue handler', { batchId: delivery.batchId });
        return 'threw';
      }
      let ended = false;
      const pending = new Set<Promise<void>>();
      const track = <T>(p: Promise<T>): Promise<T> => {
        const done = p.then(
          () => undefined,
          () => undefined,
        );
        pending.add(done);
        void done.then(() => pending.delete(done));
        return p;
      };
      const batch = createQueueBatch(delivery, {
        settle: (call) =>
          ended
            ? Promise.reject(
                new NamedError('unknown_batch', 'the batch was finalised when its invocation ended'),
              )
            : track(settle(call)),
      });
      const env = createWorkerEnv({
        vars: config.vars ?? {},
        secrets,
        producerBindings: Object.keys(config.queueProducers ?? {}),
        produce: (call) =>
          ended
            ? Promise.reject(
                new NamedError('backend_unavailable', 'the invocation that owned this binding has ended'),
              )
            : track(host.produce(delivery.batchId, delivery.credential, call)),
      });
      const context = createInvocationContext();
      const run = (async (): Promise<InvocationOutcome> => {
        let outcome: InvocationOutcome = 'threw';
        try {
          await Reflect.apply(handler.fn, handler.self, [batch, env, context.ctx]);
          outcome = 'returned';
        } catch (err) {
          log('queue handler failed', { batchId: delivery.batchId, ...errorReport(err) });
          failed?.(handlerError(err));
        }
        await context.settled();
        context.expire();
        for (const reason of context.rejections) {
          log('ctx.waitUntil promise rejected', { batchId: delivery.batchId, ...errorReport(reason) });
        }
        while (pending.size > 0) await Promise.all([...pending]);
        return outcome;
      })();
      let timer: NodeJS.Timeout | undefined;
      const cutOff = new Promise<'cut-off'>((resolve) => {
        timer = setTimeout(() => resolve('cut-off'), Math.max(0, deadlineAt() - clock()));
      });
      try {
        const outcome = await Promise.race([run, cutOff]);
        if (outcome !== 'cut-off') return outcome;
        log('queue handler cut off at its time bound', { batchId: delivery.batchId });
        onCutOff(delivery.batchId);
        return 'abandoned';
      } finally {
        clearTimeout(timer);
        ended = true;
        context.expire();
      }
    },
  };
}

/**
 * The Lambda handler for a worker module. `moduleDefault` is the module's default export as it
 * is (checked on every invocation, as the local runtime does); `config` its vars and producer
 * bindings. `runtime` defaults to the AWS clients and the environment ModuleWorkerFunction sets.
 */
export function createQueueWorkerHandler(
  moduleDefault: unknown,
  config: QueueWorkerConfig,
  runtime?: QueueWorkerRuntime,
) {
  let rt = runtime;
  const noClients = () => {
    throw new Error('no secret clients in this runtime');
  };
  const secretsOf = secretsOnce(
    config.secrets ?? {},
    () => rt?.secretClients ?? { secretsManager: noClients, ssm: noClients },
  );
  return async (event: unknown, context: WorkerLambdaContext): Promise<RunResult> => {
    rt ??= runtimeFromEnv(process.env);
    const { slot, laneUntil } = eventSchema.parse(event) as { slot: Slot; laneUntil?: number };
    // Before any receive: a batch never starts without every secret its worker declares.
    const secrets = await secretsOf();
    const clock = rt.clock ?? Date.now;
    const startedAt = clock();
    const lambdaEnd = startedAt + context.getRemainingTimeInMillis();
    const margin = rt.marginMs ?? RUNTIME_MARGIN_MS;
    const host = rt.host({ lambdaEnd });
    const runtimeLog = rt.log ?? (() => {});
    const exit = rt.exit ?? ((code: number) => process.exit(code));
    // A handler must end before the Lambda does and before its slot's deadline, after which
    // recovery would finish the batch on its own.
    const deadlineOf = (s: Slot) => Math.min(lambdaEnd, s.deadline) - margin;
    let cutOff: string | undefined;
    // After a cut-off no further batch starts here: the lane ends once that batch is finalised,
    // and its finalisation takes no next slot. (Every other call goes to `host` unchanged.)
    const laneHost: BatchHostPort = Object.assign(Object.create(host) as BatchHostPort, {
      acquire: (previous: Slot, credential: string): Promise<AcquireResult> =>
        cutOff !== undefined ? Promise.resolve({ status: 'stop' }) : host.acquire(previous, credential),
      finalize: (...[s, credential, outcome, opts]: Parameters<BatchHostPort['finalize']>) =>
        host.finalize(s, credential, outcome, cutOff !== undefined ? { ...opts, next: false } : opts),
    });
    let result: Awaited<ReturnType<typeof runLane>> | undefined;
    let failure: unknown;
    try {
      result = await runLane(
        slot,
        {
          messages: sqsMessageQueue(rt.sqs),
          host: laneHost,
          invoker: inProcessInvoker(
            moduleDefault,
            config,
            secrets,
            host,
            deadlineOf,
            clock,
            runtimeLog,
            (batchId) => {
              cutOff ??= batchId;
            },
          ),
          idleWaitSeconds: Math.max(
            0,
            Math.min(rt.idleWaitSeconds, Math.floor((deadlineOf(slot) - clock()) / 1000) - 1),
          ),
          clock,
          log: runtimeLog,
        },
        // A batch starts only while all of it — gathering, registration and its handler's whole
        // bound — ends before the invocation does (less the margin): every handler gets its bound
        // counted from its own start, whenever in the invocation it begins.
        {
          maxBatches: 100,
          budgetMs: Math.max(0, lambdaEnd - startedAt),
          until: Math.min(laneUntil ?? Number.POSITIVE_INFINITY, lambdaEnd - margin),
        },
      );
    } catch (err) {
      if (cutOff === undefined) throw err;
      failure = err;
    }
    if (cutOff !== undefined) {
      // The cut-off handler is still running and Lambda would resume it in this sandbox next to
      // later batches (DL-02). Its batch was finalised above (`finalize` returned: unsettled
      // messages retried, never acknowledged; its slot released), and its Host calls are refused
      // here from the cut-off on, so end the process now, before returning.
      //
      // The state machine sees the InvokeWorker task fail (Lambda reports Runtime.ExitError; it
      // is in no Retry list, and a synchronous invoke is not retried by Lambda), so the lane
      // goes to RecoverBatch for the slot of its AcquireSlot: the cut-off batch itself or an
      // earlier batch of this lane. Either was finalised already — head applied, slot released —
      // so recovery finds no slot and an applied head and only removes the absent slot: harmless.
      // The lane then acquires again, and a new sandbox delivers the retry (attempt + 1). If
      // finalize itself failed (`failure`), the cut-off batch keeps its slot until its deadline:
      // RecoverBatch (when it is that batch) closes it as abandoned, and recovery after the
      // deadline applies it — unsettled messages retried, never acknowledged.
      runtimeLog('ending the worker process after a cut-off', {
        batchId: cutOff,
        consumerUid: slot.consumerUid,
        ...(failure !== undefined ? { error: errorName(failure) } : {}),
      });
      exit(CUT_OFF_EXIT_CODE);
      throw Object.assign(new Error('the worker process ended after a handler was cut off'), {
        name: RUNTIME_EXIT_ERROR,
      });
    }
    const done = result as NonNullable<typeof result>;
    runtimeLog('batch done', { batchId: slot.batchId, consumerUid: slot.consumerUid, ...done });
    return done;
  };
}
