/**
 * Fault injection for AWS SDK v3 clients (the local Host and the tests only; no deployed function
 * imports it): what AWS does under load and the local stand-ins never
 * do. DynamoDB Local never returns `UnprocessedItems`/`UnprocessedKeys` and never throttles;
 * fauxqs never throttles or fails a batch entry; there is no Lambda service to answer
 * `TooManyRequestsException`. Configured by one environment variable, `TAKOFORM_FAULTS` (JSON);
 * without it nothing is injected and no middleware is added.
 *
 * ```json
 * {"seed":7,"dynamodb":{"throttle":0.05,"unprocessed":0.3,"lostAnswer":0.02},
 *  "sqs":{"throttle":0.02,"lostAnswer":0.02},"lambda":{"tooManyRequests":0.1}}
 * ```
 *
 * Where each fault sits, and why:
 * - **Errors** (throttles, service errors, transaction throttles) are thrown by a middleware in
 *   the `finalizeRequest` step right after the SDK's `retryMiddleware`, i.e. inside the retry
 *   loop and before signing and sending: every attempt draws again, the SDK's retry strategy
 *   classifies the error exactly as a real one (same exception class, `$fault`, `$metadata`), and
 *   the request never reaches the server, so an injected error has no effect.
 * - **Lost answers** (`lostAnswer`, DynamoDB and SQS) are drawn by the same middleware after the
 *   server answered a request with success: the request took effect (a conditional write
 *   committed, a message was sent, deleted or received), and the caller's SDK then sees a
 *   connection reset (`TimeoutError`, code `ECONNRESET`) or a 500/503, both of which its retry
 *   strategy treats as transient. So the SDK sends the same request again, exactly as it does on
 *   AWS when a connection breaks under a response: a conditional write's retry fails its own
 *   condition, a `TransactWriteItems` retry with the same `ClientRequestToken` answers success
 *   without writing again, a retried `SendMessage` sends a second copy. Each attempt draws again,
 *   so the retry's answer can be lost too; after the last attempt the caller sees the error.
 * - **Partial batches** (`UnprocessedItems`, `UnprocessedKeys`, failed SQS batch entries) are
 *   successful responses, which the SDK never retries; an `initialize`-step middleware rewrites
 *   the request so that only the processed part reaches the server, then reports the rest in the
 *   response. What is reported as unprocessed was really not written (or read, or sent).
 *
 * Every decision comes from a seeded generator (one stream per service, label, operation and
 * kind of fault), so the same seed and the same sequence of calls give the same faults.
 *
 * Local Lambda invocations are faulted by invoke-faults.ts.
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
import { log } from '../../shared/log.ts';
import { FAULTS_ENV, type FaultConfig, type FaultService, faultConfigFromEnv } from './fault-config.ts';
import { type FaultKind, report } from './fault-reports.ts';
import { Streams } from './fault-streams.ts';

// The errors, as the SDK's deserializer would build them.

type Rates = Partial<Record<string, number>>;

export const INJECTED = ' (injected by TAKOFORM_FAULTS)';
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

/** The kind of a DynamoDB key (`BATCH`, `DISPATCH`, …: its `pk` up to the first `#`). */
function keyKind(item: unknown): string | undefined {
  const pk = (item as { pk?: { S?: unknown } } | undefined)?.pk?.S;
  return typeof pk === 'string' ? pk.split('#')[0] : undefined;
}

/**
 * What a DynamoDB write addressed, for the debug line of a lost answer: the kinds of its keys
 * and the start of its update expression, enough to tell which of the Host's writes it was.
 */
function targetOf(input: Input): { target?: string } {
  type Part = { Key?: unknown; Item?: unknown; UpdateExpression?: string };
  const parts: Part[] = [input as Part];
  for (const t of (input.TransactItems as Record<string, Part>[] | undefined) ?? [])
    parts.push(...Object.values(t));
  const named = parts
    .map((p) => {
      const kind = keyKind(p.Key ?? p.Item);
      return kind && `${kind}${p.UpdateExpression ? ` ${p.UpdateExpression.slice(0, 40)}` : ''}`;
    })
    .filter((x): x is string => !!x);
  return named.length > 0 ? { target: named.join('; ') } : {};
}

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
    const result = await next(args);
    // Drawn only for a request the server took: a failed one had no effect to lose the answer of.
    if (this.fires(operation, 'lostAnswer')) {
      const error = this.lostAnswerError(operation);
      report({
        service: this.service,
        label: this.label,
        operation,
        kind: 'lostAnswer',
        error: error.name,
        ...targetOf(args.input ?? {}),
      });
      throw error;
    }
    return result;
  };

  /**
   * What a caller sees when the answer of a request that took effect does not reach it: the
   * connection reset under the response (the HTTP handler names that TimeoutError), or a 5xx the
   * service sent after it had applied the request. The SDK retries both as transient.
   */
  private lostAnswerError(operation: string): Error {
    const reset = this.streams.next(`${operation}|lostAnswer-kind`) < 0.5;
    if (reset)
      return Object.assign(new Error(`read ECONNRESET${INJECTED}`), {
        name: 'TimeoutError',
        code: 'ECONNRESET',
        errno: -104,
        syscall: 'read',
      });
    if (this.service === 'sqs') return sqsServerError(this.streams.next(`${operation}|lostAnswer-5xx`) < 0.5);
    return new InternalServerError({
      message: `Internal server error.${INJECTED}`,
      $metadata: metadata(500),
    });
  }

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
