/**
 * TAKOFORM_FAULTS: the configuration of fault injection for the local Host and the tests (JSON,
 * validated; a malformed value fails at composition). Where each fault is injected, and why, is
 * said in sdk-faults.ts and invoke-faults.ts.
 */
import { z } from 'zod';

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
  /** Per attempt the server answered: it took effect, then the answer is lost (reset or 500); the SDK retries. */
  lostAnswer: probability.optional(),
};
const sqsRates = {
  /** Per attempt: RequestThrottled, before the server. */
  throttle: probability.optional(),
  /** Per attempt: InternalFailure (500) or ServiceUnavailable (503), before the server. */
  serviceError: probability.optional(),
  /** Per Send/Delete/ChangeMessageVisibility batch: some entries fail (InternalError), not applied. */
  batchEntryFailure: probability.optional(),
  /** Per attempt the server answered: it took effect, then the answer is lost (reset or 500); the SDK retries. */
  lostAnswer: probability.optional(),
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

export const localInvokeRates = {
  /** Per invocation: Lambda.TooManyRequestsException; the function did not run. */
  tooManyRequests: probability.optional(),
  /** Per invocation: Lambda.ServiceException, before or after the function ran. */
  serviceError: probability.optional(),
  /** Per invocation: no answer (the function runs); see `timeoutMs`. */
  timeout: probability.optional(),
  /**
   * Per invocation: the function runs on, and its caller sees Lambda.ServiceException or
   * Lambda.SdkClientException within `overlapAfterMs`, so a Retry starts a second one beside it.
   */
  overlap: probability.optional(),
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
  /** At most how long an overlapping invocation runs before its caller sees the error (default 2000). */
  overlapAfterMs: z
    .number({ error: 'must be a non-negative integer (ms)' })
    .int('must be a non-negative integer (ms)')
    .min(0, 'must be a non-negative integer (ms)')
    .max(2 ** 31 - 1, 'must be below 2^31 ms')
    .optional(),
  /**
   * Whether a cut-off handler runs on until its lane's invocation has ended, as on Lambda
   * (default true whenever `localInvoke` is set; see lambdaCutOffFrom).
   */
  lambdaCutOff: z.boolean({ error: 'must be true or false' }).optional(),
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

/**
 * Whether the local Host cuts off handlers as Lambda does: the handler's batch is finalised as
 * abandoned and its invocation ends, while the handler itself runs on until then (on Lambda the
 * worker process exits only after that). On by default wherever `localInvoke` is configured, so
 * that every run of the fault model sees it; `"lambdaCutOff": false` turns it off.
 */
export function lambdaCutOffFrom(config: FaultConfig | undefined): boolean {
  return config?.localInvoke !== undefined && config.localInvoke.lambdaCutOff !== false;
}

/** The configuration in `env`, or undefined when the variable is unset or empty (no faults). */
export function faultConfigFromEnv(env: NodeJS.ProcessEnv = process.env): FaultConfig | undefined {
  const raw = env[FAULTS_ENV];
  return raw === undefined || raw.trim() === '' ? undefined : parseFaultConfig(raw);
}
