/**
 * The AWS composition (lambdas/composition/aws-host.ts) over the integration stand-ins — or LocalStack
 * when TAKOFORM_LOCALSTACK_ENDPOINT is set — plus helpers to drive its Lambda entries in process:
 * API Gateway events for the API handler, and the synthesized dispatcher definition.
 *
 * With TAKOFORM_FAULTS set, every SDK client handed to the composition injects AWS's faults
 * (lambdas/local/faults/): every client is wrapped by `withFaults` here.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import type { SFNClient } from '@aws-sdk/client-sfn';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { inject } from 'vitest';
import { dynamoDbClient, sqsClient } from '../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoApiKeys } from '../../lambdas/adapters/aws/dynamodb-api-keys.ts';
import { registrationItem } from '../../lambdas/adapters/aws/dynamodb-worker-registry.ts';
import { type AwsHostOptions, createAwsHost } from '../../lambdas/composition/aws-host.ts';
import { createApiHandler } from '../../lambdas/entries/api.ts';
import { API_ROOT } from '../../lambdas/http/origin.ts';
import { withFaults } from '../../lambdas/local/faults/sdk-faults.ts';

export const TEST_DISPATCHER_ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:d';

export async function createAwsTestHost(
  options: AwsHostOptions & {
    workerTimeoutSeconds?: number;
    /** The client the API function triggers the executor with (with `executorFunction`). */
    lambda?: Pick<LambdaClient, 'send'>;
    executorFunction?: string;
    /** Step Functions as the Host's functions see it: with it, sends and full batches start lanes. */
    sfn?: Pick<SFNClient, 'send'>;
    /** CloudWatch as the API function sees it (the operator's oldest message age). */
    cloudwatch?: Pick<CloudWatchClient, 'send'>;
  } = {},
) {
  const { lambda: givenLambda, executorFunction, sfn, cloudwatch, ...opts } = options;
  const dynamodb = withFaults(dynamoDbClient(inject('ddbEndpoint')), 'dynamodb');
  const sqs = withFaults(sqsClient(inject('sqsEndpoint')), 'sqs');
  const lambda = givenLambda instanceof LambdaClient ? withFaults(givenLambda, 'lambda') : givenLambda;
  const tableName = `aws-${randomUUID()}`;
  await createHostTable(dynamodb, tableName);
  const queueNamePrefix = `a${randomBytes(4).toString('hex')}-`;
  const host = await createAwsHost(
    {
      tableName,
      queueNamePrefix,
      publicOrigin: 'https://host.test',
      workerTimeoutSeconds: opts.workerTimeoutSeconds ?? 30,
      idleWaitSeconds: 1,
      ...(executorFunction ? { executorFunction } : {}),
      ...(sfn ? { dispatcherArn: TEST_DISPATCHER_ARN } : {}),
    },
    {
      dynamodb,
      sqs,
      ...(lambda ? { lambda } : {}),
      ...(sfn ? { sfn } : {}),
      ...(cloudwatch ? { cloudwatch } : {}),
    },
    { secrets: { cursorKey: randomBytes(32), credentialKey: randomBytes(32) }, graceMs: 1_000, ...opts },
  );
  const token = `tfk_${randomBytes(24).toString('base64url')}`;
  await new DynamoApiKeys(dynamodb, tableName).put(token, 'alice', { team: 'write' });
  const api = createApiHandler(host);

  /** One request through the API Lambda handler, as API Gateway's proxy integration sends it. */
  async function request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const fullPath =
      path.startsWith('/ext/') || path.startsWith('/.well-known') ? path : `${API_ROOT}${path}`;
    const h: Record<string, string> = { authorization: `Bearer ${token}`, ...headers };
    if (body !== undefined) h['content-type'] = 'application/json';
    const event = {
      httpMethod: method,
      path: fullPath,
      headers: h,
      multiValueHeaders: Object.fromEntries(Object.entries(h).map(([k, v]) => [k, [v]])),
      queryStringParameters: null,
      multiValueQueryStringParameters: null,
      body: body === undefined ? null : JSON.stringify(body),
      isBase64Encoded: false,
    } as unknown as APIGatewayProxyEvent;
    const out = await api(event);
    return { status: out.statusCode, body: out.body ? JSON.parse(out.body) : undefined };
  }

  async function create(form: string, space: string, name: string, spec: unknown) {
    return request(
      'POST',
      '/resources',
      { form, space, name, spec },
      { 'idempotency-key': `k-${randomUUID()}` },
    );
  }

  /** Runs the executor until no Operation is due (bounded). */
  async function settle(rounds = 50): Promise<void> {
    for (let i = 0; i < rounds; i++) if ((await host.host.executor.runDue()) === 0) return;
  }

  /** What ModuleWorkerFunction's custom resource writes at deploy time. */
  async function registerWorker(r: {
    space: string;
    name: string;
    functionArn: string;
    vars?: Record<string, unknown>;
    queueProducers?: Record<string, { queue: string }>;
    handlers?: string[];
  }) {
    await dynamodb.send(
      new PutItemCommand({
        TableName: tableName,
        Item: registrationItem({
          space: r.space,
          name: r.name,
          functionArn: r.functionArn,
          handlers: r.handlers ?? ['queue'],
          varsJson: JSON.stringify(r.vars ?? {}),
          queueProducersJson: JSON.stringify(r.queueProducers ?? {}),
          deploymentUid: `mw-${randomBytes(6).toString('hex')}`,
        }),
      }),
    );
  }

  /** Queue(s), worker registration and Resource, and a settled consumer; returns their uids. */
  async function setupConsumer(
    name: string,
    opts: {
      space?: string;
      queueProducers?: Record<string, { queue: string }>;
      vars?: Record<string, unknown>;
      deadLetter?: boolean;
      maxRetries?: number;
      maxConcurrency?: number;
      maxBatchSize?: number;
      maxBatchTimeoutSeconds?: number;
    } = {},
  ) {
    const space = opts.space ?? 'team';
    const forms = {
      queue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
      worker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
      consumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
    };
    const queue = await create(forms.queue, space, `${name}-q`, { messageRetentionSeconds: 3600 });
    const dlq = opts.deadLetter
      ? await create(forms.queue, space, `${name}-dlq`, { messageRetentionSeconds: 3600 })
      : undefined;
    const functionArn = `arn:aws:lambda:us-east-1:000000000000:function:${queueNamePrefix}wkr-${name}`;
    await registerWorker({
      space,
      name: `${name}-w`,
      functionArn,
      vars: opts.vars,
      queueProducers: opts.queueProducers,
    });
    const worker = await create(forms.worker, space, `${name}-w`, {});
    await settle();
    const spec: Record<string, unknown> = {
      queue: { resourceUid: queue.body.resourceUid },
      worker: { resourceUid: worker.body.resourceUid },
      maxBatchSize: opts.maxBatchSize ?? 10,
      maxBatchTimeoutSeconds: opts.maxBatchTimeoutSeconds ?? 0,
      maxConcurrency: opts.maxConcurrency ?? 2,
      maxRetries: opts.maxRetries ?? 2,
      retryDelaySeconds: 0,
    };
    if (dlq) spec.deadLetterQueue = { resourceUid: dlq.body.resourceUid };
    const consumer = await create(forms.consumer, space, name, spec);
    if (consumer.status !== 202)
      throw new Error(`consumer create answered ${consumer.status}: ${JSON.stringify(consumer.body)}`);
    await settle();
    const target = await host.host.queueDirectory.queue(queue.body.resourceUid);
    if (!target) throw new Error('queue not live');
    return {
      queue: target,
      dlqUid: dlq?.body.resourceUid as string | undefined,
      consumerUid: consumer.body.resourceUid as string,
      workerUid: worker.body.resourceUid as string,
      functionArn,
    };
  }

  return {
    host,
    dynamodb,
    sqs,
    tableName,
    queueNamePrefix,
    token,
    request,
    create,
    settle,
    registerWorker,
    setupConsumer,
  };
}

export type AwsTestHost = Awaited<ReturnType<typeof createAwsTestHost>>;

/**
 * The state machine definition of a synthesized template, with its intrinsics replaced:
 * `Fn::GetAtt [X, Arn]` by a Lambda ARN named X, `Ref X` by X.
 */
export function resolveDefinition(definitionString: unknown, arnOf: (logicalId: string) => string): unknown {
  const render = (v: unknown): string => {
    if (typeof v === 'string') return v;
    const o = v as Record<string, unknown>;
    if (typeof o?.Ref === 'string') return o.Ref;
    const getAtt = o?.['Fn::GetAtt'];
    if (Array.isArray(getAtt) && getAtt[1] === 'Arn') return arnOf(String(getAtt[0]));
    const join = o?.['Fn::Join'];
    if (Array.isArray(join)) return (join[1] as unknown[]).map(render).join(String(join[0]));
    throw new Error(`unexpected intrinsic in the definition: ${JSON.stringify(v)}`);
  };
  return JSON.parse(render(definitionString));
}
