/**
 * The Host as the AWS Lambda entries use it: configuration read once from the environment (every
 * problem reported together, at cold start), SDK clients with the defaults of the runtime (or the
 * `AWS_ENDPOINT_URL_*` variables, e.g. for LocalStack), and one call to `composeHost`.
 *
 * Each entry takes only what it needs from the result; nothing here starts work by itself.
 */
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { SFNClient } from '@aws-sdk/client-sfn';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { withCallRecorder } from '../adapters/aws/call-recorder.ts';
import { dynamoDbClient, sqsClient } from '../adapters/aws/clients.ts';
import { cloudWatchOldestAge } from '../adapters/aws/cloudwatch-queue-age.ts';
import { cloudWatchQueueHistory } from '../adapters/aws/cloudwatch-queue-history.ts';
import { DynamoApiKeys } from '../adapters/aws/dynamodb-api-keys.ts';
import { DynamoDeliveryStore } from '../adapters/aws/dynamodb-delivery-store.ts';
import { DynamoHostSecrets } from '../adapters/aws/dynamodb-host-secrets.ts';
import { operationCensus } from '../adapters/aws/dynamodb-operation-census.ts';
import { DynamoWorkerRegistry } from '../adapters/aws/dynamodb-worker-registry.ts';
import { sfnLaneLauncher } from '../adapters/aws/sfn-lane-launcher.ts';
import { type QueueSettings, queueTagProblems } from '../adapters/aws/sqs-queue-backend.ts';
import { BatchHostService } from '../delivery/batch-host-service.ts';
import { MAX_HANDLER_MS } from '../delivery/lane-kinds.ts';
import { parsePublicOrigin } from '../http/origin.ts';
import { AWS_ENV } from '../shared/aws-env.ts';
import { log } from '../shared/log.ts';
import { composeHost } from './compose-host.ts';

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const configSchema = z.object({
  [AWS_ENV.table]: z.string().min(3).max(255),
  [AWS_ENV.queuePrefix]: z.string().regex(/^[a-z0-9_-]{1,49}$/, 'must be 1..49 characters of [a-z0-9_-]'),
  [AWS_ENV.publicOrigin]: z.string().transform((v, ctx) => {
    try {
      return parsePublicOrigin(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  }),
  [AWS_ENV.workerTimeoutSeconds]: int(1, MAX_HANDLER_MS / 1000).default(MAX_HANDLER_MS / 1000),
  [AWS_ENV.idleWaitSeconds]: int(0, 20).default(20),
  [AWS_ENV.executorFunction]: z.string().min(1).optional(),
  [AWS_ENV.dispatcherArn]: z.string().min(1).optional(),
  [AWS_ENV.dispatcherExpressArn]: z.string().min(1).optional(),
  [AWS_ENV.queueArnPrefix]: z
    .string()
    .regex(/^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:$/, 'must be arn:<partition>:sqs:<region>:<account>:')
    .optional(),
  [AWS_ENV.queueKmsKey]: z
    .string()
    .regex(
      /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)\/[A-Za-z0-9/_-]{1,256}$/,
      'must be a KMS key ARN',
    )
    .optional(),
  [AWS_ENV.queueTags]: z
    .string()
    .max(4096)
    .transform((v, ctx) => {
      let tags: unknown;
      try {
        tags = JSON.parse(v);
      } catch {
        tags = undefined;
      }
      const record = z.record(z.string(), z.string()).safeParse(tags);
      const problems = record.success ? queueTagProblems(record.data) : ['must be a JSON object of strings'];
      for (const message of problems) ctx.addIssue({ code: 'custom', message });
      return record.success ? record.data : z.NEVER;
    })
    .optional(),
});

export interface AwsHostConfig {
  tableName: string;
  queueNamePrefix: string;
  publicOrigin: string;
  workerTimeoutSeconds: number;
  idleWaitSeconds: number;
  /** Set on the API function: the executor it triggers after an acceptance. */
  executorFunction?: string;
  /** Set on the functions that start lanes: the dispatcher state machine. */
  dispatcherArn?: string;
  /** Beside it: the Express dispatcher, for lanes that fit its five-minute window. */
  dispatcherExpressArn?: string;
  /** Encryption, TLS-only policy and tags of the queues the Host creates. */
  queueSettings?: QueueSettings;
}

/** Reads the configuration; throws one Error naming every missing or malformed variable. */
export function readAwsHostConfig(env: NodeJS.ProcessEnv): AwsHostConfig {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid Takoform Host configuration: ${problems.join('; ')}`);
  }
  const v = parsed.data;
  return {
    tableName: v[AWS_ENV.table],
    queueNamePrefix: v[AWS_ENV.queuePrefix],
    publicOrigin: v[AWS_ENV.publicOrigin],
    workerTimeoutSeconds: v[AWS_ENV.workerTimeoutSeconds],
    idleWaitSeconds: v[AWS_ENV.idleWaitSeconds],
    ...(v[AWS_ENV.executorFunction] ? { executorFunction: v[AWS_ENV.executorFunction] } : {}),
    ...(v[AWS_ENV.dispatcherArn] ? { dispatcherArn: v[AWS_ENV.dispatcherArn] } : {}),
    ...(v[AWS_ENV.dispatcherExpressArn] ? { dispatcherExpressArn: v[AWS_ENV.dispatcherExpressArn] } : {}),
    queueSettings: {
      ...(v[AWS_ENV.queueArnPrefix] ? { queueArnPrefix: v[AWS_ENV.queueArnPrefix] } : {}),
      ...(v[AWS_ENV.queueKmsKey] ? { kmsKeyArn: v[AWS_ENV.queueKmsKey] } : {}),
      ...(v[AWS_ENV.queueTags] ? { tags: v[AWS_ENV.queueTags] } : {}),
    },
  };
}

export interface AwsClients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  /** Only the API function uses it (to trigger the executor). */
  lambda?: Pick<LambdaClient, 'send'>;
  /** Starts dispatcher lanes (sends wake consumers; full batches add lanes). */
  sfn?: Pick<SFNClient, 'send'>;
  /** The oldest message age of a queue for the operator's stats (the API function). */
  cloudwatch?: Pick<CloudWatchClient, 'send'>;
}

export interface AwsHostOptions {
  /** Keys to use instead of the ones kept in the table (tests). */
  secrets?: { cursorKey: Buffer; credentialKey: Buffer };
  clock?: () => number;
  /** Time after a slot deadline within which recovery runs (default 60 s). */
  graceMs?: number;
  /** Room in a slot's deadline beyond the handler's bound (default the delivery service's 30 s). */
  slotMarginMs?: number;
  /** Told about every accepted Operation (after the executor was triggered). */
  onAccepted?: (operationId: string) => void;
  /** Batch metrics (the batch-host function). */
  onFinalized?: (outcome: string) => void;
  onDeadLettered?: (count: number) => void;
}

/** Composes the Host over the given clients. */
export async function createAwsHost(config: AwsHostConfig, clients: AwsClients, opts: AwsHostOptions = {}) {
  const { dynamodb, sqs } = clients;
  const workers = new DynamoWorkerRegistry(dynamodb, config.tableName);
  const secrets = opts.secrets ?? (await loadSecrets(new DynamoHostSecrets(dynamodb, config.tableName)));
  const background = new Set<Promise<void>>();
  const trigger = triggerExecutor(config, clients.lambda, background);

  const host = composeHost({
    dynamodb,
    tableName: config.tableName,
    sqs,
    queueNamePrefix: config.queueNamePrefix,
    ...(config.queueSettings ? { queueSettings: config.queueSettings } : {}),
    workers,
    ...(clients.sfn && config.dispatcherArn
      ? { lanes: sfnLaneLauncher(clients.sfn, config.dispatcherArn, config.dispatcherExpressArn) }
      : {}),
    authenticator: new DynamoApiKeys(dynamodb, config.tableName),
    cursorKey: secrets.cursorKey,
    origin: () => config.publicOrigin,
    ...(clients.cloudwatch
      ? {
          oldestMessageAgeSeconds: cloudWatchOldestAge(clients.cloudwatch),
          history: cloudWatchQueueHistory(clients.cloudwatch),
        }
      : {}),
    onAccepted: (operationId) => {
      trigger(operationId);
      opts.onAccepted?.(operationId);
    },
    ...(opts.clock ? { clock: opts.clock } : {}),
    delivery: {
      workerTimeoutMs: config.workerTimeoutSeconds * 1000,
      credentialKey: secrets.credentialKey,
      workerFunction: (space, name) => workers.functionArn(space, name),
      // The function's full timeout: the runtime cuts a handler off a little earlier, but the
      // invocation itself (and its receives) can last until the Lambda ends.
      workerTimeoutMsOf: (space, name) => workers.timeoutMs(space, name),
      idleWaitSeconds: config.idleWaitSeconds,
      ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
      ...(opts.slotMarginMs !== undefined ? { slotMarginMs: opts.slotMarginMs } : {}),
    },
  });
  const deliveryStore = new DynamoDeliveryStore(dynamodb, config.tableName);
  const batchHost = new BatchHostService({
    delivery: host.delivery,
    loop: host.loop,
    store: deliveryStore,
    attachments: host.attachments,
    getResource: (uid) => host.store.getResource(uid),
    uidByName: (space, name) => host.store.uidByName(space, name),
    queueDirectory: host.queueDirectory,
    sendBatch: (target, messages) => host.producer.sendBatch(target, messages),
    producerBindings: async (space, name) => (await workers.registration(space, name))?.queueProducers,
    ...(opts.onFinalized ? { onFinalized: opts.onFinalized } : {}),
    ...(opts.onDeadLettered ? { onDeadLettered: opts.onDeadLettered } : {}),
  });

  return {
    config,
    clients,
    host,
    workers,
    deliveryStore,
    batchHost,
    /** The unfinished Operations, read through the table's index of due ones (the executor's metrics). */
    operationCensus: (at: { now: number; stuckAfterMs: number }) =>
      operationCensus(dynamodb, config.tableName, at),
    /** Waits (bounded) for best-effort background calls, so a returning Lambda does not freeze them. */
    async flushBackground(boundMs = 2_000): Promise<void> {
      if (background.size === 0) return;
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, boundMs);
      });
      await Promise.race([Promise.all([...background]), bound]);
      clearTimeout(timer);
    },
  };
}

export type AwsHost = Awaited<ReturnType<typeof createAwsHost>>;

async function loadSecrets(store: DynamoHostSecrets) {
  const [cursorKey, credentialKey] = await Promise.all([store.get('cursor-key'), store.get('delivery-key')]);
  return { cursorKey, credentialKey };
}

/**
 * After an acceptance: an asynchronous (`Event`) invoke of the executor, best effort. If it is
 * lost, the executor's one-minute schedule picks the Operation up; nothing depends on it.
 */
function triggerExecutor(
  config: AwsHostConfig,
  lambda: AwsClients['lambda'],
  background: Set<Promise<void>>,
): (operationId: string) => void {
  const fn = config.executorFunction;
  if (!fn || !lambda) return () => {};
  return (operationId) => {
    const call = lambda
      .send(
        new InvokeCommand({
          FunctionName: fn,
          InvocationType: 'Event',
          Payload: new TextEncoder().encode(JSON.stringify({ source: 'takoform.accepted', operationId })),
        }),
      )
      .then(
        () => undefined,
        (err: unknown) =>
          log.warn('could not trigger the executor; its schedule will run the Operation', {
            operationId,
            err,
          }),
      );
    background.add(call);
    void call.finally(() => background.delete(call));
  };
}

let shared: Promise<AwsHost> | undefined;

/** The Host of this Lambda function, composed once from `process.env` and the default clients. */
export function awsHostFromEnv(opts: AwsHostOptions = {}): Promise<AwsHost> {
  shared ??= (async () => {
    const config = readAwsHostConfig(process.env);
    return createAwsHost(
      config,
      {
        dynamodb: dynamoDbClient(),
        sqs: sqsClient(),
        lambda: withCallRecorder(new LambdaClient({}), 'lambda'),
        sfn: withCallRecorder(new SFNClient({}), 'states'),
        cloudwatch: withCallRecorder(new CloudWatchClient({}), 'cloudwatch'),
      },
      opts,
    );
  })();
  return shared;
}
