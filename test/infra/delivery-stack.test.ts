import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitKey } from '../../lambdas/adapters/aws/dynamodb-commit-store.ts';
import { dispatcherDefinition } from '../../lambdas/delivery/dispatcher-definition.ts';
import { HOST_METRICS } from '../../lambdas/shared/aws-env.ts';
import { SQS_ACTIONS } from '../../lib/constructs/delivery-pipeline.ts';
import { introspectHandlers, ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHost } from '../../lib/constructs/takoform-host.ts';
import { TakoformHostStack, type TakoformHostStackProps } from '../../lib/host-stack.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));

type Statement = { Action: string | string[]; Resource: unknown; Effect: string };
const actionsOf = (s: Statement) => [s.Action].flat();
const resourcesOf = (s: Statement) => [s.Resource].flat();

/** A template value with intrinsics rendered as text: `Fn::Join` joined, others as `{{GetAtt:X.Arn}}`/`{{Ref:X}}`. */
function render(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as Record<string, unknown>;
  if (typeof o?.Ref === 'string') return `{{Ref:${o.Ref}}}`;
  if (Array.isArray(o?.['Fn::GetAtt'])) return `{{GetAtt:${(o['Fn::GetAtt'] as string[]).join('.')}}}`;
  const join = o?.['Fn::Join'] as [string, unknown[]] | undefined;
  if (join) return join[1].map(render).join(join[0]);
  throw new Error(`unexpected template value ${JSON.stringify(v)}`);
}

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function build(
  props: TakoformHostStackProps = {},
  worker: Partial<ConstructorParameters<typeof ModuleWorkerFunction>[2]> | false = {},
  withNag = false,
) {
  const outdir = mkdtempSync(join(tmpdir(), 'takoform-cdk-'));
  tempDirs.push(outdir);
  const app = new App({ outdir, context: NO_BUNDLING });
  const stack = new TakoformHostStack(app, 'TakoformHost', props);
  const mw =
    worker === false
      ? undefined
      : new ModuleWorkerFunction(stack, 'Orders', {
          host: stack.host.workerBinding,
          entry: WORKER,
          space: 'team',
          name: 'orders',
          vars: { GREETING: 'hi' },
          queueProducers: { OUT: { queue: 'out-q' } },
          ...worker,
        });
  if (withNag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack, worker: mw, outdir };
}

describe('delivery on AWS: template', () => {
  let stack: TakoformHostStack;
  let worker: ModuleWorkerFunction;
  let template: Template;
  const id = (c: IConstruct) => stack.getLogicalId(c.node.defaultChild as CfnElement);
  const arnOf = (c: IConstruct) => ({ 'Fn::GetAtt': [id(c), 'Arn'] });
  const queuePattern = {
    'Fn::Join': [
      '',
      [
        'arn:',
        { Ref: 'AWS::Partition' },
        ':sqs:',
        { Ref: 'AWS::Region' },
        ':',
        { Ref: 'AWS::AccountId' },
        ':takoform-host_*',
      ],
    ],
  };
  /** Every statement of every policy attached to `role`. */
  const statementsOf = (role: IConstruct): Statement[] => {
    const ref = JSON.stringify({ Ref: id(role) });
    return Object.values(template.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes(ref))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
  };

  beforeAll(() => {
    const built = build();
    stack = built.stack;
    worker = built.worker as ModuleWorkerFunction;
    template = Template.fromStack(stack);
  });

  it('OPS-01: a STANDARD and an EXPRESS dispatcher with the rendered definitions, ERROR logs without data, and tracing', () => {
    const d = stack.host.delivery;
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 2);
    for (const [machine, kind, type] of [
      [d.stateMachine, 'standard', 'STANDARD'],
      [d.expressStateMachine, 'express', 'EXPRESS'],
    ] as const) {
      const props = template.findResources('AWS::StepFunctions::StateMachine')[id(machine)]?.Properties;
      expect(props).toMatchObject({
        StateMachineType: type,
        TracingConfiguration: { Enabled: true },
        LoggingConfiguration: {
          Level: 'ERROR',
          IncludeExecutionData: false,
          Destinations: [{ CloudWatchLogsLogGroup: { LogGroupArn: arnOf(d.stateMachineLogs) } }],
        },
      });
      const parts = props.DefinitionString['Fn::Join'][1] as unknown[];
      const placeholder = 'STEP_FUNCTION_ARN';
      const rendered = parts
        .map((p) =>
          typeof p === 'string'
            ? p
            : JSON.stringify(p) === JSON.stringify(arnOf(d.stepFunction.fn))
              ? placeholder
              : '?',
        )
        .join('');
      expect(JSON.parse(rendered)).toEqual(dispatcherDefinition({ stepFunction: placeholder }, kind));
    }
  });

  it('OPS-01: the executor and the supervisor run every minute', () => {
    const d = stack.host.delivery;
    for (const fn of [d.executorFunction.fn, d.supervisorFunction.fn]) {
      template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        State: 'ENABLED',
        Targets: [Match.objectLike({ Arn: arnOf(fn) })],
      });
      template.hasResourceProperties('AWS::Lambda::Permission', {
        Action: 'lambda:InvokeFunction',
        Principal: 'events.amazonaws.com',
        FunctionName: arnOf(fn),
      });
    }
    template.resourceCountIs('AWS::Events::Rule', 2);
  });

  it('functions: each Host function knows the queue prefix, the origin and the worker bound; the supervisor its dispatcher', () => {
    const d = stack.host.delivery;
    for (const fn of [
      d.stepFunction.fn,
      d.batchHostFunction.fn,
      d.executorFunction.fn,
      d.supervisorFunction.fn,
    ]) {
      const props = template.findResources('AWS::Lambda::Function')[id(fn)]?.Properties;
      expect(props.Environment.Variables).toMatchObject({
        TAKOFORM_TABLE: { Ref: id(stack.host.table.table) },
        TAKOFORM_QUEUE_PREFIX: 'takoform-host_',
        TAKOFORM_HOST_NAME: 'takoform-host',
        TAKOFORM_WORKER_TIMEOUT_SECONDS: '810',
        TAKOFORM_IDLE_WAIT_SECONDS: '20',
        TAKOFORM_PUBLIC_ORIGIN: expect.anything(),
      });
      expect(props.Runtime).toBe('nodejs24.x');
    }
    // Every function that starts lanes knows the dispatchers by their ARNs, built from fixed names.
    const dispatcherArn = Stack.of(d).resolve(d.dispatcherArn);
    const expressArn = Stack.of(d).resolve(d.expressDispatcherArn);
    for (const f of [
      d.supervisorFunction.fn,
      d.stepFunction.fn,
      d.batchHostFunction.fn,
      stack.api.handler.fn,
    ]) {
      const props = template.findResources('AWS::Lambda::Function')[id(f)]?.Properties;
      expect(props.Environment.Variables.TAKOFORM_DISPATCHER_ARN).toEqual(dispatcherArn);
      expect(props.Environment.Variables.TAKOFORM_DISPATCHER_EXPRESS_ARN).toEqual(expressArn);
    }
    for (const [machine, name, arn] of [
      [d.stateMachine, d.dispatcherName, dispatcherArn],
      [d.expressStateMachine, d.expressDispatcherName, expressArn],
    ] as const) {
      expect(
        template.findResources('AWS::StepFunctions::StateMachine')[id(machine)]?.Properties,
      ).toMatchObject({ StateMachineName: name });
      expect(JSON.stringify(arn)).toContain(`:stateMachine:${name}"`);
    }
    const api = template.findResources('AWS::Lambda::Function')[id(stack.api.handler.fn)]?.Properties;
    expect(api.Environment.Variables.TAKOFORM_EXECUTOR_FUNCTION).toEqual(arnOf(d.executorFunction.fn));
  });

  it('SEC-02: each Host function has exactly the SQS actions it calls, on the queue prefix only', () => {
    const d = stack.host.delivery;
    const expected: [IConstruct, readonly string[]][] = [
      [stack.api.handler.role, SQS_ACTIONS.api],
      [d.stepFunction.role, SQS_ACTIONS.step],
      [d.batchHostFunction.role, SQS_ACTIONS.batchHost],
      [d.executorFunction.role, SQS_ACTIONS.executor],
      [d.supervisorFunction.role, SQS_ACTIONS.supervisor],
      [worker.function.role, SQS_ACTIONS.worker],
    ];
    for (const [role, actions] of expected) {
      const sqs = statementsOf(role).filter((s) => actionsOf(s).some((a) => a.startsWith('sqs:')));
      expect(sqs.flatMap(actionsOf).sort()).toEqual([...actions].sort());
      expect(sqs.flatMap(resourcesOf)).toEqual([queuePattern]);
    }
    expect(SQS_ACTIONS.executor).toContain('sqs:TagQueue'); // CreateQueue with tags needs it
  });

  it('SEC-02: no policy grants a wildcard action, and every DynamoDB grant is on the Host table', () => {
    const table = arnOf(stack.host.table.table);
    const index = { 'Fn::Join': ['', [table, '/index/*']] };
    const all = Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
      (p) => p.Properties.PolicyDocument.Statement as Statement[],
    );
    expect(all.flatMap(actionsOf).filter((a) => a.includes('*'))).toEqual([]);
    const dynamo = all.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
    expect(dynamo.length).toBeGreaterThan(0);
    for (const r of dynamo.flatMap(resourcesOf)) expect([table, index]).toContainEqual(r);
  });

  it('SEC-02: a worker can receive from Host queues and invoke the batch host, nothing else — no DynamoDB at all', () => {
    const statements = statementsOf(worker.function.role);
    expect(statements.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')))).toEqual([]);
    const byAction = statements.flatMap((s) => actionsOf(s).map((a) => [a, resourcesOf(s)] as const));
    const invoke = byAction.filter(([a]) => a.startsWith('lambda:'));
    expect(invoke).toEqual([['lambda:InvokeFunction', [arnOf(stack.host.delivery.batchHostFunction.fn)]]]);
    expect(byAction.map(([a]) => a).sort()).toEqual([
      'lambda:InvokeFunction',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'sqs:ReceiveMessage',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
    const role = template.findResources('AWS::IAM::Role')[id(worker.function.role)];
    expect(role?.Properties.ManagedPolicyArns).toBeUndefined();
  });

  it('SEC-02 DL-09: a worker receives only from Host queues tagged with its own Space (SQS ABAC)', () => {
    const receive = statementsOf(worker.function.role).filter((s) =>
      actionsOf(s).includes('sqs:ReceiveMessage'),
    );
    expect(receive).toEqual([
      {
        Sid: 'ReceiveFromOwnSpaceQueues',
        Effect: 'Allow',
        Action: 'sqs:ReceiveMessage',
        Resource: queuePattern,
        Condition: { StringEquals: { 'aws:ResourceTag/takoform:space': 'team' } },
      },
    ]);
    // Another Space's worker is conditioned on its own Space.
    const other = build({}, { space: 'other' });
    const t = Template.fromStack(other.stack);
    const roleId = other.stack.getLogicalId(
      (other.worker as ModuleWorkerFunction).function.role.node.defaultChild as CfnElement,
    );
    const conditions = Object.values(t.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes(JSON.stringify({ Ref: roleId })))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as { Action: unknown; Condition?: unknown }[])
      .filter((s) => [s.Action].flat().includes('sqs:ReceiveMessage'))
      .map((s) => s.Condition);
    expect(conditions).toEqual([{ StringEquals: { 'aws:ResourceTag/takoform:space': 'other' } }]);
  });

  it('SEC-02: grantProduce gives SendMessage on the Host queues and PutItem on commit items (key, TTL and the copies to keep only), nothing else', () => {
    const { stack: s } = build({}, false);
    const all = new iam.Role(s, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
    const one = new iam.Role(s, 'OneQueue', { assumedBy: new iam.AccountRootPrincipal() });
    s.host.grantProduce(all);
    s.host.grantProduce(one, { queueUids: ['q-1'] });
    const t = Template.fromStack(s);
    const of = (role: iam.Role) => {
      const ref = JSON.stringify({ Ref: s.getLogicalId(role.node.defaultChild as CfnElement) });
      return Object.values(t.findResources('AWS::IAM::Policy'))
        .filter((p) => JSON.stringify(p.Properties.Roles).includes(ref))
        .flatMap((p) => p.Properties.PolicyDocument.Statement);
    };
    const table = {
      'Fn::GetAtt': [s.getLogicalId(s.host.table.table.node.defaultChild as CfnElement), 'Arn'],
    };
    const commits = {
      Effect: 'Allow',
      Action: 'dynamodb:PutItem',
      Resource: table,
      Condition: {
        'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['COMMIT#*'] },
        'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['pk', 'sk', 'expiresAt', 'onlyCopies'] },
      },
    };
    const wakeFn = s.host.delivery.wakeFunction.fn;
    const wakeArn = { 'Fn::GetAtt': [s.getLogicalId(wakeFn.node.defaultChild as CfnElement), 'Arn'] };
    const wake = { Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: wakeArn };
    expect(of(all)).toEqual([
      { Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queuePattern },
      commits,
      wake,
    ]);
    const named = JSON.parse(JSON.stringify(queuePattern).replace('takoform-host_*', 'takoform-host_q-1'));
    expect(of(one)).toEqual([{ Effect: 'Allow', Action: 'sqs:SendMessage', Resource: named }, commits, wake]);
    // The pattern matches the key the commit store writes.
    expect(commitKey('c1').pk).toBe('COMMIT#c1');
  });

  it('DL-01 SEC-02: the wake function exists only once a producer is granted; it may start lanes, and keeps no event past a minute', () => {
    const { stack: s } = build({}, false);
    const wakeFunctions = () =>
      s.host.delivery.node.children.filter((c) => c.node.id === 'WakeFunction').length;
    expect(wakeFunctions()).toBe(0);
    s.host.grantProduce(new iam.Role(s, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }));
    s.host.grantProduce(new iam.Role(s, 'Another', { assumedBy: new iam.AccountRootPrincipal() }));
    expect(wakeFunctions()).toBe(1);
    const fn = s.host.delivery.wakeFunction;
    const t = Template.fromStack(s);
    const roleRef = JSON.stringify({ Ref: s.getLogicalId(fn.role.node.defaultChild as CfnElement) });
    const start = Object.values(t.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes(roleRef))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[])
      .filter((st) => actionsOf(st).includes('states:StartExecution'));
    expect(start).toHaveLength(1);
    t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: s.getLogicalId(fn.fn.node.defaultChild as CfnElement) },
      MaximumEventAgeInSeconds: 60,
      MaximumRetryAttempts: 0,
    });
  });

  it('SEC-02: the dispatcher may invoke only its step function and functions named with the worker prefix', () => {
    const d = stack.host.delivery;
    const statements = statementsOf(d.stateMachine.role);
    const invoke = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('lambda:')));
    expect(invoke.flatMap(actionsOf)).toEqual(['lambda:InvokeFunction', 'lambda:InvokeFunction']);
    expect(invoke.flatMap(resourcesOf)).toEqual([
      arnOf(d.stepFunction.fn),
      {
        'Fn::Join': [
          '',
          [
            'arn:',
            { Ref: 'AWS::Partition' },
            ':lambda:',
            { Ref: 'AWS::Region' },
            ':',
            { Ref: 'AWS::AccountId' },
            ':function:takoform-host_wkr-*',
          ],
        ],
      },
    ]);
    // Its worker functions carry that prefix.
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: Match.stringLikeRegexp('^takoform-host_wkr-[0-9a-f]{16}$'),
    });
    expect(worker.functionName.startsWith(d.workerFunctionNamePrefix)).toBe(true);
  });

  it('SEC-02: the supervisor, step function, batch host, executor and API may only start executions of their own two dispatchers; the API may invoke only the executor', () => {
    const d = stack.host.delivery;
    const dispatcherArns = [
      Stack.of(d).resolve(d.dispatcherArn),
      Stack.of(d).resolve(d.expressDispatcherArn),
    ];
    for (const role of [
      d.supervisorFunction.role,
      d.stepFunction.role,
      d.batchHostFunction.role,
      d.executorFunction.role,
      stack.api.handler.role,
    ]) {
      const states = statementsOf(role).filter((s) => actionsOf(s).some((a) => a.startsWith('states:')));
      expect(states.flatMap(actionsOf)).toEqual(['states:StartExecution']);
      expect(states.flatMap(resourcesOf)).toEqual(dispatcherArns);
    }
    const reads = statementsOf(d.supervisorFunction.role).filter((s) =>
      actionsOf(s).includes('cloudwatch:GetMetricData'),
    );
    expect(reads.flatMap(actionsOf)).toEqual(['cloudwatch:GetMetricData']);
    for (const role of [d.stepFunction.role, d.batchHostFunction.role, d.executorFunction.role]) {
      expect(statementsOf(role).filter((s) => actionsOf(s).some((a) => /^lambda:/.test(a)))).toEqual([]);
    }
  });

  it('worker: bundles the fixed entry with its module aliased, and carries its config and the batch host', () => {
    const props = template.findResources('AWS::Lambda::Function')[id(worker.function.fn)]?.Properties;
    expect(props.Environment.Variables).toEqual({
      NODE_OPTIONS: '--enable-source-maps',
      TAKOFORM_BATCH_HOST_FUNCTION: arnOf(stack.host.delivery.batchHostFunction.fn),
      TAKOFORM_IDLE_WAIT_SECONDS: '20',
      TAKOFORM_WORKER_CONFIG: JSON.stringify({
        vars: { GREETING: 'hi' },
        queueProducers: { OUT: { queue: 'out-q' } },
      }),
    });
    // The Lambda runs up to 15 minutes; each handler's default bound is 3 min, from its own start
    // (every consumer of it then fits an Express lane's window).
    expect(props.Timeout).toBe(900);
    expect(worker.timeout.toSeconds()).toBe(180);
    expect(worker.handlers).toEqual(['fetch', 'queue']);
  });

  it('worker: registers itself with a PutItem (create/update) and a DeleteItem (delete), allowed on its own item only', () => {
    const [registration] = Object.values(template.findResources('Custom::TakoformWorkerRegistration'));
    const create = JSON.parse(render(registration?.Properties.Create));
    expect(JSON.parse(render(registration?.Properties.Update))).toEqual(create);
    expect(create.service).toBe('DynamoDB');
    expect(create.action).toBe('putItem');
    expect(create.parameters.Item).toMatchObject({
      pk: { S: 'WORKER#team#orders' },
      sk: { S: '_' },
      functionArn: { S: `{{GetAtt:${id(worker.function.fn)}.Arn}}` },
      handlers: { L: [{ S: 'fetch' }, { S: 'queue' }] },
      varsJson: { S: '{"GREETING":"hi"}' },
      queueProducersJson: { S: '{"OUT":{"queue":"out-q"}}' },
      deploymentUid: { S: worker.deploymentUid },
      timeoutSeconds: { N: '180' },
    });
    const del = JSON.parse(render(registration?.Properties.Delete));
    expect(del.action).toBe('deleteItem');
    expect(del.parameters.Key).toEqual({ pk: { S: 'WORKER#team#orders' }, sk: { S: '_' } });

    const crPolicy =
      template.findResources('AWS::IAM::Policy')[
        id(worker.registration.node.findChild('CustomResourcePolicy'))
      ];
    expect(crPolicy?.Properties.PolicyDocument.Statement).toEqual([
      {
        Action: ['dynamodb:DeleteItem', 'dynamodb:PutItem'],
        Effect: 'Allow',
        Resource: arnOf(stack.host.table.table),
        // The provider's role is shared by the stack: no other item of the table (API keys).
        Condition: {
          'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['WORKER#team#orders'] },
          Null: { 'dynamodb:LeadingKeys': 'false' },
        },
      },
    ]);
  });

  it('DL-09: the registration records each handler’s bound; one above the Host’s workerTimeout is a synth error', () => {
    const itemOf = (st: Stack) => {
      const [r] = Object.values(Template.fromStack(st).findResources('Custom::TakoformWorkerRegistration'));
      return JSON.parse(render(r?.Properties.Create)).parameters.Item;
    };
    const aboveHost = Match.stringLikeRegexp("exceeds the Host's workerTimeout");
    // Defaults: 3 min under the Host's 13 min 30 s, no warning.
    expect(Annotations.fromStack(stack).findWarning('*', aboveHost)).toEqual([]);
    const short = build({}, { timeout: Duration.seconds(90) });
    expect(itemOf(short.stack).timeoutSeconds).toEqual({ N: '90' });
    expect((short.worker as ModuleWorkerFunction).timeout.toSeconds()).toBe(90);
    // The default follows a Host bound shorter than 3 min.
    const tight = build({ workerTimeout: Duration.minutes(2) });
    expect(itemOf(tight.stack).timeoutSeconds).toEqual({ N: '120' });
    const fnId = tight.stack.getLogicalId(
      (tight.worker as ModuleWorkerFunction).function.fn.node.defaultChild as CfnElement,
    );
    // The function's own Lambda timeout is always 15 minutes (see the bound test below).
    expect(
      Template.fromStack(tight.stack).findResources('AWS::Lambda::Function')[fnId]?.Properties.Timeout,
    ).toBe(900);
    expect(Annotations.fromStack(tight.stack).findWarning('*', aboveHost)).toEqual([]);
    // An explicit timeout above the Host's bound could never be used: refused, naming both.
    expect(() => build({ workerTimeout: Duration.minutes(10) }, { timeout: Duration.minutes(12) })).toThrow(
      /timeout 720 s exceeds the Host's workerTimeout of 600 s/,
    );
    // Above 13 min 30 s no batch would fit one Lambda invocation beside its gathering.
    expect(() => build({}, { timeout: Duration.minutes(14) })).toThrow(/timeout must be 30 s\.\.13 min 30 s/);
    // Up to the Host's bound is the worker's own.
    const atBound = build({ workerTimeout: Duration.minutes(10) }, { timeout: Duration.minutes(10) });
    expect(itemOf(atBound.stack).timeoutSeconds).toEqual({ N: '600' });
  });

  it('DL-01 DL-09: a handler gets its whole bound from its own start: the Lambda timeout leaves room for the longest gathering and registration', () => {
    const lambdaTimeoutOf = (st: Stack, w: ModuleWorkerFunction) =>
      Template.fromStack(st).findResources('AWS::Lambda::Function')[
        st.getLogicalId(w.function.fn.node.defaultChild as CfnElement)
      ]?.Properties.Timeout as number;
    // Idle wait (20 s) + batch timeout (60 s) + registration (5 s) + the runtime's margin (5 s).
    const longestBeforeHandler = 20 + 60 + 5 + 5;
    for (const timeout of [undefined, Duration.seconds(30), Duration.minutes(3), Duration.seconds(810)]) {
      const built = build({}, timeout ? { timeout } : {});
      const w = built.worker as ModuleWorkerFunction;
      expect(lambdaTimeoutOf(built.stack, w)).toBeGreaterThanOrEqual(
        w.timeout.toSeconds() + longestBeforeHandler,
      );
    }
  });

  it('worker: the deployment uid follows the configuration and is stable otherwise', () => {
    const again = build().worker as ModuleWorkerFunction;
    expect(again.deploymentUid).toBe(worker.deploymentUid);
    const changed = build({}, { vars: { GREETING: 'hello' } }).worker as ModuleWorkerFunction;
    expect(changed.deploymentUid).not.toBe(worker.deploymentUid);
  });

  it('OPS-04: a dashboard with per-queue SEARCH graphs over the queue prefix', () => {
    const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard'));
    const body = JSON.parse(render(dashboard?.Properties.DashboardBody));
    const expressions = (body.widgets as { properties: { metrics?: unknown[][] } }[])
      .flatMap((w) => w.properties.metrics ?? [])
      .flatMap((m) =>
        m.filter(
          (x): x is { expression: string } => typeof (x as { expression?: unknown }).expression === 'string',
        ),
      )
      .map((x) => x.expression);
    for (const metric of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage']) {
      expect(expressions).toContain(
        `SEARCH('{AWS/SQS,QueueName} MetricName="${metric}" QueueName=takoform-host_r', 'Maximum', 300)`,
      );
    }
  });

  it('OPS-04: alarms for dead-letter depth, oldest age, handler failures, Host errors, dispatcher failures, stuck Operations and API 5xx', () => {
    const custom = (name: string, service: string) =>
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'Takoform',
        MetricName: name,
        Dimensions: [
          { Name: 'host', Value: 'takoform-host' },
          { Name: 'service', Value: service },
        ],
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
    custom(HOST_METRICS.deadLetterMessages, 'takoform-supervisor');
    custom(HOST_METRICS.oldestMessageAgeSeconds, 'takoform-supervisor');
    custom(HOST_METRICS.workerBatchFailures, 'takoform-batch-host');
    custom(HOST_METRICS.operationsStuckReconciling, 'takoform-executor');
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Threshold: 900,
      MetricName: HOST_METRICS.oldestMessageAgeSeconds,
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/ApiGateway',
      MetricName: '5XXError',
      Statistic: 'Sum',
    });
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    const math = (needle: string) =>
      alarms.find((a) => JSON.stringify(a.Properties.Metrics ?? []).includes(needle))?.Properties.Metrics;
    const hostErrors = math('SUM([');
    expect(hostErrors.filter((m: { MetricStat?: unknown }) => m.MetricStat).length).toBe(5);
    expect(JSON.stringify(hostErrors)).toContain('"MetricName":"Errors"');
    // Both dispatchers' executions, Standard (…0) and Express (…1), in one alarm.
    const dispatcher = math('failed0 + timedOut0 + aborted0 + failed1 + timedOut1 + aborted1');
    expect(JSON.stringify(dispatcher)).toContain('ExecutionsFailed');
    expect(JSON.stringify(dispatcher)).toContain('ExecutionsTimedOut');
    for (const machine of [stack.host.delivery.stateMachine, stack.host.delivery.expressStateMachine]) {
      expect(JSON.stringify(dispatcher)).toContain(id(machine));
    }
    expect(alarms).toHaveLength(7);
    for (const a of alarms) expect(a.Properties.AlarmActions).toBeUndefined();
  });

  it('OPS-01 OPS-04: TakoformHost embeds in any stack; an alarm topic receives every alarm and OK notification', () => {
    const app = new App({ context: NO_BUNDLING });
    const team = new Stack(app, 'Team');
    const topic = new Topic(team, 'Alarms');
    new TakoformHost(team, 'Host', { alarmTopic: topic, queueNamePrefix: 'team-host' });
    const t = Template.fromStack(team);
    const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms).toHaveLength(7);
    const topicRef = { Ref: team.getLogicalId(topic.node.defaultChild as CfnElement) };
    for (const a of alarms) {
      expect(a.Properties.AlarmActions).toEqual([topicRef]);
      expect(a.Properties.OKActions).toEqual([topicRef]);
    }
    t.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TAKOFORM_QUEUE_PREFIX: 'team-host_' }) },
    });
  });
});

describe('TakoformHost props', () => {
  it('collects every validation error before throwing', () => {
    let message = '';
    try {
      build(
        {
          queueNamePrefix: 'Bad_Prefix',
          domainName: 'api.example.com',
          throttling: { rateLimit: -1, burstLimit: 1.5 },
          workerTimeout: Duration.minutes(20),
          idleWaitSeconds: 30,
        },
        false,
      );
    } catch (err) {
      message = (err as Error).message;
    }
    for (const part of [
      'queueNamePrefix',
      'domainName and certificate',
      'rateLimit',
      'burstLimit',
      'workerTimeout',
      'idleWaitSeconds',
    ]) {
      expect(message).toContain(part);
    }
  });

  it('a custom domain is mapped at the root and becomes the public origin and ApiUrl', () => {
    const app = new App({ context: NO_BUNDLING });
    const stack = new TakoformHostStack(app, 'TakoformHost', {
      domainName: 'api.example.com',
      certificateArn: 'arn:aws:acm:us-east-1:111111111111:certificate/abc',
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::ApiGateway::DomainName', {
      DomainName: 'api.example.com',
      RegionalCertificateArn: 'arn:aws:acm:us-east-1:111111111111:certificate/abc',
      EndpointConfiguration: { Types: ['REGIONAL'] },
      SecurityPolicy: 'TLS_1_2',
    });
    const [mapping] = Object.values(template.findResources('AWS::ApiGateway::BasePathMapping'));
    expect(mapping?.Properties.BasePath).toBeUndefined(); // the root
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TAKOFORM_PUBLIC_ORIGIN: 'https://api.example.com' }) },
    });
    template.hasOutput('ApiUrl', { Value: Match.stringLikeRegexp('^https://') });
  });

  it('refuses a public origin that disagrees with the custom domain', () => {
    expect(() =>
      build(
        {
          domainName: 'api.example.com',
          certificateArn: 'arn:aws:acm:us-east-1:111111111111:certificate/abc',
          publicOrigin: 'https://other.example.com',
        },
        false,
      ),
    ).toThrow(/does not match domainName/);
  });
});

describe('ModuleWorkerFunction props', () => {
  it('collects every validation error before throwing', () => {
    let message = '';
    try {
      build(
        {},
        {
          space: 'bad space',
          entry: '/no/such/module.mjs',
          vars: { OUT: 1 },
          queueProducers: { OUT: { queue: 'out-q' }, 'bad-name': { queue: 'x' } },
          timeout: Duration.minutes(16),
        },
      );
    } catch (err) {
      message = (err as Error).message;
    }
    for (const part of [
      'space',
      'does not exist',
      'both a var and a producer binding',
      'not a binding name',
      'timeout',
    ]) {
      expect(message).toContain(part);
    }
  });

  it('refuses a second worker with the same (space, name) in one stack', () => {
    const { stack } = build();
    expect(
      () =>
        new ModuleWorkerFunction(stack, 'Again', {
          host: stack.host.workerBinding,
          entry: WORKER,
          space: 'team',
          name: 'orders',
          handlers: ['queue'],
        }),
    ).toThrow(/team\/orders already has a ModuleWorkerFunction/);
  });

  it('reads declared handlers from the module: own data properties only', () => {
    expect(introspectHandlers(WORKER)).toEqual(['fetch', 'queue']);
  });
});

describe('OPS-02: cdk-nag AwsSolutions with a worker', () => {
  it('OPS-02 SEC-02: a producer role granted with grantProduce has no unacknowledged finding', () => {
    const { app, outdir, stack } = build({}, false, true);
    stack.host.grantProduce(new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() }));
    expect(() => app.synth()).not.toThrow();
    expect(JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')).pluginReports).toEqual(
      [],
    );
  });

  it('OPS-02: the stack with a ModuleWorkerFunction has no unacknowledged finding, and its acknowledgements are narrow', () => {
    const { app, outdir, stack } = build({}, {}, true);
    expect(() => app.synth()).not.toThrow();
    expect(JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')).pluginReports).toEqual(
      [],
    );
    const found: string[] = [];
    const visit = (c: IConstruct) => {
      for (const entry of c.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [rule, reason] of Object.entries(entry.data as Record<string, string>)) {
          expect(reason.length).toBeGreaterThan(20);
          if (c.node.path.includes('Orders') || c.node.path.includes('AWS679f53')) {
            found.push(`${c.node.path.replace('TakoformHost/', '')} ${rule.replace(/^Annotation::/, '')}`);
          }
        }
      }
      for (const child of c.node.children) visit(child);
    };
    visit(stack);
    expect(found.sort()).toEqual(
      [
        'AWS679f53fac002430cb0da5b7982bd2287/ServiceRole AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        'Orders/Worker/Role AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:takoform-host_*]',
        'Orders/Worker/TracingPolicy AwsSolutions-IAM5[Resource::*]',
      ].sort(),
    );
  });
});
