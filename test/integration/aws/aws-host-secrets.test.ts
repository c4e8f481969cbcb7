/**
 * The AWS composition's own key loading (issue 11, item 12): `createAwsHost` without the `secrets`
 * option reads the list-cursor and batch-credential keys from `SECRET#<name>` items, creating
 * them on first use (`DynamoHostSecrets`). Every Lambda function of the Host composes it on its
 * own cold start, so functions that start together on a fresh table race to create the keys; they
 * must all end up with the same ones, or a credential minted by the batch host would be refused by
 * another function, and a cursor from one API instance by the next (SEC-01, DL-09).
 *
 * Against DynamoDB Local and the SQS stand-in; both first uses are held until both have tried to
 * create the key, so the race is certain rather than likely.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { format } from 'node:util';
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';

// Every log the entries can write is on, so that the check for keys in log lines sees them all.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'DEBUG';
  process.env.TAKOFORM_DEBUG = '1';
});

import { dynamoDbClient, sqsClient } from '../../../lambdas/adapters/aws/clients.ts';
import { createHostTable } from '../../../lambdas/adapters/aws/create-host-table.ts';
import { DynamoApiKeys } from '../../../lambdas/adapters/aws/dynamodb-api-keys.ts';
import { registrationItem } from '../../../lambdas/adapters/aws/dynamodb-worker-registry.ts';
import { type AwsHost, type AwsHostConfig, createAwsHost } from '../../../lambdas/composition/aws-host.ts';
import type { BatchHostRequest, BatchHostResponse } from '../../../lambdas/delivery/batch-host-protocol.ts';
import type { Slot } from '../../../lambdas/delivery/delivery-service.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import { createApiHandler } from '../../../lambdas/entries/api.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { API_ROOT } from '../../../lambdas/http/origin.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { FORMS } from '../../support/host-harness.ts';

const SECRET_NAMES = ['cursor-key', 'delivery-key'] as const;

/** Everything written to stdout, stderr or the console (so every log line) while this file runs. */
const written: string[] = [];
const originalWrite = {
  stdout: process.stdout.write.bind(process.stdout),
  stderr: process.stderr.write.bind(process.stderr),
};
const CONSOLE_METHODS = ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const;
const originalConsole = Object.fromEntries(CONSOLE_METHODS.map((m) => [m, console[m]]));
function captureOutput() {
  for (const m of CONSOLE_METHODS) console[m] = (...args: unknown[]) => void written.push(format(...args));
  for (const stream of ['stdout', 'stderr'] as const) {
    process[stream].write = ((chunk: unknown, ...rest: unknown[]) => {
      written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  }
}
function restoreOutput() {
  process.stdout.write = originalWrite.stdout;
  process.stderr.write = originalWrite.stderr;
  for (const m of CONSOLE_METHODS) console[m] = originalConsole[m] as (typeof console)[typeof m];
}

/**
 * A DynamoDB client for one "function". Conditional creations of `SECRET#` items are held until
 * `expected` of them (from all functions) have arrived for that name, or 5 s have passed.
 */
function functionClient(gate: Map<string, { arrived: number; open: () => void; opened: Promise<void> }>) {
  const client = dynamoDbClient(inject('ddbEndpoint'));
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Item?: Record<string, { S?: string }> };
      const pk = input.Item?.pk?.S;
      if (context.commandName === 'PutItemCommand' && pk?.startsWith('SECRET#')) {
        const g = gate.get(pk);
        if (g) {
          g.arrived++;
          if (g.arrived >= 2) g.open();
          await Promise.race([g.opened, new Promise((r) => setTimeout(r, 5_000))]);
        }
      }
      return next(args);
    },
    { step: 'initialize', name: 'holdSecretCreation' },
  );
  return client;
}

function newGate() {
  const gate = new Map<string, { arrived: number; open: () => void; opened: Promise<void> }>();
  for (const name of SECRET_NAMES) {
    let open = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    gate.set(`SECRET#${name}`, { arrived: 0, open, opened });
  }
  return gate;
}

describe('SEC-01 DL-09: the AWS composition loads its keys from the table', () => {
  const sqs = sqsClient(inject('sqsEndpoint'));
  const admin = dynamoDbClient(inject('ddbEndpoint'));
  const gate = newGate();
  let config: AwsHostConfig;
  let a: AwsHost; // e.g. the API and dispatcher-step functions
  let b: AwsHost; // e.g. the batch-host function, started at the same moment
  let token: string;
  /** The keys as the race left them. */
  const firstKeys: Buffer[] = [];

  beforeAll(async () => {
    captureOutput();
    const tableName = `secrets-${randomUUID()}`;
    await createHostTable(admin, tableName);
    config = {
      tableName,
      queueNamePrefix: `s${randomBytes(4).toString('hex')}-`,
      publicOrigin: 'https://host.test',
      workerTimeoutSeconds: 30,
      idleWaitSeconds: 1,
    };
    // Two cold starts at once on a table without keys; no `secrets` option.
    [a, b] = await Promise.all([
      createAwsHost(config, { dynamodb: functionClient(gate), sqs }, { graceMs: 1_000 }),
      createAwsHost(config, { dynamodb: functionClient(gate), sqs }, { graceMs: 1_000 }),
    ]);
    firstKeys.push(await storedKey('cursor-key'), await storedKey('delivery-key'));
    token = `tfk_${randomBytes(24).toString('base64url')}`;
    await new DynamoApiKeys(admin, tableName).put(token, 'alice', { team: 'write' });
  });
  afterAll(() => restoreOutput());

  async function storedKey(name: string): Promise<Buffer> {
    const out = await admin.send(
      new GetItemCommand({
        TableName: config.tableName,
        Key: { pk: { S: `SECRET#${name}` }, sk: { S: '_' } },
        ConsistentRead: true,
      }),
    );
    return Buffer.from(out.Item?.value?.B ?? new Uint8Array());
  }

  /** A request through the API Lambda handler of `host`, as API Gateway's proxy sends it. */
  async function request(
    host: AwsHost,
    method: string,
    path: string,
    opts: { body?: unknown; query?: Record<string, string>; headers?: Record<string, string> } = {},
  ) {
    const h: Record<string, string> = { authorization: `Bearer ${token}`, ...opts.headers };
    if (opts.body !== undefined) h['content-type'] = 'application/json';
    const out = await createApiHandler(host)({
      httpMethod: method,
      path: `${API_ROOT}${path}`,
      headers: h,
      multiValueHeaders: Object.fromEntries(Object.entries(h).map(([k, v]) => [k, [v]])),
      queryStringParameters: opts.query ?? null,
      multiValueQueryStringParameters: opts.query
        ? Object.fromEntries(Object.entries(opts.query).map(([k, v]) => [k, [v]]))
        : null,
      body: opts.body === undefined ? null : JSON.stringify(opts.body),
      isBase64Encoded: false,
    } as unknown as APIGatewayProxyEvent);
    return { status: out.statusCode, body: out.body ? JSON.parse(out.body) : undefined };
  }

  const create = (host: AwsHost, form: string, name: string, spec: unknown) =>
    request(host, 'POST', '/resources', {
      body: { form, space: 'team', name, spec },
      headers: { 'idempotency-key': `k-${randomUUID()}` },
    });

  async function settle(host: AwsHost) {
    for (let i = 0; i < 50; i++) if ((await host.host.executor.runDue()) === 0) return;
  }

  it('SEC-01 DL-09: two functions composed at once on a fresh table race to create the keys and load the same ones', async () => {
    // Both really tried to create each key (the race happened); one creation won.
    for (const name of SECRET_NAMES) expect(gate.get(`SECRET#${name}`)?.arrived).toBe(2);
    const [cursorKey, deliveryKey] = firstKeys as [Buffer, Buffer];
    expect(cursorKey).toHaveLength(32);
    expect(deliveryKey).toHaveLength(32);
    expect(cursorKey.equals(deliveryKey)).toBe(false);

    const batchId = `b${randomBytes(9).toString('hex')}`;
    const expected = createHmac('sha256', deliveryKey).update(batchId).digest('base64url');
    expect(a.host.delivery.credentialOf(batchId)).toBe(expected);
    expect(b.host.delivery.credentialOf(batchId)).toBe(expected);
  });

  it('SEC-01 DL-09: a batch credential and a list cursor minted by one function are accepted by the others, also by one started later; other keys refuse them', async () => {
    // A consumer, set up through function A's API and executor.
    const queue = await create(a, FORMS.queue, 'keys-q', { messageRetentionSeconds: 3600 });
    const out = await create(a, FORMS.queue, 'keys-out', { messageRetentionSeconds: 3600 });
    const functionArn = `arn:aws:lambda:us-east-1:000000000000:function:${config.queueNamePrefix}wkr-keys`;
    await admin.send(
      new PutItemCommand({
        TableName: config.tableName,
        Item: registrationItem({
          space: 'team',
          name: 'keys-w',
          functionArn,
          handlers: ['queue'],
          varsJson: '{}',
          queueProducersJson: JSON.stringify({ OUT: { queue: 'keys-out' } }),
          deploymentUid: `mw-${randomBytes(6).toString('hex')}`,
        }),
      }),
    );
    const worker = await create(a, FORMS.moduleWorker, 'keys-w', {});
    await settle(a);
    const consumer = await create(a, FORMS.consumer, 'keys', {
      queue: { resourceUid: queue.body.resourceUid },
      worker: { resourceUid: worker.body.resourceUid },
      maxBatchSize: 10,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: 1,
      maxRetries: 2,
      retryDelaySeconds: 0,
    });
    expect(consumer.status).toBe(202);
    await settle(a);
    const target = await a.host.queueDirectory.queue(queue.body.resourceUid);
    expect(target).toBeDefined();
    const [messageId] = await a.host.producer.sendBatch(target!, [{ body: 'hello' }]);

    // A third function cold-starts later: it reads the keys the first two agreed on.
    const c = await createAwsHost(config, { dynamodb: functionClient(newGate()), sqs }, { graceMs: 1_000 });
    // A Host with other keys (what a function that made its own keys would be).
    const other = await createAwsHost(
      config,
      { dynamodb: dynamoDbClient(inject('ddbEndpoint')), sqs },
      { secrets: { cursorKey: randomBytes(32), credentialKey: randomBytes(32) }, graceMs: 1_000 },
    );

    // One batch through the real worker runtime, each of its calls answered by another function:
    // the slot by A's dispatcher step, registration (the credential is minted) by B's batch host,
    // producer calls by A and then C, settlement by A, finalisation by C. Each producer call is
    // also offered, as sent, to a Host with other keys, which must refuse it.
    const acquired = (await createDispatcherStepHandler(a)({
      action: 'acquire',
      consumerUid: consumer.body.resourceUid,
      generation: 1,
    })) as { status: string; slot: Slot };
    expect(acquired.status).toBe('acquired');
    const hosts = {
      a: createBatchHostHandler(a),
      b: createBatchHostHandler(b),
      c: createBatchHostHandler(c),
    };
    const foreignHost = createBatchHostHandler(other);
    const answeredBy: string[] = [];
    const foreignAnswers: string[] = [];
    let credential = '';
    let produced = 0;
    const transport = async (req: BatchHostRequest): Promise<BatchHostResponse> => {
      const wire = JSON.parse(JSON.stringify(req));
      const by =
        req.action === 'register'
          ? 'b'
          : req.action === 'produce'
            ? produced++ === 0
              ? 'a'
              : 'c'
            : req.action === 'settle' || req.action === 'acquire'
              ? 'a'
              : 'c';
      if (req.action === 'produce') {
        const refused = await foreignHost(wire);
        foreignAnswers.push(refused.ok ? 'ok' : refused.error.name);
      }
      const answer = await hosts[by](wire);
      answeredBy.push(`${req.action}:${by}:${answer.ok ? 'ok' : answer.error.name}`);
      if (req.action === 'register' && answer.ok && !credential) {
        credential = (answer.value as { credential: string }).credential;
      }
      return answer;
    };
    const seen: string[] = [];
    const workerHandler = createQueueWorkerHandler(
      {
        async queue(
          batch: { messages: { id: string }[]; acknowledgeAll(): Promise<void> },
          env: { OUT: { send(body: string): Promise<unknown> } },
        ) {
          seen.push(...batch.messages.map((m) => m.id));
          await env.OUT.send('from-a');
          await env.OUT.send('from-c');
          await batch.acknowledgeAll();
        },
      },
      { queueProducers: { OUT: { queue: 'keys-out' } } },
      { sqs, host: () => remoteBatchHost(transport), idleWaitSeconds: 1, exit: () => {} },
    );
    const result = await workerHandler(
      { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
      { getRemainingTimeInMillis: () => 60_000 },
    );
    expect(seen).toEqual([messageId]);
    expect(result).toMatchObject({ delivered: 1 });
    expect(answeredBy.slice(0, 5)).toEqual([
      'register:b:ok',
      'produce:a:ok',
      'produce:c:ok',
      'settle:a:ok',
      'finalize:c:ok',
    ]);
    expect(foreignAnswers).toEqual(['backend_unavailable', 'backend_unavailable']);
    for (const h of [a, b, c]) expect(h.host.delivery.credentialOf(acquired.slot.batchId)).toBe(credential);
    expect(other.host.delivery.credentialOf(acquired.slot.batchId)).not.toBe(credential);
    // Acknowledged (gone from the source queue); both producer calls delivered, nothing more.
    const left = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: target!.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
    );
    expect(left.Messages ?? []).toEqual([]);
    const outTarget = await a.host.queueDirectory.queue(out.body.resourceUid);
    const sent = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: outTarget!.sqsUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect(
      (sent.Messages ?? []).map((m) => new TextDecoder().decode(decodeEnvelope(m.Body)?.body)).sort(),
    ).toEqual(['from-a', 'from-c']);

    // A list cursor minted by A continues the same list on B and on C; other keys refuse it.
    const firstPage = await request(a, 'GET', '/resources', { query: { limit: '1' } });
    expect(firstPage.status).toBe(200);
    const cursor = firstPage.body.nextCursor as string;
    expect(cursor).toMatch(/^v1\./);
    const pages = [];
    for (const h of [b, c]) {
      const next = await request(h, 'GET', '/resources', { query: { limit: '1', cursor } });
      expect(next.status).toBe(200);
      pages.push(next.body.items.map((i: { uid: string }) => i.uid));
    }
    expect(pages[0]).toHaveLength(1);
    expect(pages[1]).toEqual(pages[0]);
    expect(pages[0]).not.toEqual(firstPage.body.items.map((i: { uid: string }) => i.uid));
    const foreign = await request(other, 'GET', '/resources', { query: { limit: '1', cursor } });
    expect(foreign.status).toBe(400);

    // The keys are still the ones first created: nobody replaced them.
    const cursorKey = await storedKey('cursor-key');
    const deliveryKey = await storedKey('delivery-key');
    expect([cursorKey, deliveryKey]).toEqual(firstKeys);
    expect(createHmac('sha256', deliveryKey).update(acquired.slot.batchId).digest('base64url')).toBe(
      credential,
    );

    // No log line (nor anything else written) carries a key, in any spelling, or the credential.
    const text = written.join('');
    expect(text).toContain('batch registered'); // the entries did log: the check below is not vacuous
    for (const key of [cursorKey, deliveryKey]) {
      for (const spelling of [
        key.toString('hex'),
        key.toString('base64'),
        key.toString('base64url'),
        [...key].join(','),
      ]) {
        expect(text).not.toContain(spelling);
      }
    }
    expect(text).not.toContain(credential);
  });
});
