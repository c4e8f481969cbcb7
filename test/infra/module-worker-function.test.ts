/**
 * ModuleWorkerFunction's options for a platform team's account (issue 15, Deliver 4): where the
 * entry is found, environment, layers, VPC placement and secrets by reference — template
 * assertions, cdk-nag, and the secret grant under the IAM policy simulator (least privilege).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AWS_ENV } from '../../lambdas/shared/aws-env.ts';
import {
  ModuleWorkerFunction,
  type ModuleWorkerFunctionProps,
  resolveEntry,
} from '../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack } from '../../lib/host-stack.ts';
import { ACCOUNT, REGION, SynthesizedPolicies } from '../support/iam-simulation.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));
const SECRET_ARN = `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:orders-db-AbCdEf`;
const OTHER_SECRET_ARN = `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:billing-db-GhIjKl`;
const PARAMETER = '/orders/api-key';
const LAYER_ARN = `arn:aws:lambda:${REGION}:${ACCOUNT}:layer:otel:3`;

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function hostStack(withNag = false) {
  const outdir = mkdtempSync(join(tmpdir(), 'takoform-mwf-'));
  tempDirs.push(outdir);
  const app = new App({ outdir, context: NO_BUNDLING });
  const stack = new TakoformHostStack(app, 'TakoformHost', { env: { account: ACCOUNT, region: REGION } });
  if (withNag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack, outdir };
}

type WorkerOptions = Partial<ModuleWorkerFunctionProps>;
const worker = (stack: TakoformHostStack, id: string, options: WorkerOptions = {}) =>
  new ModuleWorkerFunction(stack, id, {
    host: stack.host.workerBinding,
    entry: WORKER,
    space: 'team',
    name: id.toLowerCase(),
    handlers: ['queue'],
    ...options,
  });

const errorOf = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return '';
};

describe('ModuleWorkerFunction: entry', () => {
  it('resolves a file: URL, an absolute path, and a relative path against a directory or a module URL', () => {
    const dir = dirname(WORKER);
    expect(resolveEntry(new URL('./fixtures/worker.mjs', import.meta.url))).toBe(WORKER);
    expect(resolveEntry(WORKER)).toBe(WORKER);
    expect(resolveEntry('fixtures/worker.mjs', import.meta.url)).toBe(WORKER);
    expect(resolveEntry('./worker.mjs', dir)).toBe(WORKER);
    expect(resolveEntry('worker.mjs')).toBeUndefined();
  });

  it('never resolves against the working directory: a relative entry without a base and a missing file are synth errors', () => {
    const { stack } = hostStack();
    expect(errorOf(() => worker(stack, 'Relative', { entry: 'test/infra/fixtures/worker.mjs' }))).toMatch(
      /entry test\/infra\/fixtures\/worker\.mjs is relative: give an absolute path, a file: URL/,
    );
    expect(
      errorOf(() => worker(stack, 'Missing', { entry: 'nope.mjs', entryBase: import.meta.url })),
    ).toContain(`entry ${join(dirname(WORKER), '..', 'nope.mjs')} does not exist`);
    const fromUrl = worker(stack, 'FromUrl', { entry: new URL('./fixtures/worker.mjs', import.meta.url) });
    expect(fromUrl.function.fn).toBeDefined();
  });
});

describe('ModuleWorkerFunction: environment, layers, VPC', () => {
  let stack: TakoformHostStack;
  let template: Template;
  let placed: ModuleWorkerFunction;
  const id = (c: IConstruct) => stack.getLogicalId((c.node.defaultChild ?? c) as CfnElement);

  beforeAll(() => {
    ({ stack } = hostStack());
    const vpc = new ec2.Vpc(stack, 'Vpc', { maxAzs: 2, natGateways: 1 });
    const sg = new ec2.SecurityGroup(stack, 'WorkerSg', { vpc, allowAllOutbound: true });
    placed = worker(stack, 'Placed', {
      environment: {
        OTEL_SERVICE_NAME: 'orders',
        NODE_OPTIONS: '--enable-source-maps --max-old-space-size=400',
      },
      layers: [lambda.LayerVersion.fromLayerVersionArn(stack, 'Otel', LAYER_ARN)],
      vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      securityGroups: [sg],
    });
    template = Template.fromStack(stack);
  });

  it('passes environment and layers to the function, next to the runtime’s own variables', () => {
    const fn = template.findResources('AWS::Lambda::Function')[id(placed.function.fn)];
    const vars = fn?.Properties.Environment.Variables;
    expect(vars.OTEL_SERVICE_NAME).toBe('orders');
    expect(vars.NODE_OPTIONS).toBe('--enable-source-maps --max-old-space-size=400');
    expect(vars[AWS_ENV.batchHostFunction]).toBeDefined();
    expect(vars[AWS_ENV.workerConfig]).toBeDefined();
    expect(fn?.Properties.Layers).toEqual([LAYER_ARN]);
  });

  it('places the function in the VPC’s chosen subnets with the given security group; its role may manage ENIs, in a policy that exists before the function', () => {
    const fn = template.findResources('AWS::Lambda::Function')[id(placed.function.fn)];
    expect(fn?.Properties.VpcConfig.SecurityGroupIds).toEqual([
      { 'Fn::GetAtt': [id(stack.node.findChild('WorkerSg')), 'GroupId'] },
    ]);
    expect(fn?.Properties.VpcConfig.SubnetIds).toHaveLength(2);
    const eniPolicy = placed.function.node.findChild('NetworkInterfacePolicy');
    const policy = template.findResources('AWS::IAM::Policy')[id(eniPolicy)];
    expect(policy?.Properties.Roles).toEqual([{ Ref: id(placed.function.role) }]);
    expect(policy?.Properties.PolicyDocument.Statement[0].Action).toContain('ec2:CreateNetworkInterface');
    expect(fn?.DependsOn).toContain(id(eniPolicy));
    // A worker outside a VPC gets no such policy.
    const { stack: plainStack } = hostStack();
    expect(worker(plainStack, 'Plain').function.node.tryFindChild('NetworkInterfacePolicy')).toBeUndefined();
  });

  it('refuses reserved environment names, subnets without a VPC and more than 5 layers, all at once', () => {
    const { stack: s } = hostStack();
    const layer = lambda.LayerVersion.fromLayerVersionArn(s, 'L', LAYER_ARN);
    const message = errorOf(() =>
      worker(s, 'Bad', {
        environment: { TAKOFORM_WORKER_CONFIG: '{}', AWS_REGION: 'x', 'not-a-name': 'y' },
        vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
        layers: [layer, layer, layer, layer, layer, layer],
      }),
    );
    for (const part of [
      '"TAKOFORM_WORKER_CONFIG" is reserved',
      '"AWS_REGION" is reserved',
      '"not-a-name"',
      'need vpc',
      'at most 5',
    ]) {
      expect(message).toContain(part);
    }
  });
});

describe('ModuleWorkerFunction: secrets by reference (SEC-01, SEC-02)', () => {
  let stack: TakoformHostStack;
  let template: Template;
  let withSecrets: ModuleWorkerFunction;
  let without: ModuleWorkerFunction;
  let policies: SynthesizedPolicies;
  const id = (c: IConstruct) => stack.getLogicalId((c.node.defaultChild ?? c) as CfnElement);

  beforeAll(() => {
    ({ stack } = hostStack());
    withSecrets = worker(stack, 'Billing', {
      vars: { REGION_NAME: 'eu' },
      secrets: {
        DB_PASSWORD: secretsmanager.Secret.fromSecretCompleteArn(stack, 'DbSecret', SECRET_ARN),
        API_KEY: ssm.StringParameter.fromSecureStringParameterAttributes(stack, 'ApiKey', {
          parameterName: PARAMETER,
        }),
      },
    });
    without = worker(stack, 'Plain');
    template = Template.fromStack(stack);
    policies = new SynthesizedPolicies(stack, template, stack.host.table.table);
  });

  it('SEC-01: the function’s environment holds the references, never a value; the registration holds no secret', () => {
    const fn = template.findResources('AWS::Lambda::Function')[id(withSecrets.function.fn)];
    const config = JSON.parse(
      String(policies.resolve(fn?.Properties.Environment.Variables[AWS_ENV.workerConfig])),
    );
    expect(config.secrets).toEqual({
      DB_PASSWORD: { secretsManager: SECRET_ARN },
      API_KEY: { ssmParameter: PARAMETER },
    });
    const [registration] = Object.values(template.findResources('Custom::TakoformWorkerRegistration')).filter(
      (r) => JSON.stringify(r).includes('billing'),
    );
    expect(JSON.stringify(registration)).not.toMatch(/DB_PASSWORD|API_KEY|orders-db/);
    // A worker without secrets keeps its configuration as before (no `secrets` key).
    const plain = template.findResources('AWS::Lambda::Function')[id(without.function.fn)];
    expect(
      JSON.parse(String(policies.resolve(plain?.Properties.Environment.Variables[AWS_ENV.workerConfig]))),
    ).toEqual({
      vars: {},
      queueProducers: {},
    });
  });

  it('SEC-02: only that worker’s role may read its secret and parameter, and nothing else', async () => {
    const role = withSecrets.function.role;
    const parameterArn = `arn:aws:ssm:${REGION}:${ACCOUNT}:parameter${PARAMETER}`;
    expect(await policies.simulate(role, 'secretsmanager:GetSecretValue', SECRET_ARN)).toBe('Allowed');
    expect(await policies.simulate(role, 'ssm:GetParameter', parameterArn)).toBe('Allowed');
    expect(await policies.simulate(role, 'secretsmanager:GetSecretValue', OTHER_SECRET_ARN)).toBe(
      'ImplicitlyDenied',
    );
    expect(
      await policies.simulate(
        role,
        'ssm:GetParameter',
        `arn:aws:ssm:${REGION}:${ACCOUNT}:parameter/billing/key`,
      ),
    ).toBe('ImplicitlyDenied');
    expect(await policies.simulate(role, 'secretsmanager:PutSecretValue', SECRET_ARN)).toBe(
      'ImplicitlyDenied',
    );
    const other = without.function.role;
    expect(await policies.simulate(other, 'secretsmanager:GetSecretValue', SECRET_ARN)).toBe(
      'ImplicitlyDenied',
    );
    expect(await policies.simulate(other, 'ssm:GetParameter', parameterArn)).toBe('ImplicitlyDenied');
    // No other role of the stack names the secret or the parameter.
    const naming = Object.entries(template.findResources('AWS::IAM::Policy'))
      .filter(([, p]) => /orders-db|orders\/api-key/.test(JSON.stringify(policies.resolve(p))))
      .map(([, p]) => p.Properties.Roles);
    expect(naming).toEqual([[{ Ref: id(role) }]]);
  });

  it('refuses secret names outside the sensitive-var grammar and names taken by a var or a binding', () => {
    const { stack: s } = hostStack();
    const secret = secretsmanager.Secret.fromSecretCompleteArn(s, 'S', SECRET_ARN);
    const message = errorOf(() =>
      worker(s, 'Bad', {
        vars: { TOKEN: 'x' },
        queueProducers: { OUT: { queue: 'out-q' } },
        secrets: { lower: secret, TOKEN: secret, OUT: secret },
      }),
    );
    expect(message).toContain('secrets: "lower" does not match');
    expect(message).toContain('"TOKEN" is both a secret and a var or producer binding');
    expect(message).toContain('"OUT" is both a secret and a var or producer binding');
  });
});

describe('OPS-02: cdk-nag with every ModuleWorkerFunction option', () => {
  it('has no unacknowledged finding; the only new acknowledgement is the ENI policy’s', () => {
    const { app, stack, outdir } = hostStack(true);
    const vpc = new ec2.Vpc(stack, 'Vpc', {
      maxAzs: 2,
      natGateways: 1,
      flowLogs: { all: { trafficType: ec2.FlowLogTrafficType.REJECT } },
    });
    const w = worker(stack, 'Everything', {
      environment: { OTEL_SERVICE_NAME: 'orders' },
      layers: [lambda.LayerVersion.fromLayerVersionArn(stack, 'Otel', LAYER_ARN)],
      vpc,
      secrets: {
        DB_PASSWORD: new secretsmanager.Secret(stack, 'Db'),
        API_KEY: ssm.StringParameter.fromSecureStringParameterAttributes(stack, 'ApiKey', {
          parameterName: PARAMETER,
        }),
      },
    });
    // The example's own secret (not the construct's concern) rotates by hand.
    Validations.of(stack.node.findChild('Db')).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason: 'A test secret: its rotation is the owning team’s choice, not the worker construct’s.',
    });
    expect(() => app.synth()).not.toThrow();
    expect(JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')).pluginReports).toEqual(
      [],
    );
    const acknowledged = w.function.node
      .findChild('NetworkInterfacePolicy')
      .node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.keys(m.data as object));
    expect(acknowledged.map((r) => r.replace(/^Annotation::/, ''))).toEqual([
      'AwsSolutions-IAM5[Resource::*]',
    ]);
  });
});
