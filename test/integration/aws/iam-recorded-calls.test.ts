/**
 * IAM proven by simulation on the calls the code really makes (SEC-02). A compact scenario runs
 * the real Lambda entries of the AWS composition — API, executor, dispatcher step, worker runtime,
 * batch host, supervisor — over the local stand-ins, each with its own Host composition (as each
 * function has its own process on AWS), while the SDK call recorder (call-recorder.ts) notes
 * every call and the entry that made it. Each call is then mapped to the IAM requests AWS would
 * authorize on the deployed stack and evaluated with @cloud-copilot/iam-simulate against that
 * function's role in the synthesized template:
 * - every recorded call is allowed;
 * - every action a role allows is exercised by a recorded call or listed, with its reason, in
 *   iam-unexercised.json (and no listed entry is stale);
 * - the worker's receives are denied on another Space's queue.
 * Lambda, Step Functions and CloudWatch have no local stand-in: their SDK clients are real, with
 * the recorder, and a last middleware answers in process (Invoke runs the batch-host entry).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SFNClient } from '@aws-sdk/client-sfn';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import {
  asFunction,
  type RecordedCall,
  recordAwsCalls,
  withCallRecorder,
} from '../../../lambdas/adapters/aws/call-recorder.ts';
import { QUEUE_TAGS } from '../../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { type AwsHost, type AwsHostConfig, createAwsHost } from '../../../lambdas/composition/aws-host.ts';
import { superviseOnce } from '../../../lambdas/composition/aws-supervisor.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { runExecutor } from '../../../lambdas/entries/executor.ts';
import { AWS_ENV } from '../../../lambdas/shared/aws-env.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { lambdaTransport, remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { ModuleWorkerFunction } from '../../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack } from '../../../lib/host-stack.ts';
import { type AwsTestHost, createAwsTestHost, TEST_DISPATCHER_ARN } from '../../support/aws-host-harness.ts';
import {
  ACCOUNT,
  REGION,
  type SimulationResult,
  SynthesizedPolicies,
  TABLE_ARN,
} from '../../support/iam-simulation.ts';
import { type IamRequest, IamRequestMapper } from '../../support/recorded-iam-requests.ts';
import unexercisedList from './iam-unexercised.json' with { type: 'json' };

const FUNCTIONS = ['api', 'executor', 'step', 'worker', 'batchHost', 'supervisor'] as const;
type FunctionName = (typeof FUNCTIONS)[number];

/** Allowed actions no recorded call exercises, per function (`*`: any), each with its reason. */
const unexercised: readonly { functions: string[]; actions: string[]; reason: string }[] = unexercisedList;

const SPACE = 'team';
const FORMS = {
  queue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
  worker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
  consumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
};
const WORKER_ENTRY = new URL('../../infra/fixtures/worker.mjs', import.meta.url).pathname;
const LOCAL_CREDENTIALS = {
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
};
const b64 = (s: string) => Buffer.from(s).toString('base64');

type Answer = (operation: string, input: Record<string, unknown>) => Promise<Record<string, unknown>>;

/** `client` answered in process by `answer`: the last initialize-step middleware, after the recorder. */
function localClient<C extends { middlewareStack: unknown }>(client: C, answer: Answer): C {
  (client.middlewareStack as { add(m: unknown, o: unknown): void }).add(
    (_next: unknown, context: { commandName?: string }) =>
      async (args: { input: Record<string, unknown> }) => ({
        output: {
          $metadata: {},
          ...(await answer((context.commandName ?? '').replace(/Command$/, ''), args.input)),
        },
        response: {},
      }),
    { step: 'initialize', priority: 'low', name: 'localAnswer' },
  );
  return client;
}

describe('IAM by simulation of the recorded SDK calls (SEC-02)', () => {
  const calls: RecordedCall[] = [];
  let stopRecording: () => void = () => {};
  let policies: SynthesizedPolicies;
  let roles: Record<FunctionName, IConstruct>;
  let mapper: IamRequestMapper;
  /** Each attributed call's IAM requests, in call order. */
  const requests: { fn: FunctionName; call: RecordedCall; request: IamRequest }[] = [];

  beforeAll(async () => {
    // The synthesized stack, as the infra tests synthesize it, with one worker of the Space.
    const app = new App({
      context: { 'aws:cdk:bundling-stacks': [], '@aws-cdk/aws-iam:minimizePolicies': true },
    });
    const stack = new TakoformHostStack(app, 'TakoformHost', { env: { account: ACCOUNT, region: REGION } });
    const worker = new ModuleWorkerFunction(stack, 'Orders', {
      host: stack.host.workerBinding,
      entry: WORKER_ENTRY,
      space: SPACE,
      name: 'orders-w',
      handlers: ['queue'],
    });
    const template = Template.fromStack(stack);
    policies = new SynthesizedPolicies(stack, template, stack.host.table.table);
    const d = stack.host.delivery;
    roles = {
      api: stack.host.api.handler.role,
      executor: d.executorFunction.role,
      step: d.stepFunction.role,
      worker: worker.function.role,
      batchHost: d.batchHostFunction.role,
      supervisor: d.supervisorFunction.role,
    };
    const env = (fn: IConstruct, name: string) =>
      String(
        policies.resolve(template.toJSON().Resources[policies.id(fn)].Properties.Environment.Variables[name]),
      );
    const deployedPrefix = env(d.executorFunction.fn, AWS_ENV.queuePrefix);

    stopRecording = recordAwsCalls((call) => calls.push(call));
    const secrets = { cursorKey: randomBytes(32), credentialKey: randomBytes(32) };
    let batchHostEntry: ReturnType<typeof createBatchHostHandler> | undefined;
    const lambda = localClient(
      withCallRecorder(new LambdaClient(LOCAL_CREDENTIALS), 'lambda'),
      async (op, input) => {
        if (op !== 'Invoke') throw new Error(`unexpected Lambda ${op}`);
        // The scenario runs the executor itself after each acceptance.
        if (input.FunctionName === 'executor') return { StatusCode: 202 };
        if (input.FunctionName !== 'batch-host' || !batchHostEntry)
          throw new Error(`unknown function ${String(input.FunctionName)}`);
        const request = JSON.parse(new TextDecoder().decode(input.Payload as Uint8Array));
        const entry = batchHostEntry;
        const out = await asFunction('batchHost', () => entry(request));
        return { StatusCode: 200, Payload: new TextEncoder().encode(JSON.stringify(out)) };
      },
    );
    const sfn = localClient(
      withCallRecorder(new SFNClient(LOCAL_CREDENTIALS), 'states'),
      async (op, input) => {
        if (op !== 'StartExecution') throw new Error(`unexpected Step Functions ${op}`);
        return {
          executionArn: `${String(input.stateMachineArn)}:${String(input.name)}`,
          startDate: new Date(),
        };
      },
    );
    const cloudwatch = localClient(
      withCallRecorder(new CloudWatchClient(LOCAL_CREDENTIALS), 'cloudwatch'),
      async () => ({
        MetricDataResults: [],
      }),
    );

    // The API function's Host (the harness's), then one Host per other function over the same table.
    const t: AwsTestHost = await createAwsTestHost({
      lambda,
      executorFunction: 'executor',
      sfn,
      cloudwatch,
      secrets,
    });
    const { executorFunction: _e, dispatcherArn: _d, ...plain } = t.host.config;
    const hostOf = (config: AwsHostConfig, withLanes: boolean): Promise<AwsHost> =>
      createAwsHost(
        withLanes ? { ...config, dispatcherArn: TEST_DISPATCHER_ARN } : config,
        { dynamodb: t.dynamodb, sqs: t.sqs, ...(withLanes ? { sfn } : {}) },
        { secrets, graceMs: 1_000 },
      );
    // The executor creates queues as on AWS: TLS-only policy and the deployment's tags.
    const executor = await hostOf(
      {
        ...plain,
        queueSettings: {
          queueArnPrefix: 'arn:aws:sqs:us-east-1:000000000000:',
          tags: { 'cost-center': 'cc-42' },
        },
      },
      // It starts a consumer's lanes the moment an update applies.
      true,
    );
    const step = createDispatcherStepHandler(await hostOf(plain, true));
    batchHostEntry = createBatchHostHandler(await hostOf(plain, true));
    const supervisor = await hostOf(plain, true);

    mapper = new IamRequestMapper({
      account: ACCOUNT,
      region: REGION,
      table: { local: t.tableName, arn: TABLE_ARN },
      queuePrefix: { local: t.queueNamePrefix, deployed: deployedPrefix },
      functions: {
        executor: policies.functionArn(d.executorFunction.fn),
        'batch-host': policies.functionArn(d.batchHostFunction.fn),
      },
      stateMachines: { [TEST_DISPATCHER_ARN]: String(policies.resolve(stack.resolve(d.dispatcherArn))) },
    });

    // The scenario.
    const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      asFunction('api', () => t.request(method, path, body, headers));
    const key = () => ({ 'idempotency-key': `k-${randomUUID()}` });
    const execute = () =>
      asFunction('executor', () => runExecutor(executor, () => 60_000, { lingerMs: 0, marginMs: 1_000 }));
    const accepted = async (r: Promise<{ status: number; body: Record<string, unknown> }>) => {
      const out = await r;
      expect(out.status, JSON.stringify(out.body)).toBe(202);
      await execute();
      return out.body.resourceUid as string;
    };
    const create = (form: string, name: string, spec: unknown) =>
      accepted(api('POST', '/resources', { form, space: SPACE, name, spec }, key()));

    const queueUid = await create(FORMS.queue, 'orders-q', { messageRetentionSeconds: 3600 });
    const dlqUid = await create(FORMS.queue, 'orders-dlq', { messageRetentionSeconds: 3600 });
    await create(FORMS.queue, 'orders-out', { messageRetentionSeconds: 3600 });
    // Updated, then deleted: referenced by nothing.
    const scratchUid = await create(FORMS.queue, 'scratch', { messageRetentionSeconds: 3600 });
    // What ModuleWorkerFunction's custom resource writes at deploy time (not a function entry).
    await t.registerWorker({
      space: SPACE,
      name: 'orders-w',
      functionArn: `arn:aws:lambda:us-east-1:000000000000:function:${t.queueNamePrefix}wkr-orders`,
      queueProducers: { OUT: { queue: 'orders-out' } },
    });
    const workerUid = await create(FORMS.worker, 'orders-w', {});
    const consumerSpec = {
      queue: { resourceUid: queueUid },
      worker: { resourceUid: workerUid },
      deadLetterQueue: { resourceUid: dlqUid },
      maxBatchSize: 2,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: 2,
      maxRetries: 0,
      retryDelaySeconds: 0,
    };
    const consumerUid = await create(FORMS.consumer, 'orders', consumerSpec);
    await accepted(
      api(
        'PUT',
        `/resources/${scratchUid}`,
        { spec: { messageRetentionSeconds: 7200 } },
        {
          ...key(),
          'takoform-expected-generation': '1',
        },
      ),
    );

    // Producer extension (send, and the wake of the consumer) and the operator's reads.
    const ext = `/ext/queues/v1/queues`;
    const sent = await api('POST', `${ext}/${queueUid}/messages`, {
      messages: ['m0', 'm1', 'm2'].map((m) => ({ body: b64(m) })),
    });
    expect(sent.status).toBe(200);
    expect((await api('GET', `${ext}/${queueUid}/stats`)).status).toBe(200);
    expect((await api('POST', `${ext}/${queueUid}/peek`, { limit: 1 })).status).toBe(200);

    // One lane as the dispatcher runs it: acquire, the worker's invocation, hand-over. The worker
    // forwards its first message, retries the others (dead-lettered: no retries allowed).
    const workerModule = {
      async queue(
        batch: {
          messages: { id: string }[];
          acknowledge(id: string): Promise<void>;
          retry(id: string): Promise<void>;
        },
        workerEnv: { OUT: { send(body: string): Promise<string> } },
      ) {
        const [first, ...rest] = batch.messages;
        if (first) {
          await workerEnv.OUT.send('forwarded');
          await batch.acknowledge(first.id);
        }
        for (const m of rest) await batch.retry(m.id);
      },
    };
    const workerEntry = createQueueWorkerHandler(
      workerModule,
      { queueProducers: { OUT: { queue: 'orders-out' } } },
      {
        sqs: t.sqs,
        host: () => remoteBatchHost(lambdaTransport(lambda, 'batch-host')),
        idleWaitSeconds: 0,
        exit: () => {},
      },
    );
    const acquired = (await asFunction('step', () =>
      step({ action: 'acquire', consumerUid, generation: 1 }),
    )) as {
      status: string;
      slot: unknown;
    };
    expect(acquired.status).toBe('acquired');
    await asFunction('worker', () =>
      workerEntry(
        { kind: 'takoform.queue-batch.v1', slot: acquired.slot },
        { getRemainingTimeInMillis: () => 30_000 },
      ),
    );
    await asFunction('step', () => step({ action: 'handover', consumerUid, generation: 1 }));

    // A backlog no lane receives (the wake's execution is not run here), so the supervisor's
    // minute starts lanes — two, so it reads and seals their lane context once (issue 13) — and
    // reads the oldest age; then the operator's writes.
    const more = await api('POST', `${ext}/${queueUid}/messages`, {
      messages: [{ body: b64('m3') }, { body: b64('m4') }, { body: b64('m5') }],
    });
    expect(more.status).toBe(200);
    const round = await asFunction('supervisor', () =>
      superviseOnce({ host: supervisor, cloudwatch, oldestAgeEveryMinutes: 1 }),
    );
    expect(round.started).toBe(2);
    // Updated with that backlog waiting: the executor starts the new generation's lanes as the
    // update applies, not the supervisor's next round.
    await accepted(
      api(
        'PUT',
        `/resources/${consumerUid}`,
        { spec: { ...consumerSpec, maxConcurrency: 3 } },
        { ...key(), 'takoform-expected-generation': '1' },
      ),
    );
    expect(calls.some((c) => c.fn === 'executor' && c.operation === 'StartExecution')).toBe(true);
    expect((await api('POST', `${ext}/${dlqUid}/redrive`, { to: queueUid })).status).toBe(200);
    expect((await api('POST', `${ext}/${queueUid}/purge`, {})).status).toBe(200);

    // Deletes: the consumer, and a queue.
    await accepted(
      api('DELETE', `/resources/${consumerUid}`, undefined, {
        ...key(),
        'takoform-expected-generation': '2',
      }),
    );
    await accepted(
      api('DELETE', `/resources/${scratchUid}`, undefined, { ...key(), 'takoform-expected-generation': '2' }),
    );
    stopRecording();

    for (const call of calls) {
      if (call.fn !== undefined) {
        if (!(FUNCTIONS as readonly string[]).includes(call.fn))
          throw new Error(`unknown function ${call.fn}`);
        for (const request of mapper.requests(call))
          requests.push({ fn: call.fn as FunctionName, call, request });
      }
      mapper.observe(call);
    }
  });
  afterAll(() => stopRecording());

  const simulate = (fn: FunctionName, r: IamRequest): Promise<SimulationResult> =>
    // Context keys are the queue's tags; most conditions do not read them, so they may not apply.
    policies.simulate(roles[fn], r.action, r.resource, r.context, false);

  it('SEC-02: every SDK call each function’s entry made is allowed by that function’s role', async () => {
    expect(new Set(requests.map((r) => r.fn))).toEqual(new Set(FUNCTIONS));
    const refused: string[] = [];
    for (const { fn, request } of requests) {
      const result = await simulate(fn, request);
      if (result !== 'Allowed') refused.push(`${fn}: ${request.action} on ${request.resource} → ${result}`);
    }
    expect(refused).toEqual([]);
  });

  it('every call outside an entry is the test’s own setup or the SQS stand-in’s check, so none escapes the check above', () => {
    const setup = calls
      .filter((c) => c.fn === undefined)
      .map((c) => {
        const i = c.input as { Item?: { pk?: { S?: string } }; AttributeNames?: string[] };
        if (c.operation === 'PutItem') return `PutItem ${i.Item?.pk?.S?.split('#')[0]}`;
        if (c.operation === 'GetQueueAttributes') return `GetQueueAttributes ${i.AttributeNames?.join()}`;
        return c.operation;
      });
    // The table as the stack creates it, the first API key (npm run admin), the worker's
    // registration (ModuleWorkerFunction's custom resource), and strict-sqs.ts's in-flight reads.
    const known = new Set([
      'CreateTable',
      'DescribeTable',
      'UpdateTimeToLive',
      'PutItem KEY',
      'PutItem WORKER',
      'GetQueueAttributes ApproximateNumberOfMessagesNotVisible',
    ]);
    expect(setup.filter((op) => !known.has(op))).toEqual([]);
  });

  it('SEC-02: every action a role allows is exercised by a recorded call or listed with its reason', () => {
    const listed = (fn: FunctionName, action: string) =>
      unexercised.some(
        (e) => e.actions.includes(action) && (e.functions.includes('*') || e.functions.includes(fn)),
      );
    const unexplained: string[] = [];
    const idle = new Map<string, Set<FunctionName>>(); // action → functions that allow it and never call it
    for (const fn of FUNCTIONS) {
      const exercised = new Set(requests.filter((r) => r.fn === fn).map((r) => r.request.action));
      for (const action of policies.allowedActions(roles[fn])) {
        if (exercised.has(action)) continue;
        idle.set(action, (idle.get(action) ?? new Set()).add(fn));
        if (!listed(fn, action)) unexplained.push(`${fn}: ${action}`);
      }
    }
    expect(unexplained).toEqual([]);
    // A listed action some named function now calls (or no longer holds) is a stale entry.
    const stale = unexercised.flatMap((e) =>
      e.actions
        .filter((a) => {
          const fns = idle.get(a);
          return !fns || !(e.functions.includes('*') || e.functions.some((f) => fns.has(f as FunctionName)));
        })
        .map((a) => `${e.functions.join(',')}: ${a}`),
    );
    expect(stale).toEqual([]);
  });

  it('SEC-02 DL-09: the worker’s own receives are allowed on its Space’s queue and denied on another Space’s', async () => {
    const receives = requests.filter((r) => r.fn === 'worker' && r.request.action === 'sqs:ReceiveMessage');
    expect(receives.length).toBeGreaterThan(0);
    const spaceTag = `aws:ResourceTag/${QUEUE_TAGS.space}`;
    for (const { request } of receives) {
      expect(request.context[spaceTag]).toBe(SPACE);
      expect(await simulate('worker', request)).toBe('Allowed');
      expect(
        await simulate('worker', { ...request, context: { ...request.context, [spaceTag]: 'other' } }),
      ).toBe('ImplicitlyDenied');
    }
  });
});
