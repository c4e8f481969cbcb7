import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import {
  deriveQueueNamePrefix,
  TakoformHostStack,
  type TakoformHostStackProps,
} from '../../lib/host-stack.ts';

// The feature flags `cdk synth` uses, so the tests see the same template.
const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
// Template-only tests skip esbuild; one test below bundles for real.
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };

function buildStack(props: TakoformHostStackProps = {}, context: Record<string, unknown> = NO_BUNDLING) {
  const app = new App({ context });
  const stack = new TakoformHostStack(app, 'TakoformHost', props);
  return { app, stack, template: Template.fromStack(stack) };
}

const tempDirs: string[] = [];
function tempOutdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'takoform-cdk-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe('TakoformHostStack template', () => {
  let stack: TakoformHostStack;
  let template: Template;
  let tableId: string;

  beforeAll(() => {
    ({ stack, template } = buildStack());
    tableId = stack.getLogicalId(stack.table.table.node.defaultChild as CfnElement);
  });

  it('OPS-01: synthesizes offline with API Gateway, Lambda, DynamoDB and the Step Functions dispatcher', () => {
    template.resourceCountIs('AWS::ApiGateway::RestApi', 1);
    // API, dispatcher step, batch host, executor, supervisor; workers come with ModuleWorkerFunction.
    template.resourceCountIs('AWS::Lambda::Function', 5);
    template.resourceCountIs('AWS::DynamoDB::GlobalTable', 1);
    // The dispatcher, Standard and Express (lanes that fit its five-minute window).
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 2);
  });

  it('table: pk/sk keys, on-demand, PITR, deletion protection, TTL and both GSIs', () => {
    const gsi = (name: string) => ({
      IndexName: name,
      KeySchema: [
        { AttributeName: `${name}pk`, KeyType: 'HASH' },
        { AttributeName: `${name}sk`, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    });
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      GlobalSecondaryIndexes: [gsi('gsi1'), gsi('gsi2')],
      Replicas: [
        Match.objectLike({
          DeletionProtectionEnabled: true,
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        }),
      ],
    });
    template.hasResource('AWS::DynamoDB::GlobalTable', { DeletionPolicy: 'Retain' });
  });

  it('function: Node 24 on arm64, traced, with the table name and source maps in its env', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      MemorySize: 512,
      Timeout: 29,
      TracingConfig: { Mode: 'Active' },
      LoggingConfig: { LogGroup: Match.anyValue() },
      Environment: {
        Variables: Match.objectLike({
          TAKOFORM_TABLE: { Ref: tableId },
          NODE_OPTIONS: '--enable-source-maps',
          TAKOFORM_PUBLIC_ORIGIN: Match.anyValue(),
        }),
      },
    });
  });

  it('log groups keep one month of logs', () => {
    // API access logs, five function log groups, the dispatcher's execution log.
    template.resourceCountIs('AWS::Logs::LogGroup', 7);
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('REST API: root ANY plus a greedy {proxy+} ANY, both Lambda proxy integrations', () => {
    template.hasResourceProperties('AWS::ApiGateway::Resource', { PathPart: '{proxy+}' });
    template.resourcePropertiesCountIs(
      'AWS::ApiGateway::Method',
      { HttpMethod: 'ANY', Integration: Match.objectLike({ Type: 'AWS_PROXY' }) },
      2,
    );
    template.resourceCountIs('AWS::ApiGateway::Method', 2);
  });

  it('stage: access logging, error-only execution logging, throttling and tracing', () => {
    template.hasResourceProperties('AWS::ApiGateway::Stage', {
      AccessLogSetting: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('requestId') },
      TracingEnabled: true,
      MethodSettings: [
        Match.objectLike({
          HttpMethod: '*',
          ResourcePath: '/*',
          LoggingLevel: 'ERROR',
          DataTraceEnabled: false,
          ThrottlingBurstLimit: 200,
          ThrottlingRateLimit: 100,
        }),
      ],
    });
  });

  it('SEC-02: the API function may touch only its table, indexes, log group, Host queues, the executor, StartExecution on its dispatcher and metric reads', () => {
    const fnRoleRef = { Ref: stack.getLogicalId(stack.api.handler.role.node.defaultChild as CfnElement) };
    const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
      JSON.stringify(p.Properties.Roles).includes(JSON.stringify(fnRoleRef)),
    );
    const statements = policies.flatMap((p) => p.Properties.PolicyDocument.Statement);
    const tableArn = { 'Fn::GetAtt': [tableId, 'Arn'] };
    const indexArn = { 'Fn::Join': ['', [tableArn, '/index/*']] };

    // Statements may or may not be merged (the minimizePolicies flag), so check them as a set.
    const dynamo = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('dynamodb:')));
    expect(dynamo.length).toBeGreaterThan(0);
    const resources = dynamo.flatMap((s) => [s.Resource].flat());
    expect(resources).toContainEqual(tableArn);
    expect(resources).toContainEqual(indexArn);
    for (const r of resources) expect([tableArn, indexArn]).toContainEqual(r);

    const logsArn = {
      'Fn::GetAtt': [stack.getLogicalId(stack.api.handler.logGroup.node.defaultChild as CfnElement), 'Arn'],
    };
    const logs = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('logs:')));
    expect(logs.flatMap((s) => [s.Resource].flat())).toEqual([logsArn]);

    // The only "*" resources are X-Ray's two actions and reading metrics (the oldest message age
    // of the operator's queue stats): none of them can be scoped.
    const wildcard = statements.filter((s) => [s.Resource].flat().includes('*'));
    expect(wildcard.flatMap((s) => s.Action).sort()).toEqual([
      'cloudwatch:GetMetricData',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
    expect(statements.flatMap((s) => [s.Action].flat()).filter((a: string) => a.includes('*'))).toEqual([]);

    // SQS: only what the producer extension and the operator endpoints call, only on the Host's
    // queue prefix.
    const sqs = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('sqs:')));
    expect(sqs.flatMap((s) => [s.Action].flat()).sort()).toEqual([
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:GetQueueUrl',
      'sqs:PurgeQueue',
      'sqs:ReceiveMessage',
      'sqs:SendMessage',
    ]);
    expect(sqs.flatMap((s) => [s.Resource].flat())).toEqual([
      {
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
      },
    ]);
    // Lambda: the asynchronous trigger of the executor, unqualified, and nothing else.
    const executorArn = {
      'Fn::GetAtt': [
        stack.getLogicalId(stack.host.delivery.executorFunction.fn.node.defaultChild as CfnElement),
        'Arn',
      ],
    };
    const invoke = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('lambda:')));
    expect(invoke.map((s) => [s.Action, s.Resource])).toEqual([['lambda:InvokeFunction', executorArn]]);
    // Step Functions: starting a lane of its own dispatchers (wake on send), nothing else.
    const lanes = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith('states:')));
    expect(lanes.map((s) => [s.Action, s.Resource])).toEqual([
      [
        'states:StartExecution',
        [
          stack.resolve(stack.host.delivery.dispatcherArn),
          stack.resolve(stack.host.delivery.expressDispatcherArn),
        ],
      ],
    ]);
    // Nothing else: every statement is one of the above.
    const known = new Set([...dynamo, ...logs, ...wildcard, ...sqs, ...invoke, ...lanes]);
    expect(statements.filter((s) => !known.has(s))).toEqual([]);

    // No AWS-managed policies on the function role.
    const role = template.findResources('AWS::IAM::Role')[fnRoleRef.Ref];
    expect(role?.Properties.ManagedPolicyArns).toBeUndefined();
  });

  it('outputs ApiUrl, TableName, StateMachineArn, ExpressStateMachineArn and DashboardName', () => {
    template.hasOutput('ApiUrl', { Value: Match.anyValue() });
    template.hasOutput('TableName', { Value: { Ref: tableId } });
    const machineId = stack.getLogicalId(stack.host.delivery.stateMachine.node.defaultChild as CfnElement);
    template.hasOutput('StateMachineArn', { Value: { Ref: machineId } });
    const expressId = stack.getLogicalId(
      stack.host.delivery.expressStateMachine.node.defaultChild as CfnElement,
    );
    template.hasOutput('ExpressStateMachineArn', { Value: { Ref: expressId } });
    template.hasOutput('DashboardName', { Value: Match.anyValue() });
  });
});

describe('TakoformHostStack props', () => {
  it('derives a queue name prefix from the stack name', () => {
    expect(deriveQueueNamePrefix('TakoformHost')).toBe('takoform-host');
    expect(deriveQueueNamePrefix('Prod_Host.EU2')).toBe('prod-host-eu2');
    const long = deriveQueueNamePrefix(`A${'b'.repeat(38)}-Cdef`);
    expect(long).toMatch(/^[a-z0-9-]{1,40}$/);
    expect(long.endsWith('-')).toBe(false);
    expect(buildStack().stack.queueNamePrefix).toBe('takoform-host');
  });

  it('rejects an invalid explicit queue name prefix', () => {
    expect(() => buildStack({ queueNamePrefix: 'Has_Upper' })).toThrow(/queueNamePrefix/);
    expect(() => buildStack({ queueNamePrefix: 'x'.repeat(41) })).toThrow(/queueNamePrefix/);
  });

  it('passes a valid public origin to the function and rejects a malformed one at synth', () => {
    const { template } = buildStack({ publicOrigin: 'https://host.example.com' });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TAKOFORM_PUBLIC_ORIGIN: 'https://host.example.com' }) },
    });
    expect(() => buildStack({ publicOrigin: 'https://host.example.com/prod' })).toThrow(/public origin/);
  });

  it('removalPolicy DESTROY lifts deletion protection and retention', () => {
    const { template } = buildStack({ removalPolicy: RemovalPolicy.DESTROY });
    template.hasResource('AWS::DynamoDB::GlobalTable', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({ Replicas: [Match.objectLike({ DeletionProtectionEnabled: false })] }),
    });
  });
});

describe('OPS-01: bundling', () => {
  let stack: TakoformHostStack;
  let worker: ModuleWorkerFunction;
  let assemblyDir: string;
  let functions: Record<string, { Properties?: { Code?: { S3Key?: unknown } } }>;

  beforeAll(() => {
    const outdir = tempOutdir();
    const app = new App({ outdir, context: CDK_CONTEXT });
    stack = new TakoformHostStack(app, 'TakoformHost');
    worker = new ModuleWorkerFunction(stack, 'Orders', {
      host: stack.host.workerBinding,
      entry: fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url)),
      space: 'team',
      name: 'orders',
    });
    assemblyDir = app.synth().directory;
    functions = Template.fromStack(stack).findResources('AWS::Lambda::Function') as typeof functions;
  });

  const assetDirOf = (logicalId: string) =>
    join(assemblyDir, `asset.${String(functions[logicalId]?.Properties?.Code?.S3Key).replace(/\.zip$/, '')}`);
  const bundleOf = (fn: IConstruct) =>
    join(assetDirOf(stack.getLogicalId(fn.node.defaultChild as CfnElement)), 'index.mjs');

  it('bundles the Host functions and a worker (module aliased into the fixed entry) with the local esbuild (no Docker)', () => {
    const api = bundleOf(stack.api.handler.fn);
    expect(existsSync(api)).toBe(true);
    expect(existsSync(`${api}.map`)).toBe(true);
    expect(readFileSync(api, 'utf8')).toMatch(/^import \{ createRequire as __takoformCreateRequire \}/);
    // The console's files sit beside the API bundle, where console-routes.ts looks for them.
    for (const file of ['index.html', 'app.js', 'console.css']) {
      const source = fileURLToPath(new URL(`../../lambdas/console/assets/${file}`, import.meta.url));
      expect(readFileSync(join(dirname(api), 'console', file), 'utf8')).toBe(readFileSync(source, 'utf8'));
    }
    // The worker bundle holds the user's module (its Response('ok')) and the runtime adapter.
    const code = readFileSync(bundleOf(worker.function.fn), 'utf8');
    expect(code).toContain('takoform.queue-batch.v1');
    expect(code).toMatch(/new Response\("ok"\)/);
  });

  it('SEC-01: no bundle of a deployed function carries the fault seams (TAKOFORM_FAULTS, TAKOFORM_CRASH_AT)', async () => {
    const seams = ['TAKOFORM_FAULTS', 'TAKOFORM_CRASH_AT', 'takoformFaultAttempt', 'withLambdaInvokeFaults'];
    const found = (text: string) => seams.filter((s) => text.includes(s));
    // The check can fail: the local Host's own fault modules, bundled the same way, are caught.
    const local = await build({
      entryPoints: [fileURLToPath(new URL('../../lambdas/local/faults/faulty-clients.ts', import.meta.url))],
      bundle: true,
      minify: true,
      platform: 'node',
      format: 'esm',
      write: false,
      external: ['@aws-sdk/*'],
    });
    expect(found(local.outputFiles.map((f) => f.text).join(''))).toEqual(
      expect.arrayContaining(['TAKOFORM_FAULTS', 'takoformFaultAttempt']),
    );
    const hostFunctions = [
      stack.api.handler.fn,
      ...stack.host.node.findAll().filter((c) => c instanceof NodejsFunction && c !== stack.api.handler.fn),
      worker.function.fn,
    ];
    const bundles = [...new Set(hostFunctions.map((fn) => dirname(bundleOf(fn))))];
    // API, dispatcher step, batch host, executor, supervisor, and the worker.
    expect(bundles.length).toBeGreaterThanOrEqual(6);
    for (const dir of bundles) {
      for (const file of readdirSync(dir).filter((f) => /\.(m?js|map)$/.test(f))) {
        expect({ file: join(dir, file), seams: found(readFileSync(join(dir, file), 'utf8')) }).toEqual({
          file: join(dir, file),
          seams: [],
        });
      }
    }
  });
});

describe('OPS-02: cdk-nag AwsSolutions', () => {
  function synthWithNag(extra?: (stack: TakoformHostStack) => void) {
    const outdir = tempOutdir();
    const app = new App({ outdir, context: NO_BUNDLING });
    const stack = new TakoformHostStack(app, 'TakoformHost');
    extra?.(stack);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const report = () => JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8'));
    return { app, stack, report };
  }

  it('OPS-02: the stack synthesizes with no unacknowledged findings', () => {
    const { app, report } = synthWithNag();
    expect(() => app.synth()).not.toThrow();
    expect(report().pluginReports).toEqual([]);
  });

  it('OPS-02: the checks do run (an unscoped wildcard grant fails synthesis)', () => {
    const { app, report } = synthWithNag((stack) =>
      stack.api.handler.role.addToPrincipalPolicy(
        new iam.PolicyStatement({ actions: ['sqs:SendMessage'], resources: ['*'] }),
      ),
    );
    expect(() => app.synth()).toThrow(/AwsSolutions-IAM5\[Resource::\*\]/);
    const violations = report().pluginReports.flatMap(
      (r: { violations: { ruleName: string }[] }) => r.violations,
    );
    expect(violations.map((v: { ruleName: string }) => v.ruleName)).toEqual([
      'AwsSolutions-IAM5[Resource::*]',
    ]);
  });

  it('OPS-02: every acknowledgement is narrow and deliberate (inventory)', () => {
    const { stack } = synthWithNag();
    const found: string[] = [];
    const visit = (c: IConstruct) => {
      for (const entry of c.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
          expect(reason.length).toBeGreaterThan(20);
          found.push(`${c.node.path.replace('TakoformHost/', '')} ${id.replace(/^Annotation::/, '')}`);
        }
      }
      for (const child of c.node.children) visit(child);
    };
    visit(stack);
    const tableId = stack.getLogicalId(stack.table.table.node.defaultChild as CfnElement);
    const table = `<${tableId}.Arn>/index/*`;
    const queues = 'arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:takoform-host_*';
    const hostFunction = (path: string) => [
      `${path}/Role AwsSolutions-IAM5[Resource::${table}]`,
      `${path}/Role AwsSolutions-IAM5[Resource::${queues}]`,
      `${path}/TracingPolicy AwsSolutions-IAM5[Resource::*]`,
    ];
    expect(found.sort()).toEqual(
      [
        'Host/Api/Api/Resource AwsSolutions-APIG2',
        'Host/Api/Api/Default/ANY AwsSolutions-APIG4',
        'Host/Api/Api/Default/ANY AwsSolutions-COG4',
        'Host/Api/Api/Default/{proxy+}/ANY AwsSolutions-APIG4',
        'Host/Api/Api/Default/{proxy+}/ANY AwsSolutions-COG4',
        'Host/Api/Api/CloudWatchRole AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
        ...hostFunction('Host/Api/Handler'),
        ...hostFunction('Host/Delivery/StepFunction'),
        ...hostFunction('Host/Delivery/BatchHostFunction'),
        ...hostFunction('Host/Delivery/ExecutorFunction'),
        ...hostFunction('Host/Delivery/SupervisorFunction'),
        'Host/Delivery/SupervisorMetricsRead AwsSolutions-IAM5[Resource::*]',
        'Host/Delivery/ApiMetricsRead AwsSolutions-IAM5[Resource::*]',
        'Host/Delivery/Dispatcher AwsSolutions-SF1',
        'Host/Delivery/Dispatcher/Role AwsSolutions-IAM5[Resource::*]',
        'Host/Delivery/Dispatcher/Role AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:takoform-host_wkr-*]',
        'Host/Delivery/DispatcherExpress AwsSolutions-SF1',
        'Host/Delivery/DispatcherExpress/Role AwsSolutions-IAM5[Resource::*]',
        'Host/Delivery/DispatcherExpress/Role AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:takoform-host_wkr-*]',
      ].sort(),
    );
  });
});
