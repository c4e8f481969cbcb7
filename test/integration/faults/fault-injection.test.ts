/**
 * Stand-ins that tell the truth (issue 11, item 8): the fault injection of
 * lambdas/adapters/aws/fault-injection.ts and the strict SQS size check of strict-sqs.ts, against
 * the real DynamoDB Local and fauxqs. Each fault is one AWS answers under load and the local
 * servers never give; each test shows that the injected fault behaves as AWS's does — what is
 * reported unprocessed was not written, a throttle had no effect and is retried by the SDK's own
 * strategy — so tests and the chaos suite that run with TAKOFORM_FAULTS reach the real paths.
 */

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { InvokeCommand, TooManyRequestsException } from '@aws-sdk/client-lambda';
import {
  BatchRequestTooLong,
  CreateQueueCommand,
  ReceiveMessageCommand,
  RequestThrottled,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { dynamoDbClient as deployedDynamoDbClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { SQS_MAX_MESSAGE_BYTES } from '../../../lambdas/adapters/aws/strict-sqs.ts';
import {
  FAULTS_ENV,
  type FaultConfig,
  parseFaultConfig,
} from '../../../lambdas/local/faults/fault-config.ts';
import { type InjectedFault, onInjectedFault } from '../../../lambdas/local/faults/fault-reports.ts';
import {
  localDynamoDbClient as dynamoDbClient,
  localLambdaClient as lambdaClient,
  localSqsClient as sqsClient,
} from '../../../lambdas/local/faults/faulty-clients.ts';
import { withFaults } from '../../../lambdas/local/faults/sdk-faults.ts';

const THROTTLES = ['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded'];

/** Every fault injected while `fn` runs (calls run one after another, so this is exact). */
async function faultsDuring<T>(
  fn: () => Promise<T>,
): Promise<{ faults: InjectedFault[]; result: PromiseSettledResult<T> }> {
  const faults: InjectedFault[] = [];
  const off = onInjectedFault((f) => faults.push(f));
  try {
    const [result] = await Promise.allSettled([fn()]);
    return { faults, result: result as PromiseSettledResult<T> };
  } finally {
    off();
  }
}

function rejection(r: PromiseSettledResult<unknown>): Error & { $metadata?: { attempts?: number } } {
  if (r.status !== 'rejected') throw new Error('expected a rejection');
  return r.reason;
}

function withEnv<T>(value: string | undefined, fn: () => T): T {
  const before = process.env[FAULTS_ENV];
  if (value === undefined) delete process.env[FAULTS_ENV];
  else process.env[FAULTS_ENV] = value;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env[FAULTS_ENV];
    else process.env[FAULTS_ENV] = before;
  }
}

const faultMiddlewares = (client: { middlewareStack: { identify(): string[] } }) =>
  client.middlewareStack.identify().filter((m) => m.startsWith('takoformFault'));

describe('fault injection against DynamoDB Local', () => {
  let clean: DynamoDBClient;
  const table = `faults-${randomUUID()}`;
  const key = (id: string) => ({ pk: { S: `F#${id}` }, sk: { S: '_' } });
  const put = (id: string): WriteRequest => ({ PutRequest: { Item: { ...key(id), v: { S: id } } } });
  const exists = async (id: string) =>
    (await clean.send(new GetItemCommand({ TableName: table, Key: key(id), ConsistentRead: true }))).Item !==
    undefined;
  const faulty = (config: Omit<FaultConfig, 'seed'> & { seed?: number }) =>
    withEnv(undefined, () =>
      withFaults(dynamoDbClient(inject('ddbEndpoint')), 'dynamodb', { config: { seed: 7, ...config } }),
    );

  beforeAll(async () => {
    clean = withEnv(undefined, () => dynamoDbClient(inject('ddbEndpoint')));
    await createHostTable(clean, table);
  });
  afterEach(() => {
    expect(process.env[FAULTS_ENV]).toBeUndefined();
  });

  it('RC-04 without TAKOFORM_FAULTS nothing is injected: no fault middleware, a 25-item BatchWriteItem is written whole', async () => {
    const client = withEnv(undefined, () => dynamoDbClient(inject('ddbEndpoint')));
    expect(faultMiddlewares(client)).toEqual([]);
    expect(faultMiddlewares(withEnv(undefined, () => sqsClient(inject('sqsEndpoint'))))).toEqual([]);
    // A configuration that leaves a service out leaves that service's clients untouched too.
    expect(
      faultMiddlewares(
        withFaults(dynamoDbClient(inject('ddbEndpoint')), 'dynamodb', {
          config: { seed: 1, sqs: { throttle: 1 } },
        }),
      ),
    ).toEqual([]);
    const ids = Array.from({ length: 25 }, (_, i) => `plain-${i}`);
    const { faults, result } = await faultsDuring(() =>
      client.send(new BatchWriteItemCommand({ RequestItems: { [table]: ids.map(put) } })),
    );
    expect(faults).toEqual([]);
    expect(result.status).toBe('fulfilled');
    const out = (result as PromiseFulfilledResult<BatchWriteItemCommandOutput>).value;
    expect(Object.keys(out.UnprocessedItems ?? {})).toEqual([]);
    for (const id of ids) expect(await exists(id)).toBe(true);
  });

  it('RC-04 TAKOFORM_FAULTS is validated: every bad value is named, and a client refuses to start with it', () => {
    expect(() => parseFaultConfig('{seed:1}')).toThrow(/TAKOFORM_FAULTS is not valid JSON/);
    expect(() => parseFaultConfig('{"dynamodb":{"throttle":0.1}}')).toThrow(
      /seed: must be a non-negative integer/,
    );
    let message = '';
    try {
      parseFaultConfig(
        '{"seed":1,"dynamodb":{"throttle":1.5,"operations":{"BatchWriteItems":{"unprocessed":1}}},"sqs":{"unprocessed":0.1},"s3":{}}',
      );
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^invalid TAKOFORM_FAULTS: /);
    expect(message).toContain('dynamodb.throttle: must be a number between 0 and 1');
    expect(message).toContain('dynamodb.operations.BatchWriteItems: unknown dynamodb operation');
    expect(message).toContain('sqs: Unrecognized key: "unprocessed"');
    expect(message).toContain('"s3"');
    expect(() =>
      withEnv('{"seed":1,"sqs":{"throttle":"often"}}', () => sqsClient(inject('sqsEndpoint'))),
    ).toThrow(/invalid TAKOFORM_FAULTS: sqs.throttle/);
    expect(
      parseFaultConfig(
        '{"seed":7,"dynamodb":{"throttle":0.05,"unprocessed":0.3},"sqs":{"throttle":0.02},"lambda":{"tooManyRequests":0.1}}',
      ),
    ).toEqual({
      seed: 7,
      dynamodb: { throttle: 0.05, unprocessed: 0.3 },
      sqs: { throttle: 0.02 },
      lambda: { tooManyRequests: 0.1 },
    });
  });

  it('DL-07 injected UnprocessedItems are really not written (puts and deletes), and re-sending them converges', async () => {
    const client = faulty({ dynamodb: { unprocessed: 1 } });
    const doomed = ['del-0', 'del-1', 'del-2', 'del-3'];
    await clean.send(new BatchWriteItemCommand({ RequestItems: { [table]: doomed.map(put) } }));
    const puts = Array.from({ length: 8 }, (_, i) => `part-${i}`);
    const requests: WriteRequest[] = [
      ...puts.map(put),
      ...doomed.map((id) => ({ DeleteRequest: { Key: key(id) } })),
    ];
    const out = await client.send(new BatchWriteItemCommand({ RequestItems: { [table]: requests } }));
    const unprocessed = out.UnprocessedItems?.[table] ?? [];
    expect(unprocessed.length).toBeGreaterThanOrEqual(1);
    expect(unprocessed.length).toBeLessThan(requests.length);
    const withheldPuts = new Set(unprocessed.flatMap((r) => (r.PutRequest ? [r.PutRequest.Item?.v?.S] : [])));
    const withheldDeletes = new Set(
      unprocessed.flatMap((r) => (r.DeleteRequest ? [r.DeleteRequest.Key?.pk?.S?.slice(2)] : [])),
    );
    expect(withheldPuts.size + withheldDeletes.size).toBe(unprocessed.length);
    for (const id of puts) expect(await exists(id)).toBe(!withheldPuts.has(id));
    for (const id of doomed) expect(await exists(id)).toBe(withheldDeletes.has(id));

    // The documented way out: send UnprocessedItems again until nothing is left. Every round
    // withholds 1..n-1 of n again, so this ends within n rounds with everything applied.
    let pending = out.UnprocessedItems;
    let rounds = 0;
    while (pending && Object.keys(pending).length > 0) {
      expect(++rounds).toBeLessThanOrEqual(requests.length);
      pending = (await client.send(new BatchWriteItemCommand({ RequestItems: pending }))).UnprocessedItems;
    }
    for (const id of puts) expect(await exists(id)).toBe(true);
    for (const id of doomed) expect(await exists(id)).toBe(false);
  });

  it('DL-07 injected UnprocessedKeys are not read: Responses and UnprocessedKeys split the request, options kept', async () => {
    const ids = Array.from({ length: 6 }, (_, i) => `get-${i}`);
    await clean.send(new BatchWriteItemCommand({ RequestItems: { [table]: ids.map(put) } }));
    const client = faulty({ dynamodb: { operations: { BatchGetItem: { unprocessed: 1 } } } });
    const request = { Keys: ids.map(key), ConsistentRead: true, ProjectionExpression: 'v' };
    const { faults, result } = await faultsDuring(() =>
      client.send(new BatchGetItemCommand({ RequestItems: { [table]: request } })),
    );
    const out = (result as PromiseFulfilledResult<BatchGetItemCommandOutput>).value;
    const read = (out.Responses?.[table] ?? []).map((i) => i.v?.S);
    const left = out.UnprocessedKeys?.[table];
    const leftIds = (left?.Keys ?? []).map((k) => k.pk?.S?.slice(2));
    expect(leftIds.length).toBeGreaterThanOrEqual(1);
    expect([...read, ...leftIds].sort()).toEqual([...ids].sort());
    expect(read.filter((id) => leftIds.includes(id))).toEqual([]);
    expect(left).toMatchObject({ ConsistentRead: true, ProjectionExpression: 'v' });
    expect(faults).toEqual([
      expect.objectContaining({
        operation: 'BatchGetItem',
        kind: 'unprocessed',
        withheld: leftIds.length,
        of: 6,
      }),
    ]);
    // A single key is never withheld: DynamoDB throttles such a request instead of processing none.
    const one = await client.send(
      new BatchGetItemCommand({ RequestItems: { [table]: { Keys: [key('get-0')] } } }),
    );
    expect(one.Responses?.[table]).toHaveLength(1);
  });

  it('RC-04 throttles are thrown before the server, as real exceptions, retried by the SDK and surfacing after maxAttempts', async () => {
    const always = faulty({ dynamodb: { throttle: 1 } });
    const { faults, result } = await faultsDuring(() =>
      always.send(new PutItemCommand({ TableName: table, Item: { ...key('never'), v: { S: 'never' } } })),
    );
    const err = rejection(result);
    expect(THROTTLES).toContain(err.name);
    expect(err.$metadata?.attempts).toBe(3); // the client's maxAttempts
    expect(faults.map((f) => f.kind)).toEqual(['throttle', 'throttle', 'throttle']);
    expect(await exists('never')).toBe(false);

    // Half the attempts throttled: every call either succeeds after exactly as many retries as
    // throttles were injected into it, or fails after 3 and wrote nothing.
    const half = faulty({ seed: 11, dynamodb: { throttle: 0.5 } });
    let retried = 0;
    for (let i = 0; i < 6; i++) {
      const id = `half-${i}`;
      const run = await faultsDuring(() =>
        half.send(new PutItemCommand({ TableName: table, Item: { ...key(id), v: { S: id } } })),
      );
      if (run.result.status === 'fulfilled') {
        expect(run.result.value.$metadata.attempts).toBe(run.faults.length + 1);
        expect(await exists(id)).toBe(true);
        if (run.faults.length > 0) retried++;
      } else {
        expect(run.faults).toHaveLength(3);
        expect(rejection(run.result).$metadata?.attempts).toBe(3);
        expect(await exists(id)).toBe(false);
      }
    }
    expect(retried).toBeGreaterThan(0);
  });

  it('RC-04 a throttled transaction is cancelled with ThrottlingError reasons, not retried, and writes nothing', async () => {
    const client = faulty({ dynamodb: { transactionThrottle: 1 } });
    const { faults, result } = await faultsDuring(() =>
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: ['tx-0', 'tx-1', 'tx-2'].map((id) => ({
            Put: { TableName: table, Item: { ...key(id), v: { S: id } } },
          })),
        }),
      ),
    );
    const err = rejection(result);
    expect(err).toBeInstanceOf(TransactionCanceledException);
    const codes = (err as TransactionCanceledException).CancellationReasons?.map((r) => r.Code) ?? [];
    expect(codes).toHaveLength(3);
    expect(codes).toContain('ThrottlingError');
    expect(codes.every((c) => c === 'ThrottlingError' || c === 'None')).toBe(true);
    expect(err.$metadata?.attempts).toBe(1);
    expect(faults).toHaveLength(1);
    for (const id of ['tx-0', 'tx-1', 'tx-2']) expect(await exists(id)).toBe(false);
  });

  it('RC-04 the seed makes the schedule reproducible; another seed gives another', async () => {
    const config = { dynamodb: { throttle: 0.25, unprocessed: 0.5 } };
    const run = async (seed: number, prefix: string) => {
      const client = faulty({ seed, ...config });
      const seen: string[] = [];
      const off = onInjectedFault((f) =>
        seen.push(`${f.operation}:${f.kind}:${f.error ?? ''}:${f.withheld ?? ''}/${f.of ?? ''}`),
      );
      try {
        for (let i = 0; i < 8; i++) {
          const out = await client
            .send(
              new BatchWriteItemCommand({
                RequestItems: { [table]: [0, 1, 2, 3].map((j) => put(`${prefix}-${i}-${j}`)) },
              }),
            )
            .catch((err: Error) => ({ failed: err.name }));
          seen.push(
            `result:${'failed' in out ? out.failed : (out.UnprocessedItems?.[table] ?? []).map((r) => r.PutRequest?.Item?.v?.S?.split('-').pop()).join(',')}`,
          );
        }
      } finally {
        off();
      }
      return seen;
    };
    const first = await run(3, 'seedA');
    const again = await run(3, 'seedB');
    const other = await run(4, 'seedC');
    expect(first.some((s) => s.includes(':unprocessed:'))).toBe(true);
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
  });

  it('RC-04 with TAKOFORM_FAULTS set, the local Host’s clients inject (faulty-clients.ts); the deployed clients never do', async () => {
    const client = withEnv('{"seed":5,"dynamodb":{"operations":{"BatchWriteItem":{"unprocessed":1}}}}', () =>
      dynamoDbClient(inject('ddbEndpoint')),
    );
    expect(faultMiddlewares(client).sort()).toEqual([
      'takoformFaultAttempt - after retryMiddleware',
      'takoformFaultPartial - initialize',
    ]);
    const deployed = withEnv('{"seed":5,"dynamodb":{"throttle":1}}', () =>
      deployedDynamoDbClient(inject('ddbEndpoint')),
    );
    expect(faultMiddlewares(deployed)).toEqual([]);
    // Inside the retry loop: right after retryMiddleware, before signing and sending.
    const stack = client.middlewareStack.identify();
    expect(stack.indexOf('takoformFaultAttempt - after retryMiddleware')).toBe(
      stack.indexOf('retryMiddleware - finalizeRequest') + 1,
    );
    const out = await client.send(
      new BatchWriteItemCommand({ RequestItems: { [table]: ['env-0', 'env-1', 'env-2'].map(put) } }),
    );
    expect((out.UnprocessedItems?.[table] ?? []).length).toBeGreaterThanOrEqual(1);
    // Applying withFaults again (e.g. a harness on top of clients.ts) adds nothing.
    withFaults(client, 'dynamodb', { config: { seed: 1, dynamodb: { throttle: 1 } } });
    expect(faultMiddlewares(client)).toHaveLength(2);
  });
});

describe('fault injection and the strict size check against fauxqs', () => {
  let clean: SQSClient;
  const newQueue = async () =>
    (await clean.send(new CreateQueueCommand({ QueueName: `faults-${randomUUID()}` }))).QueueUrl as string;
  /** Everything now in the queue (bodies), without consuming it for long. */
  const bodies = async (url: string) => {
    const out: string[] = [];
    for (;;) {
      const r = await clean.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 60,
        }),
      );
      if (!r.Messages?.length) return out.sort();
      out.push(...r.Messages.map((m) => m.Body as string));
    }
  };
  const faulty = (sqs: FaultConfig['sqs']) =>
    withFaults(
      withEnv(undefined, () => sqsClient(inject('sqsEndpoint'))),
      'sqs',
      { config: { seed: 9, sqs } },
    );

  beforeAll(() => {
    clean = withEnv(undefined, () => sqsClient(inject('sqsEndpoint')));
  });

  it('RC-04 SQS throttles and service errors are thrown before the server: retried, then surfaced, nothing sent', async () => {
    const url = await newQueue();
    const throttled = await faultsDuring(() =>
      faulty({ throttle: 1 }).send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'throttled' })),
    );
    const err = rejection(throttled.result);
    expect(err).toBeInstanceOf(RequestThrottled);
    expect(err.$metadata?.attempts).toBe(3);
    expect(throttled.faults).toHaveLength(3);

    const failing = await faultsDuring(() =>
      faulty({ operations: { SendMessage: { serviceError: 1 } } }).send(
        new SendMessageCommand({ QueueUrl: url, MessageBody: 'failing' }),
      ),
    );
    const err2 = rejection(failing.result);
    expect(['InternalFailure', 'ServiceUnavailable']).toContain(err2.name);
    expect(err2.$metadata?.attempts).toBe(3); // 5xx is transient: the SDK retried it
    expect(await bodies(url)).toEqual([]);
  });

  it('DL-07 failed SQS batch entries are not applied: only the Successful ones are in the queue', async () => {
    const url = await newQueue();
    const client = faulty({ batchEntryFailure: 1 });
    const entries = Array.from({ length: 6 }, (_, i) => ({ Id: `e${i}`, MessageBody: `body-${i}` }));
    const out = await client.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
    const ok = (out.Successful ?? []).map((s) => s.Id);
    const failed = out.Failed ?? [];
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.every((f) => f.SenderFault === false && f.Code === 'InternalError')).toBe(true);
    expect([...ok, ...failed.map((f) => f.Id)].sort()).toEqual(entries.map((e) => e.Id).sort());
    expect(await bodies(url)).toEqual(ok.map((id) => `body-${id?.slice(1)}`).sort());
  });

  it('DL-07 the local SQS refuses a SendMessageBatch of 10 × 100 kB (BatchRequestTooLong) and accepts 2 × 100 kB', async () => {
    const url = await newQueue();
    const sqs = withEnv(undefined, () => sqsClient(inject('sqsEndpoint')));
    const body = (i: number) => `${i}`.padEnd(100_000, 'x');
    const entries = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ Id: `e${i}`, MessageBody: body(i) }));
    const tooLong = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries(10) })).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(tooLong).toBeInstanceOf(BatchRequestTooLong);
    expect((tooLong as Error).message).toContain('1000000 bytes');
    expect(await bodies(url)).toEqual([]);

    const out = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries(2) }));
    expect(out.Successful).toHaveLength(2);
    expect(await bodies(url)).toEqual([body(0), body(1)]);
  });

  it('DL-07 the local SQS refuses a message over 262,144 bytes, counting message attributes as SQS does', async () => {
    const url = await newQueue();
    const sqs = withEnv(undefined, () => sqsClient(inject('sqsEndpoint')));
    const refused = (input: ConstructorParameters<typeof SendMessageCommand>[0]) =>
      sqs.send(new SendMessageCommand(input)).then(
        () => undefined,
        (err: Error) => err.name,
      );
    expect(await refused({ QueueUrl: url, MessageBody: 'y'.repeat(SQS_MAX_MESSAGE_BYTES + 1) })).toBe(
      'InvalidParameterValue',
    );
    // UTF-8 bytes, not characters: 131,073 two-byte characters are 262,146 bytes.
    expect(await refused({ QueueUrl: url, MessageBody: 'é'.repeat(131_073) })).toBe('InvalidParameterValue');
    // Name + data type + value of each attribute count: 262,100 + 4 + 6 + 40 > 262,144.
    expect(
      await refused({
        QueueUrl: url,
        MessageBody: 'z'.repeat(262_100),
        MessageAttributes: { attr: { DataType: 'String', StringValue: 'v'.repeat(40) } },
      }),
    ).toBe('InvalidParameterValue');
    expect(await bodies(url)).toEqual([]);
    expect(await refused({ QueueUrl: url, MessageBody: 'w'.repeat(SQS_MAX_MESSAGE_BYTES) })).toBeUndefined();
    expect((await bodies(url)).map((b) => b.length)).toEqual([SQS_MAX_MESSAGE_BYTES]);
  });
});

describe('fault injection for the Lambda client', () => {
  let server: ReturnType<typeof createServer>;
  let endpoint = '';
  const invoked: string[] = [];

  beforeAll(async () => {
    // No Lambda stand-in exists; this endpoint only counts Invoke requests and answers 200.
    server = createServer((req, res) => {
      invoked.push(req.url ?? '');
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-amz-executed-version': '$LATEST' });
        res.end('{"ok":true}');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    endpoint = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    server.close();
    await once(server, 'close');
  });

  it('RC-04 TooManyRequestsException is thrown before the service, retried by the SDK; without faults the call goes through', async () => {
    const invoke = new InvokeCommand({ FunctionName: 'worker', Payload: new TextEncoder().encode('{}') });
    const plain = withEnv(undefined, () => lambdaClient(endpoint));
    expect(faultMiddlewares(plain)).toEqual([]);
    await plain.send(invoke);
    expect(invoked).toHaveLength(1);

    const client = withEnv('{"seed":1,"lambda":{"tooManyRequests":1}}', () => lambdaClient(endpoint));
    const { faults, result } = await faultsDuring(() => client.send(invoke));
    const err = rejection(result);
    expect(err).toBeInstanceOf(TooManyRequestsException);
    expect((err as TooManyRequestsException).Reason).toBe(
      'ReservedFunctionConcurrentInvocationLimitExceeded',
    );
    expect(err.$metadata?.attempts).toBe(3);
    expect(faults.map((f) => `${f.service}:${f.operation}:${f.kind}`)).toEqual(
      Array(3).fill('lambda:Invoke:tooManyRequests'),
    );
    expect(invoked).toHaveLength(1); // none of the three attempts reached the service
  });
});
