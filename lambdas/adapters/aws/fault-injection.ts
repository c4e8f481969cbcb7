/**
 * Fault injection for AWS SDK v3 clients: what AWS does under load and the local stand-ins never
 * do. DynamoDB Local never returns `UnprocessedItems`/`UnprocessedKeys` and never throttles;
 * fauxqs never throttles or fails a batch entry; there is no Lambda service to answer
 * `TooManyRequestsException`. Configured by one environment variable, `TAKOFORM_FAULTS` (JSON);
 * without it nothing is injected and no middleware is added.
 *
 * ```json
 * {"seed":7,"dynamodb":{"throttle":0.05,"unprocessed":0.3},"sqs":{"throttle":0.02},
 *  "lambda":{"tooManyRequests":0.1}}
 * ```
 *
 * Where each fault sits, and why:
 * - **Errors** (throttles, service errors, transaction throttles) are thrown by a middleware in
 *   the `finalizeRequest` step right after the SDK's `retryMiddleware`, i.e. inside the retry
 *   loop and before signing and sending: every attempt draws again, the SDK's retry strategy
 *   classifies the error exactly as a real one (same exception class, `$fault`, `$metadata`), and
 *   the request never reaches the server, so an injected error has no effect.
 * - **Partial batches** (`UnprocessedItems`, `UnprocessedKeys`, failed SQS batch entries) are
 *   successful responses, which the SDK never retries; an `initialize`-step middleware rewrites
 *   the request so that only the processed part reaches the server, then reports the rest in the
 *   response. What is reported as unprocessed was really not written (or read, or sent).
 *
 * Every decision comes from a seeded generator (one stream per service, label, operation and
 * kind of fault), so the same seed and the same sequence of calls give the same faults.
 *
 * **Local Lambda invocations** (the local Host calls the worker, the dispatcher step and the batch
 * host as functions, with no Lambda client in between) are wrapped by `withLambdaInvokeFaults`,
 * configured under `localInvoke` (per invocation; unset rates are 0):
 *
 * ```json
 * {"seed":7,"localInvoke":{"tooManyRequests":0.05,"serviceError":0.02,"timeout":0.01,
 *  "timeoutMs":5000,"functions":{"worker":{"timeout":0.1}}}}
 * ```
 *
 * - `tooManyRequests`: throws `Lambda.TooManyRequestsException`; the function did not run.
 * - `serviceError`: throws `Lambda.ServiceException`, drawn half before the function runs (it did
 *   not run) and half after it ran (its result is lost), as the caller of Lambda cannot tell which.
 * - `timeout`: the function runs, but the invocation never answers: with `timeoutMs` it rejects
 *   with `Lambda.Timeout` after that many ms; without, it never settles and the caller's own bound
 *   (the Task's `TimeoutSeconds`, i.e. `States.Timeout`) ends it. The function is not stopped.
 * - `functions`: per-label rates (`worker`, `step`, `batch-host`); unset ones inherit.
 * The errors are plain Errors with the names the Step Functions Lambda integration reports, which
 * is what an ASL `Retry`/`Catch` matches on.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  InternalServerError,
  ProvisionedThroughputExceededException,
  RequestLimitExceeded,
  ThrottlingException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { ServiceException as LambdaServiceError, TooManyRequestsException } from '@aws-sdk/client-lambda';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { RequestThrottled, SQSServiceException } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { log } from '../../shared/log.ts';

export const FAULTS_ENV = 'TAKOFORM_FAULTS';

export type FaultService = 'dynamodb' | 'sqs' | 'lambda';

/** Operations a per-operation override may name (the API names, without `Command`). */
const OPERATIONS: Record<FaultService, readonly string[]> = {
  dynamodb: [
    'BatchExecuteStatement',
    'BatchGetItem',
    'BatchWriteItem',
    'CreateTable',
    'DeleteItem',
    'DeleteTable',
    'DescribeTable',
    'DescribeTimeToLive',
    'ExecuteStatement',
    'ExecuteTransaction',
    'GetItem',
    'ListTables',
    'PutItem',
    'Query',
    'Scan',
    'TransactGetItems',
    'TransactWriteItems',
    'UpdateItem',
    'UpdateTable',
    'UpdateTimeToLive',
  ],
  sqs: [
    'AddPermission',
    'CancelMessageMoveTask',
    'ChangeMessageVisibility',
    'ChangeMessageVisibilityBatch',
    'CreateQueue',
    'DeleteMessage',
    'DeleteMessageBatch',
    'DeleteQueue',
    'GetQueueAttributes',
    'GetQueueUrl',
    'ListDeadLetterSourceQueues',
    'ListMessageMoveTasks',
    'ListQueues',
    'ListQueueTags',
    'PurgeQueue',
    'ReceiveMessage',
    'RemovePermission',
    'SendMessage',
    'SendMessageBatch',
    'SetQueueAttributes',
    'StartMessageMoveTask',
    'TagQueue',
    'UntagQueue',
  ],
  lambda: ['GetFunction', 'GetFunctionConfiguration', 'Invoke', 'InvokeAsync', 'InvokeWithResponseStream'],
};

const probability = z
  .number({ error: 'must be a number between 0 and 1' })
  .min(0, 'must be a number between 0 and 1')
  .max(1, 'must be a number between 0 and 1');

const dynamoRates = {
  /** Per attempt: ProvisionedThroughputExceeded / Throttling / RequestLimitExceeded, before the server. */
  throttle: probability.optional(),
  /** Per BatchWriteItem / BatchGetItem with ≥ 2 requests: some move to UnprocessedItems / -Keys, unwritten. */
  unprocessed: probability.optional(),
  /** Per attempt: InternalServerError (500), before the server. */
  serviceError: probability.optional(),
  /** Per TransactWriteItems / TransactGetItems attempt: TransactionCanceledException with ThrottlingError reasons. */
  transactionThrottle: probability.optional(),
};
const sqsRates = {
  /** Per attempt: RequestThrottled, before the server. */
  throttle: probability.optional(),
  /** Per attempt: InternalFailure (500) or ServiceUnavailable (503), before the server. */
  serviceError: probability.optional(),
  /** Per Send/Delete/ChangeMessageVisibility batch: some entries fail (InternalError), not applied. */
  batchEntryFailure: probability.optional(),
};
const lambdaRates = {
  /** Per attempt: TooManyRequestsException (429), before the service. */
  tooManyRequests: probability.optional(),
  /** Per attempt: ServiceException (500), before the service. */
  serviceError: probability.optional(),
};

/** What a local Lambda invocation stands for: the worker, the dispatcher step, the batch host. */
export type LocalInvokeLabel = 'worker' | 'step' | 'batch-host';
const LOCAL_INVOKE_LABELS: readonly LocalInvokeLabel[] = ['worker', 'step', 'batch-host'];

const localInvokeRates = {
  /** Per invocation: Lambda.TooManyRequestsException; the function did not run. */
  tooManyRequests: probability.optional(),
  /** Per invocation: Lambda.ServiceException, before or after the function ran. */
  serviceError: probability.optional(),
  /** Per invocation: no answer (the function runs); see `timeoutMs`. */
  timeout: probability.optional(),
};

const localInvokeSchema = z.strictObject({
  ...localInvokeRates,
  /** After how long a timed-out invocation rejects with Lambda.Timeout; unset: it never settles. */
  timeoutMs: z
    .number({ error: 'must be a positive integer (ms)' })
    .int('must be a positive integer (ms)')
    .min(1, 'must be a positive integer (ms)')
    .max(2 ** 31 - 1, 'must be below 2^31 ms')
    .optional(),
  /** Per-function rates, e.g. `{"worker":{"timeout":1}}`; unset ones inherit. */
  functions: z.partialRecord(z.enum(LOCAL_INVOKE_LABELS), z.strictObject(localInvokeRates)).optional(),
});

function serviceSchema<S extends z.ZodRawShape>(service: FaultService, rates: S) {
  const known = new Set(OPERATIONS[service]);
  return z.strictObject({
    ...rates,
    /** Per-operation rates, e.g. `{"BatchWriteItem":{"unprocessed":1}}`; unset ones inherit. */
    operations: z
      .record(z.string(), z.strictObject(rates))
      .superRefine((ops, ctx) => {
        for (const op of Object.keys(ops))
          if (!known.has(op))
            ctx.addIssue({
              code: 'custom',
              path: [op],
              message: `unknown ${service} operation (use the API name, e.g. ${OPERATIONS[service][0]})`,
            });
      })
      .optional(),
  });
}

export const faultConfigSchema = z.strictObject({
  seed: z
    .number({ error: 'must be a non-negative integer' })
    .int('must be a non-negative integer')
    .min(0, 'must be a non-negative integer')
    .max(2 ** 32 - 1, 'must be below 2^32'),
  dynamodb: serviceSchema('dynamodb', dynamoRates).optional(),
  sqs: serviceSchema('sqs', sqsRates).optional(),
  lambda: serviceSchema('lambda', lambdaRates).optional(),
  localInvoke: localInvokeSchema.optional(),
});

export type FaultConfig = z.infer<typeof faultConfigSchema>;

/** Parses a `TAKOFORM_FAULTS` value; throws one Error naming every problem. */
export function parseFaultConfig(raw: string): FaultConfig {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new Error(`${FAULTS_ENV} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = faultConfigSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new Error(`invalid ${FAULTS_ENV}: ${problems.join('; ')}`);
  }
  return parsed.data;
}

/** The configuration in `env`, or undefined when the variable is unset or empty (no faults). */
export function faultConfigFromEnv(env: NodeJS.ProcessEnv = process.env): FaultConfig | undefined {
  const raw = env[FAULTS_ENV];
  return raw === undefined || raw.trim() === '' ? undefined : parseFaultConfig(raw);
}

// ---------------------------------------------------------------------------------------------
// Observing what was injected (tests, and the chaos suite's report)

export type FaultKind =
  | 'throttle'
  | 'serviceError'
  | 'transactionThrottle'
  | 'tooManyRequests'
  | 'unprocessed'
  | 'batchEntryFailure'
  | 'timeout';

export interface InjectedFault {
  service: FaultService;
  label: string;
  operation: string;
  kind: FaultKind;
  /** The error thrown (error faults). */
  error?: string;
  /** Requests, keys or entries withheld from the server, out of `of` (partial faults). */
  withheld?: number;
  of?: number;
  /** Whether the function ran (local invocation faults). */
  ran?: boolean;
}

const listeners = new Set<(fault: InjectedFault) => void>();

/** Calls `listener` for every fault injected in this process; returns the unsubscribe. */
export function onInjectedFault(listener: (fault: InjectedFault) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function report(fault: InjectedFault): void {
  log.debug('injected fault', { ...fault });
  for (const l of listeners) l(fault);
}

// ---------------------------------------------------------------------------------------------
// Seeded generator

/** mulberry32: small, fast, and the same sequence for the same seed on every machine. */
function generator(seed: number): () => number {
  let state = seed >>> 0 || 0x9e3779b9;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** FNV-1a of a string, to derive one independent stream per (seed, service, label, operation, kind). */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

class Streams {
  private readonly streams = new Map<string, () => number>();
  private readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  next(key: string): number {
    let g = this.streams.get(key);
    if (!g) {
      g = generator(hash(`${this.prefix}|${key}`));
      this.streams.set(key, g);
    }
    return g();
  }

  /** An integer in [min, max]. */
  int(key: string, min: number, max: number): number {
    return min + Math.floor(this.next(key) * (max - min + 1));
  }

  /** `k` distinct indexes of 0..n-1, in ascending order. */
  pick(key: string, n: number, k: number): Set<number> {
    const all = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(key, 0, i);
      [all[i], all[j]] = [all[j] as number, all[i] as number];
    }
    return new Set(all.slice(0, k));
  }
}

// ---------------------------------------------------------------------------------------------
// The errors, as the SDK's deserializer would build them

type Rates = Partial<Record<string, number>>;

const INJECTED = ' (injected by TAKOFORM_FAULTS)';
let requestCounter = 0;
const metadata = (httpStatusCode: number) => ({
  httpStatusCode,
  requestId: `takoform-fault-${(++requestCounter).toString(36)}`,
});

const DYNAMO_THROTTLES = [
  () =>
    new ProvisionedThroughputExceededException({
      message: `The level of configured provisioned throughput for the table was exceeded.${INJECTED}`,
      $metadata: metadata(400),
    }),
  () =>
    new ThrottlingException({
      message: `Throughput exceeds the current capacity of your table or index.${INJECTED}`,
      $metadata: metadata(400),
    }),
  () =>
    new RequestLimitExceeded({
      message: `Throughput exceeds the current throughput limit for your account.${INJECTED}`,
      $metadata: metadata(400),
    }),
];

function sqsServerError(unavailable: boolean): Error {
  return new SQSServiceException({
    name: unavailable ? 'ServiceUnavailable' : 'InternalFailure',
    $fault: 'server',
    message: `${unavailable ? 'Service is unavailable' : 'Internal failure'}.${INJECTED}`,
    $metadata: metadata(unavailable ? 503 : 500),
  });
}

// ---------------------------------------------------------------------------------------------
// The middleware

type Input = Record<string, unknown>;
interface Args {
  input: Input;
  request?: unknown;
}
interface Result {
  output: Record<string, unknown> & { $metadata: Record<string, unknown> };
  response: unknown;
}
type Handler = (args: Args) => Promise<Result>;
interface Context {
  commandName?: string;
}
type Middleware = (next: Handler, context: Context) => Handler;
interface StackLike {
  add(middleware: Middleware, options: Record<string, unknown>): void;
  addRelativeTo(middleware: Middleware, options: Record<string, unknown>): void;
}

export type FaultableClient = Pick<DynamoDBClient | SQSClient | LambdaClient, 'middlewareStack'>;

/** `map[key]`, created by `init` when absent. */
function entry<V>(map: Record<string, V>, key: string, init: () => V): V {
  if (!Object.hasOwn(map, key)) map[key] = init();
  return map[key] as V;
}

const operationOf = (context: Context) => (context.commandName ?? '').replace(/Command$/, '');

class Injector {
  private readonly streams: Streams;
  private readonly config: FaultConfig;
  private readonly service: FaultService;
  private readonly label: string;

  constructor(config: FaultConfig, service: FaultService, label: string) {
    this.config = config;
    this.service = service;
    this.label = label;
    this.streams = new Streams(`${config.seed}|${service}|${label}`);
  }

  private rate(operation: string, kind: string): number {
    const s = this.config[this.service] as (Rates & { operations?: Record<string, Rates> }) | undefined;
    return s?.operations?.[operation]?.[kind] ?? s?.[kind] ?? 0;
  }

  /** Draws only when the rate is positive, so unrelated settings never shift a stream. */
  private fires(operation: string, kind: FaultKind): boolean {
    const p = this.rate(operation, kind);
    return p > 0 && this.streams.next(`${operation}|${kind}`) < p;
  }

  /** The error this attempt fails with, if any (decided before the request is signed and sent). */
  errorFor(operation: string, input: Input): { kind: FaultKind; error: Error } | undefined {
    switch (this.service) {
      case 'dynamodb': {
        if (this.fires(operation, 'throttle')) {
          const make = DYNAMO_THROTTLES[this.streams.int(`${operation}|throttle-kind`, 0, 2)]!;
          return { kind: 'throttle', error: make() };
        }
        if (this.fires(operation, 'serviceError'))
          return {
            kind: 'serviceError',
            error: new InternalServerError({
              message: `Internal server error.${INJECTED}`,
              $metadata: metadata(500),
            }),
          };
        if (
          (operation === 'TransactWriteItems' || operation === 'TransactGetItems') &&
          this.fires(operation, 'transactionThrottle')
        )
          return { kind: 'transactionThrottle', error: this.transactionThrottle(operation, input) };
        return undefined;
      }
      case 'sqs': {
        if (this.fires(operation, 'throttle'))
          return {
            kind: 'throttle',
            error: new RequestThrottled({
              message: `Request is throttled.${INJECTED}`,
              $metadata: metadata(400),
            }),
          };
        if (this.fires(operation, 'serviceError'))
          return {
            kind: 'serviceError',
            error: sqsServerError(this.streams.next(`${operation}|serviceError-kind`) < 0.5),
          };
        return undefined;
      }
      case 'lambda': {
        if (this.fires(operation, 'tooManyRequests'))
          return {
            kind: 'tooManyRequests',
            error: new TooManyRequestsException({
              message: `Rate Exceeded.${INJECTED}`,
              Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded',
              Type: 'User',
              retryAfterSeconds: '1',
              $metadata: metadata(429),
            }),
          };
        if (this.fires(operation, 'serviceError'))
          return {
            kind: 'serviceError',
            error: new LambdaServiceError({
              message: `The service encountered an internal error.${INJECTED}`,
              $metadata: metadata(500),
            }),
          };
        return undefined;
      }
    }
  }

  /** One reason per item, as DynamoDB reports a throttled transaction: at least one ThrottlingError. */
  private transactionThrottle(operation: string, input: Input): Error {
    const n = Math.max(1, (input.TransactItems as unknown[] | undefined)?.length ?? 1);
    const throttled = this.streams.pick(
      `${operation}|transaction-items`,
      n,
      this.streams.int(`${operation}|transaction-k`, 1, n),
    );
    const reasons = Array.from({ length: n }, (_, i) =>
      throttled.has(i)
        ? { Code: 'ThrottlingError', Message: `Throughput exceeds the current capacity.${INJECTED}` }
        : { Code: 'None' },
    );
    return new TransactionCanceledException({
      message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
      CancellationReasons: reasons,
      $metadata: metadata(400),
    });
  }

  readonly attemptMiddleware: Middleware = (next, context) => async (args) => {
    const operation = operationOf(context);
    const fault = this.errorFor(operation, args.input ?? {});
    if (fault) {
      report({
        service: this.service,
        label: this.label,
        operation,
        kind: fault.kind,
        error: fault.error.name,
      });
      throw fault.error;
    }
    return next(args);
  };

  readonly partialMiddleware: Middleware = (next, context) => async (args) => {
    const operation = operationOf(context);
    if (this.service === 'dynamodb' && operation === 'BatchWriteItem') return this.batchWrite(next, args);
    if (this.service === 'dynamodb' && operation === 'BatchGetItem') return this.batchGet(next, args);
    if (
      this.service === 'sqs' &&
      (operation === 'SendMessageBatch' ||
        operation === 'DeleteMessageBatch' ||
        operation === 'ChangeMessageVisibilityBatch')
    )
      return this.sqsBatch(operation, next, args);
    return next(args);
  };

  /**
   * Withholds 1..n-1 of the n write requests (DynamoDB throws rather than process none, which the
   * throttle fault covers): only the rest is sent; the withheld ones come back as UnprocessedItems.
   */
  private async batchWrite(next: Handler, args: Args): Promise<Result> {
    const op = 'BatchWriteItem';
    const requestItems = (args.input.RequestItems ?? {}) as Record<string, unknown[]>;
    const flat = Object.entries(requestItems).flatMap(([table, reqs]) => reqs.map((r) => ({ table, r })));
    if (flat.length < 2 || !this.fires(op, 'unprocessed')) return next(args);
    const withheld = this.streams.pick(
      `${op}|items`,
      flat.length,
      this.streams.int(`${op}|k`, 1, flat.length - 1),
    );
    const kept: Record<string, unknown[]> = {};
    const unprocessed: Record<string, unknown[]> = {};
    flat.forEach(({ table, r }, i) => {
      entry(withheld.has(i) ? unprocessed : kept, table, () => []).push(r);
    });
    const result = await next({ ...args, input: { ...args.input, RequestItems: kept } });
    const fromServer = (result.output.UnprocessedItems ?? {}) as Record<string, unknown[]>;
    for (const [table, reqs] of Object.entries(fromServer)) entry(unprocessed, table, () => []).push(...reqs);
    result.output.UnprocessedItems = unprocessed;
    report({
      service: this.service,
      label: this.label,
      operation: op,
      kind: 'unprocessed',
      withheld: withheld.size,
      of: flat.length,
    });
    return result;
  }

  /** Withholds 1..n-1 of the n keys: only the rest is read; the others come back as UnprocessedKeys. */
  private async batchGet(next: Handler, args: Args): Promise<Result> {
    const op = 'BatchGetItem';
    type TableRequest = { Keys?: unknown[] } & Record<string, unknown>;
    const requestItems = (args.input.RequestItems ?? {}) as Record<string, TableRequest>;
    const flat = Object.entries(requestItems).flatMap(([table, req]) =>
      (req.Keys ?? []).map((key) => ({ table, key })),
    );
    if (flat.length < 2 || !this.fires(op, 'unprocessed')) return next(args);
    const withheld = this.streams.pick(
      `${op}|keys`,
      flat.length,
      this.streams.int(`${op}|k`, 1, flat.length - 1),
    );
    const kept: Record<string, TableRequest> = {};
    const unprocessed: Record<string, TableRequest> = {};
    const options = (table: string) => () => {
      const { Keys: _keys, ...rest } = requestItems[table] as TableRequest;
      return { ...rest, Keys: [] };
    };
    flat.forEach(({ table, key }, i) => {
      entry(withheld.has(i) ? unprocessed : kept, table, options(table)).Keys?.push(key);
    });
    const result = await next({ ...args, input: { ...args.input, RequestItems: kept } });
    const fromServer = (result.output.UnprocessedKeys ?? {}) as Record<string, TableRequest>;
    for (const [table, req] of Object.entries(fromServer))
      entry(unprocessed, table, () => ({ ...req, Keys: [] })).Keys?.push(...(req.Keys ?? []));
    result.output.UnprocessedKeys = unprocessed;
    report({
      service: this.service,
      label: this.label,
      operation: op,
      kind: 'unprocessed',
      withheld: withheld.size,
      of: flat.length,
    });
    return result;
  }

  /**
   * Fails 1..n of the n entries (SQS may fail them all and still answer 200): only the rest is
   * sent; the failed ones are reported with `SenderFault: false` and are not applied.
   */
  private async sqsBatch(op: string, next: Handler, args: Args): Promise<Result> {
    const entries = (args.input.Entries ?? []) as { Id?: string }[];
    if (entries.length < 1 || !this.fires(op, 'batchEntryFailure')) return next(args);
    const failed = this.streams.pick(
      `${op}|entries`,
      entries.length,
      this.streams.int(`${op}|k`, 1, entries.length),
    );
    const kept = entries.filter((_, i) => !failed.has(i));
    const failures = entries
      .filter((_, i) => failed.has(i))
      .map((e) => ({
        Id: e.Id,
        SenderFault: false,
        Code: 'InternalError',
        Message: `We encountered an internal error. Please try again.${INJECTED}`,
      }));
    const result: Result =
      kept.length > 0
        ? await next({ ...args, input: { ...args.input, Entries: kept } })
        : { output: { Successful: [], Failed: [], $metadata: metadata(200) }, response: undefined };
    result.output.Failed = [...((result.output.Failed as unknown[] | undefined) ?? []), ...failures];
    result.output.Successful ??= [];
    report({
      service: this.service,
      label: this.label,
      operation: op,
      kind: 'batchEntryFailure',
      withheld: failed.size,
      of: entries.length,
    });
    return result;
  }
}

const ATTEMPT_MIDDLEWARE = 'takoformFaultAttempt';
const PARTIAL_MIDDLEWARE = 'takoformFaultPartial';
const faulted = new WeakSet<object>();
let announced = false;

export interface WithFaultsOptions {
  /** The configuration to use instead of `TAKOFORM_FAULTS` (tests). */
  config?: FaultConfig;
  /** Separates the streams of clients that should not share a schedule (default ''). */
  label?: string;
}

/**
 * Adds fault injection to `client` when `TAKOFORM_FAULTS` is set (or `opts.config` is given) and
 * configures `service`; otherwise returns the client untouched. Applying it twice is a no-op.
 * Throws on a malformed `TAKOFORM_FAULTS`, so a mistyped setting never runs silently without faults.
 * Apply it before the client's first `send` if the client was built with `cacheMiddleware: true`.
 */
export function withFaults<C extends FaultableClient>(
  client: C,
  service: FaultService,
  opts: WithFaultsOptions = {},
): C {
  const config = opts.config ?? faultConfigFromEnv();
  if (!config?.[service] || faulted.has(client)) return client;
  faulted.add(client);
  if (!announced && !opts.config) {
    announced = true;
    log.warn(`${FAULTS_ENV} is set: injecting AWS faults`, { seed: config.seed });
  }
  const injector = new Injector(config, service, opts.label ?? '');
  const stack = client.middlewareStack as unknown as StackLike;
  stack.addRelativeTo(injector.attemptMiddleware, {
    name: ATTEMPT_MIDDLEWARE,
    relation: 'after',
    toMiddleware: 'retryMiddleware',
    override: true,
  });
  stack.add(injector.partialMiddleware, { name: PARTIAL_MIDDLEWARE, step: 'initialize', override: true });
  return client;
}

// ---------------------------------------------------------------------------------------------
// Local Lambda invocations

let announcedInvokes = false;

const invokeError = (name: string, message: string): Error =>
  Object.assign(new Error(`${message}${INJECTED}`), { name });

/**
 * `fn` as a Lambda invocation that can throttle, fail or time out, per `localInvoke` in
 * `TAKOFORM_FAULTS` (or `config`); without that section `fn` itself is returned. Each wrapped
 * function draws from its own streams (seed, label), so a schedule repeats with the same calls.
 */
export function withLambdaInvokeFaults<P, T>(
  fn: (payload: P) => Promise<T>,
  label: LocalInvokeLabel,
  config?: FaultConfig,
): (payload: P) => Promise<T> {
  const fromEnv = config === undefined;
  config ??= faultConfigFromEnv();
  const settings = config?.localInvoke;
  if (!config || !settings) return fn;
  if (fromEnv && !announcedInvokes) {
    announcedInvokes = true;
    log.warn(`${FAULTS_ENV} is set: injecting Lambda invocation faults`, { seed: config.seed });
  }
  const streams = new Streams(`${config.seed}|localInvoke|${label}`);
  const rate = (kind: keyof typeof localInvokeRates) =>
    settings.functions?.[label]?.[kind] ?? settings[kind] ?? 0;
  const fires = (kind: keyof typeof localInvokeRates) => {
    const p = rate(kind);
    return p > 0 && streams.next(kind) < p;
  };
  const injected = (kind: FaultKind, error: string, ran: boolean) =>
    report({ service: 'lambda', label, operation: 'Invoke', kind, error, ran });

  return async (payload) => {
    /** Runs `fn` to its end, whatever it throws (even synchronously): its outcome is lost. */
    const runQuietly = () =>
      Promise.resolve()
        .then(() => fn(payload))
        .then(
          () => undefined,
          () => undefined,
        );
    if (fires('tooManyRequests')) {
      injected('tooManyRequests', 'Lambda.TooManyRequestsException', false);
      throw invokeError('Lambda.TooManyRequestsException', 'Rate Exceeded.');
    }
    if (fires('serviceError')) {
      const after = streams.next('serviceError-when') < 0.5;
      // After: the function ran to its end and only the answer is lost.
      if (after) await runQuietly();
      injected('serviceError', 'Lambda.ServiceException', after);
      throw invokeError('Lambda.ServiceException', 'The service encountered an internal error.');
    }
    if (fires('timeout')) {
      injected('timeout', 'Lambda.Timeout', true);
      // The function runs on; its outcome never reaches the caller.
      void runQuietly();
      return new Promise<T>((_, reject) => {
        if (settings.timeoutMs !== undefined)
          setTimeout(
            () => reject(invokeError('Lambda.Timeout', `Task timed out after ${settings.timeoutMs} ms.`)),
            settings.timeoutMs,
          );
      });
    }
    return fn(payload);
  };
}
