/**
 * What a platform team's account needs of the construct (OPS-01 embedding): the account-wide API
 * Gateway role left alone, the execute-api endpoint off, DNS records in its hosted zone, its WAF
 * web ACL on the stage, tracing off, function memory and reserved concurrency. Each prop is
 * validated at synth, and with all of them set cdk-nag stays clean (OPS-02).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, CfnWaitConditionHandle, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AccountRootPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { type IKey, Key } from 'aws-cdk-lib/aws-kms';
import { HostedZone, type IHostedZone } from 'aws-cdk-lib/aws-route53';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, describe, expect, it } from 'vitest';
import { HOST_RESERVED_CONCURRENCY, HOST_RESERVED_TOTAL } from '../../lambdas/shared/host-concurrency.ts';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack, type TakoformHostStackProps } from '../../lib/host-stack.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));
const DOMAIN = {
  domainName: 'api.example.com',
  certificateArn: 'arn:aws:acm:us-east-1:111111111111:certificate/abc',
};
const WEB_ACL =
  'arn:aws:wafv2:us-east-1:111111111111:regional/webacl/takoform/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b';

const outdirs: string[] = [];
afterAll(() => {
  for (const d of outdirs) rmSync(d, { recursive: true, force: true });
});

const TABLE_KEY = 'arn:aws:kms:us-east-1:111111111111:key/11111111-2222-3333-4444-555555555555';
const QUEUE_KEY = 'arn:aws:kms:us-east-1:111111111111:key/66666666-7777-8888-9999-000000000000';

/** What the platform brings: an imported hosted zone `example.com` and two imported KMS keys. */
interface Shared {
  zone: IHostedZone;
  tableKey: IKey;
  queueKey: IKey;
}

/** A Host stack; `props` gets the platform's zone and keys to use or not. */
function build(
  props: (shared: Shared) => TakoformHostStackProps = () => ({}),
  opts: { worker?: boolean; nag?: boolean; producer?: boolean } = {},
) {
  const outdir = mkdtempSync(join(tmpdir(), 'takoform-lz-'));
  outdirs.push(outdir);
  const app = new App({ outdir, context: NO_BUNDLING });
  // An imported zone is two literals, so it may come from another stack without a reference; a
  // no-op resource keeps that stack a valid template.
  const zones = new Stack(app, 'Zones');
  new CfnWaitConditionHandle(zones, 'Keep');
  const shared: Shared = {
    zone: HostedZone.fromHostedZoneAttributes(zones, 'Zone', {
      hostedZoneId: 'Z0123456789ABCDEFGHIJ',
      zoneName: 'example.com',
    }),
    tableKey: Key.fromKeyArn(zones, 'TableKey', TABLE_KEY),
    queueKey: Key.fromKeyArn(zones, 'QueueKey', QUEUE_KEY),
  };
  const stack = new TakoformHostStack(app, 'TakoformHost', props(shared));
  if (opts.producer) {
    stack.host.grantProduce(new Role(stack, 'Producer', { assumedBy: new AccountRootPrincipal() }));
  }
  if (opts.worker) {
    new ModuleWorkerFunction(stack, 'Orders', {
      host: stack.host.workerBinding,
      entry: WORKER,
      space: 'team',
      name: 'orders',
      handlers: ['queue'],
    });
  }
  if (opts.nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack, outdir, template: Template.fromStack(stack) };
}

/** Every prop of this file set at once. */
const ENV = { account: '111111111111', region: 'us-east-1' };

const ALL_PROPS = ({ zone, tableKey, queueKey }: Shared): TakoformHostStackProps => ({
  ...DOMAIN,
  env: ENV,
  cloudWatchRole: false,
  disableExecuteApiEndpoint: true,
  hostedZone: zone,
  tableEncryptionKey: tableKey,
  queueEncryptionKey: queueKey,
  queueTags: { 'cost-center': 'cc-42', owner: 'platform' },
  webAclArn: WEB_ACL,
  tracing: false,
  hostFunctions: {
    api: { memorySize: 1024, reservedConcurrentExecutions: 50 },
    executor: { reservedConcurrentExecutions: 2 },
    supervisor: { memorySize: 256, reservedConcurrentExecutions: 1 },
  },
});

const errorOf = (props: (shared: Shared) => TakoformHostStackProps) => {
  try {
    build(props);
  } catch (err) {
    return (err as Error).message;
  }
  return '';
};

describe('landing-zone props', () => {
  it('cloudWatchRole: by default the stack sets the account’s API Gateway role; false leaves it alone', () => {
    const byDefault = build().template;
    byDefault.resourceCountIs('AWS::ApiGateway::Account', 1);
    const off = build(() => ({ cloudWatchRole: false })).template;
    off.resourceCountIs('AWS::ApiGateway::Account', 0);
    expect(JSON.stringify(off.findResources('AWS::IAM::Role'))).not.toContain(
      'AmazonAPIGatewayPushToCloudWatchLogs',
    );
    // Execution logging stays on: it uses the role the account already has.
    off.hasResourceProperties('AWS::ApiGateway::Stage', {
      MethodSettings: [Match.objectLike({ LoggingLevel: 'ERROR' })],
    });
  });

  it('disableExecuteApiEndpoint: turns the execute-api endpoint off, and only with a custom domain', () => {
    build(() => ({ ...DOMAIN, disableExecuteApiEndpoint: true })).template.hasResourceProperties(
      'AWS::ApiGateway::RestApi',
      { DisableExecuteApiEndpoint: true },
    );
    build().template.hasResourceProperties('AWS::ApiGateway::RestApi', { DisableExecuteApiEndpoint: false });
    expect(errorOf(() => ({ disableExecuteApiEndpoint: true }))).toMatch(
      /disableExecuteApiEndpoint needs domainName/,
    );
  });

  it('hostedZone: A and AAAA alias records of the custom domain; the name must be in the zone', () => {
    const { stack, template } = build(({ zone }) => ({ ...DOMAIN, hostedZone: zone }));
    const domainId = stack.getLogicalId(stack.host.domain!.node.defaultChild as CfnElement);
    for (const type of ['A', 'AAAA']) {
      template.hasResourceProperties('AWS::Route53::RecordSet', {
        Type: type,
        Name: 'api.example.com.',
        HostedZoneId: 'Z0123456789ABCDEFGHIJ',
        AliasTarget: {
          DNSName: { 'Fn::GetAtt': [domainId, 'RegionalDomainName'] },
          HostedZoneId: { 'Fn::GetAtt': [domainId, 'RegionalHostedZoneId'] },
        },
      });
    }
    template.resourceCountIs('AWS::Route53::RecordSet', 2);
    build().template.resourceCountIs('AWS::Route53::RecordSet', 0);
    expect(errorOf(({ zone }) => ({ hostedZone: zone }))).toMatch(/hostedZone needs domainName/);
    expect(errorOf(({ zone }) => ({ ...DOMAIN, domainName: 'api.example.org', hostedZone: zone }))).toMatch(
      /not in hostedZone example\.com/,
    );
    // A name that only ends with the zone's letters is not in it.
    expect(errorOf(({ zone }) => ({ ...DOMAIN, domainName: 'apiexample.com', hostedZone: zone }))).toMatch(
      /not in hostedZone/,
    );
  });

  it('webAclArn: the web ACL is associated with the API stage; a malformed ARN is refused', () => {
    const { stack, template } = build(() => ({ webAclArn: WEB_ACL }));
    template.hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
      WebACLArn: WEB_ACL,
      ResourceArn: stack.resolve(stack.api.api.deploymentStage.stageArn),
    });
    template.resourceCountIs('AWS::WAFv2::WebACL', 0);
    // Without one the Host makes its own (the per-IP rate rule), unless told not to.
    build().template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 1);
    build(() => ({ rateLimitPerIp: false })).template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 0);
    expect(errorOf(() => ({ webAclArn: 'arn:aws:wafv2:us-east-1:111111111111:global/webacl/x/y' }))).toMatch(
      /not a regional WAFv2 web ACL ARN/,
    );
  });

  it('tracing: off removes X-Ray from the Host and worker functions, the dispatcher and the stage', () => {
    // The Host's five functions and the worker (the registration provider is CDK's own).
    const ours = (t: Template) =>
      Object.values(t.findResources('AWS::Lambda::Function')).filter((f) =>
        String(f.Properties.Description ?? '').startsWith('Takoform'),
      );
    const on = ours(build(() => ({}), { worker: true }).template);
    expect(on).toHaveLength(6);
    for (const f of on) expect(f.Properties.TracingConfig).toEqual({ Mode: 'Active' });
    const off = build(() => ({ tracing: false }), { worker: true }).template;
    expect(ours(off)).toHaveLength(6);
    for (const f of ours(off)) expect(f.Properties.TracingConfig).toBeUndefined();
    expect(JSON.stringify(off.findResources('AWS::IAM::Policy'))).not.toContain('xray:PutTraceSegments"');
    off.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      TracingConfiguration: { Enabled: false },
    });
    off.hasResourceProperties('AWS::ApiGateway::Stage', { TracingEnabled: false });
  });

  /** Every `[actions, resource]` the identity policies of `role` grant on `keyArn`. */
  function keyGrants(template: Template, stack: TakoformHostStack, role: IConstruct, keyArn: string) {
    const ref = JSON.stringify({ Ref: stack.getLogicalId(role.node.defaultChild as CfnElement) });
    return Object.values(template.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes(ref))
      .flatMap(
        (p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
      )
      .filter((st) => JSON.stringify(st.Resource) === JSON.stringify(keyArn))
      .flatMap((st) => [st.Action].flat())
      .sort();
  }

  it('tableEncryptionKey: the table is encrypted with it, and every writer of the table may use it', () => {
    const { stack, template } = build(({ tableKey }) => ({ env: ENV, tableEncryptionKey: tableKey }), {
      worker: true,
      producer: true,
    });
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS' },
      Replicas: [Match.objectLike({ SSESpecification: { KMSMasterKeyId: TABLE_KEY } })],
    });
    // Host functions, the producer (grantProduce) and the worker registration: the write actions
    // on that key only, no wildcards (CDK's own table grant would allow them on every key).
    const writes = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:GenerateDataKey'];
    for (const f of [
      stack.api.handler,
      stack.host.delivery.batchHostFunction,
      stack.host.delivery.executorFunction,
    ]) {
      expect(keyGrants(template, stack, f.role, TABLE_KEY)).toEqual(writes);
    }
    const kmsOnEveryKey = Object.values(template.findResources('AWS::IAM::Policy'))
      .flatMap(
        (p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
      )
      .filter((st) => st.Resource === '*' && [st.Action].flat().some((a) => a.startsWith('kms:')));
    expect(kmsOnEveryKey).toEqual([]);
    expect(keyGrants(template, stack, stack.node.findChild('Producer'), TABLE_KEY)).toEqual(writes);
    const registration = Object.values(template.findResources('AWS::IAM::Policy')).find(
      (p) =>
        JSON.stringify(p.Properties).includes('dynamodb:PutItem') &&
        JSON.stringify(p.Properties).includes(TABLE_KEY),
    );
    expect(registration).toBeDefined();
    build().template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      SSESpecification: Match.absent(),
    });
    expect(errorOf(({ tableKey }) => ({ tableEncryptionKey: tableKey }))).toMatch(/explicit region/);
  });

  it('queueEncryptionKey and queueTags: the executor creates queues with them; senders and workers may use the key', () => {
    const { stack, template } = build(
      ({ queueKey }) => ({ env: ENV, queueEncryptionKey: queueKey, queueTags: { 'cost-center': 'cc-42' } }),
      { worker: true, producer: true },
    );
    const d = stack.host.delivery;
    const env = (c: IConstruct) =>
      template.findResources('AWS::Lambda::Function')[stack.getLogicalId(c.node.defaultChild as CfnElement)]
        ?.Properties.Environment.Variables;
    expect(env(d.executorFunction.fn)).toMatchObject({
      TAKOFORM_QUEUE_KMS_KEY: QUEUE_KEY,
      TAKOFORM_QUEUE_TAGS: '{"cost-center":"cc-42"}',
      TAKOFORM_QUEUE_ARN_PREFIX: {
        'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':sqs:us-east-1:111111111111:']],
      },
    });
    const send = ['kms:Decrypt', 'kms:GenerateDataKey'];
    expect(keyGrants(template, stack, stack.api.handler.role, QUEUE_KEY)).toEqual(send);
    expect(keyGrants(template, stack, d.batchHostFunction.role, QUEUE_KEY)).toEqual(send);
    expect(keyGrants(template, stack, stack.node.findChild('Producer'), QUEUE_KEY)).toEqual(send);
    const worker = (stack.node.findChild('Orders') as ModuleWorkerFunction).function.role;
    expect(keyGrants(template, stack, worker, QUEUE_KEY)).toEqual(['kms:Decrypt']);
    // Creating, inspecting and tagging queues needs no key rights.
    expect(keyGrants(template, stack, d.executorFunction.role, QUEUE_KEY)).toEqual([]);
    expect(keyGrants(template, stack, d.supervisorFunction.role, QUEUE_KEY)).toEqual([]);

    // Without them: SQS-managed SSE (no key variable), the TLS-only policy's ARN prefix, no tags.
    const plain = build();
    const plainEnv =
      plain.template.findResources('AWS::Lambda::Function')[
        plain.stack.getLogicalId(
          plain.stack.host.delivery.executorFunction.fn.node.defaultChild as CfnElement,
        )
      ]?.Properties.Environment.Variables;
    expect(plainEnv.TAKOFORM_QUEUE_KMS_KEY).toBeUndefined();
    expect(plainEnv.TAKOFORM_QUEUE_TAGS).toBeUndefined();
    expect(plainEnv.TAKOFORM_QUEUE_ARN_PREFIX).toBeDefined();

    const message = errorOf(() => ({ queueTags: { 'aws:owner': 'x', big: 'v'.repeat(300) } }));
    expect(message).toContain('queueTags: tag key "aws:owner" uses a reserved prefix');
    expect(message).toContain('queueTags: tag "big" has a value SQS does not accept');
  });

  it('the stack takes the zone and the keys by id and ARN too (the app’s -c context)', () => {
    const { stack, template } = build(() => ({
      ...DOMAIN,
      env: ENV,
      hostedZoneId: 'Z0123456789ABCDEFGHIJ',
      hostedZoneName: 'example.com',
      tableEncryptionKeyArn: TABLE_KEY,
      queueEncryptionKeyArn: QUEUE_KEY,
    }));
    template.resourcePropertiesCountIs(
      'AWS::Route53::RecordSet',
      { HostedZoneId: 'Z0123456789ABCDEFGHIJ' },
      2,
    );
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      Replicas: [Match.objectLike({ SSESpecification: { KMSMasterKeyId: TABLE_KEY } })],
    });
    const executor = stack.host.delivery.executorFunction.fn;
    expect(
      template.findResources('AWS::Lambda::Function')[
        stack.getLogicalId(executor.node.defaultChild as CfnElement)
      ]?.Properties.Environment.Variables.TAKOFORM_QUEUE_KMS_KEY,
    ).toBe(QUEUE_KEY);
    expect(errorOf(() => ({ ...DOMAIN, hostedZoneId: 'Z0123456789ABCDEFGHIJ' }))).toMatch(/go together/);
  });

  it('hostFunctions: memory and reserved concurrency per Host function, validated', () => {
    const { stack, template } = build(ALL_PROPS);
    const fn = (c: IConstruct) =>
      template.findResources('AWS::Lambda::Function')[stack.getLogicalId(c.node.defaultChild as CfnElement)]
        ?.Properties;
    const d = stack.host.delivery;
    expect(fn(stack.api.handler.fn)).toMatchObject({ MemorySize: 1024, ReservedConcurrentExecutions: 50 });
    expect(fn(d.executorFunction.fn)).toMatchObject({ MemorySize: 512, ReservedConcurrentExecutions: 2 });
    expect(fn(d.supervisorFunction.fn)).toMatchObject({ MemorySize: 256, ReservedConcurrentExecutions: 1 });
    // Not given: the Host's default reservation.
    expect(fn(d.batchHostFunction.fn)).toMatchObject({
      MemorySize: 1024,
      ReservedConcurrentExecutions: HOST_RESERVED_CONCURRENCY.batchHost,
    });
    // 'worker' is not a Host function (the cast lets the test give what TypeScript would refuse).
    const hostFunctions = { api: { memorySize: 64 }, step: { reservedConcurrentExecutions: 0 }, worker: {} };
    const message = errorOf(() => ({
      hostFunctions: hostFunctions as TakoformHostStackProps['hostFunctions'],
    }));
    expect(message).toContain('hostFunctions.api.memorySize must be an integer in 128..10240');
    expect(message).toContain(
      'hostFunctions.step.reservedConcurrentExecutions must be an integer in 1..100000',
    );
    expect(message).toContain('hostFunctions.worker is not a Host function');
  });
});

describe('reserved concurrency of the Host functions', () => {
  const reservations = (b: ReturnType<typeof build>) => {
    const fns = b.template.findResources('AWS::Lambda::Function');
    const of = (c: IConstruct) =>
      fns[b.stack.getLogicalId(c.node.defaultChild as CfnElement)]?.Properties.ReservedConcurrentExecutions;
    const d = b.stack.host.delivery;
    return {
      api: of(b.stack.api.handler.fn),
      step: of(d.stepFunction.fn),
      batchHost: of(d.batchHostFunction.fn),
      executor: of(d.executorFunction.fn),
      supervisor: of(d.supervisorFunction.fn),
    };
  };

  it('by default each Host function reserves its share, and workers reserve nothing', () => {
    const b = build(() => ({}), { worker: true });
    expect(reservations(b)).toEqual(HOST_RESERVED_CONCURRENCY);
    // Workers draw on the unreserved pool: the one that is left to them.
    const reserved = Object.values(b.template.findResources('AWS::Lambda::Function')).filter(
      (f) => f.Properties.ReservedConcurrentExecutions !== undefined,
    );
    expect(reserved).toHaveLength(5);
    expect(HOST_RESERVED_TOTAL).toBe(167);
  });

  it('reserveConcurrency: false reserves nothing, and an explicit size still applies', () => {
    expect(reservations(build(() => ({ reserveConcurrency: false })))).toEqual({
      api: undefined,
      step: undefined,
      batchHost: undefined,
      executor: undefined,
      supervisor: undefined,
    });
    const sized = build(() => ({
      reserveConcurrency: false,
      hostFunctions: { batchHost: { reservedConcurrentExecutions: 30 } },
    }));
    expect(reservations(sized)).toMatchObject({ batchHost: 30, step: undefined, api: undefined });
  });
});

describe('OPS-02: cdk-nag with every landing-zone prop set', () => {
  /** `path rule` of every acknowledgement in the stack. */
  function acknowledgements(stack: TakoformHostStack): Map<string, string> {
    const found = new Map<string, string>();
    const visit = (c: IConstruct) => {
      for (const entry of c.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
          found.set(`${c.node.path} ${id.replace(/^Annotation::/, '')}`, reason);
        }
      }
      for (const child of c.node.children) visit(child);
    };
    visit(stack);
    return found;
  }

  it('OPS-02: no unacknowledged finding, and the only new acknowledgements are the ones tracing: false asks for (one per dispatcher)', () => {
    const all = build(ALL_PROPS, { worker: true, nag: true });
    expect(() => all.app.synth()).not.toThrow();
    const report = JSON.parse(readFileSync(join(all.outdir, 'validation-report.json'), 'utf8'));
    expect(report.pluginReports).toEqual([]);

    const before = acknowledgements(build(() => ({ ...DOMAIN, env: ENV }), { worker: true }).stack);
    const after = acknowledgements(all.stack);
    const added = [...after.keys()].filter((k) => !before.has(k));
    const removed = [...before.keys()].filter((k) => !after.has(k));
    expect(added).toEqual([
      'TakoformHost/Host/Delivery/Dispatcher AwsSolutions-SF2',
      'TakoformHost/Host/Delivery/DispatcherExpress AwsSolutions-SF2',
    ]);
    for (const k of added) expect(after.get(k)).toMatch(/tracing prop/);
    // The account's own role makes an acknowledgement unnecessary (the stage has a web ACL in
    // both: the Host's rate-limiting one, or webAclArn's).
    expect(removed.sort()).toEqual(
      [
        'TakoformHost/Host/Api/Api/CloudWatchRole AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
        // Tracing off: no X-Ray policy to acknowledge.
        ...[
          'Api/Handler',
          'Delivery/StepFunction',
          'Delivery/BatchHostFunction',
          'Delivery/ExecutorFunction',
          'Delivery/SupervisorFunction',
        ].map((p) => `TakoformHost/Host/${p}/TracingPolicy AwsSolutions-IAM5[Resource::*]`),
        'TakoformHost/Orders/Worker/TracingPolicy AwsSolutions-IAM5[Resource::*]',
      ].sort(),
    );
  });
});
