/**
 * Deploy and security properties of the synthesized template that a first deployment does not
 * show: account-wide quotas the Host must not spend (the CloudWatch Logs resource policy),
 * physical names that survive a moved construct, and props that fail at run time unless refused
 * at synth.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { Alias, Key } from 'aws-cdk-lib/aws-kms';
import { Construct, type IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHost } from '../../lib/constructs/takoform-host.ts';
import { TakoformHostStack, type TakoformHostStackProps } from '../../lib/host-stack.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));

function build(props: TakoformHostStackProps = {}) {
  const app = new App({ context: NO_BUNDLING });
  const stack = new TakoformHostStack(app, 'TakoformHost', props);
  return { stack, template: Template.fromStack(stack) };
}

const logicalId = (stack: Stack, c: IConstruct) =>
  stack.getLogicalId((c.node.defaultChild ?? c) as CfnElement);

describe('the Step Functions log group', () => {
  it('is named under /aws/vendedlogs/states/, so log delivery does not grow the account’s resource policy', () => {
    const { stack, template } = build();
    const logs = stack.host.delivery.stateMachineLogs;
    const props = template.findResources('AWS::Logs::LogGroup')[logicalId(stack, logs)]?.Properties;
    expect(props?.LogGroupName).toMatch(/^\/aws\/vendedlogs\/states\/takoform-host_dispatcher/);
  });
});

describe('customer-managed keys', () => {
  const ENV = { account: '111111111111', region: 'us-east-1' };
  const KEY_ARN = 'arn:aws:kms:us-east-1:111111111111:key/11111111-2222-3333-4444-555555555555';
  const ALIAS_ARN = 'arn:aws:kms:us-east-1:111111111111:alias/takoform';
  const host = (keys: (stack: Stack) => Record<string, unknown>) => {
    const app = new App({ context: NO_BUNDLING });
    const stack = new Stack(app, 'Keys', { env: ENV });
    return () => new TakoformHost(stack, 'Host', keys(stack));
  };

  it('an alias (ARN or Alias construct) is refused at synth, naming the key ARN to pass instead', () => {
    for (const prop of ['tableEncryptionKey', 'queueEncryptionKey']) {
      expect(host((s) => ({ [prop]: Key.fromKeyArn(s, 'K', ALIAS_ARN) }))).toThrow(
        new RegExp(`${prop} .*alias.*key ARN \\(arn:aws:kms:<region>:<account>:key/<key-id>\\)`),
      );
      expect(host((s) => ({ [prop]: Alias.fromAliasName(s, 'A', 'alias/takoform') }))).toThrow(
        new RegExp(`${prop} .*alias`),
      );
    }
  });

  it('a key ARN is accepted', () => {
    expect(
      host((s) => ({
        tableEncryptionKey: Key.fromKeyArn(s, 'T', KEY_ARN),
        queueEncryptionKey: Key.fromKeyArn(s, 'Q', KEY_ARN),
      })),
    ).not.toThrow();
  });
});

describe('reserved concurrency of the Host functions', () => {
  it('the stack says how much of the account’s concurrency it reserves and what the account must have left', () => {
    const defaults = Annotations.fromStack(build().stack).findInfo(
      '*',
      Match.stringLikeRegexp('reserve 167 concurrent'),
    );
    expect(defaults[0]?.entry.data).toMatch(/UnreservedConcurrentExecutions.*at least 267/);
    // Without the defaults, only what hostFunctions gives.
    const { stack } = build({
      reserveConcurrency: false,
      hostFunctions: {
        api: { reservedConcurrentExecutions: 20 },
        batchHost: { reservedConcurrentExecutions: 30 },
      },
    });
    const infos = Annotations.fromStack(stack).findInfo('*', Match.stringLikeRegexp('reserve 50 concurrent'));
    expect(infos).toHaveLength(1);
    expect(infos[0]?.entry.data).toMatch(/UnreservedConcurrentExecutions.*at least 150/);
    expect(infos[0]?.entry.data).toMatch(/fewer than 100 unreserved/);
  });

  it('nothing is said when no Host function reserves any', () => {
    const { stack } = build({ reserveConcurrency: false });
    expect(Annotations.fromStack(stack).findInfo('*', Match.stringLikeRegexp('concurrent'))).toEqual([]);
  });
});

describe('a bound per client on the API', () => {
  const WEB_ACL =
    'arn:aws:wafv2:us-east-1:111111111111:regional/webacl/platform/11111111-2222-3333-4444-555555555555';
  const rateRules = (template: Template) =>
    Object.values(template.findResources('AWS::WAFv2::WebACL')).flatMap((acl) =>
      (acl.Properties.Rules as { Statement: { RateBasedStatement?: unknown } }[]).filter(
        (r) => r.Statement.RateBasedStatement,
      ),
    );

  it('by default, a web ACL on the stage blocks one source IP past its own rate, well inside the stage’s', () => {
    const { stack, template } = build();
    const [rule] = rateRules(template);
    expect(rule).toMatchObject({
      Action: { Block: { CustomResponse: { ResponseCode: 429 } } },
      Statement: { RateBasedStatement: { AggregateKeyType: 'IP', EvaluationWindowSec: 300, Limit: 3000 } },
    });
    const acl = stack.host.api.webAcl!;
    template.hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
      ResourceArn: Match.anyValue(),
      WebACLArn: { 'Fn::GetAtt': [logicalId(stack, acl), 'Arn'] },
    });
    template.hasResourceProperties('AWS::WAFv2::WebACL', { Scope: 'REGIONAL', DefaultAction: { Allow: {} } });
  });

  it('the rate is configurable, and false leaves the stage without a web ACL', () => {
    const [rule] = rateRules(build({ rateLimitPerIp: 600 }).template);
    expect(rule).toMatchObject({ Statement: { RateBasedStatement: { Limit: 600 } } });
    const off = build({ rateLimitPerIp: false }).template;
    off.resourceCountIs('AWS::WAFv2::WebACL', 0);
    off.resourceCountIs('AWS::WAFv2::WebACLAssociation', 0);
  });

  it('with the platform’s own web ACL, that one is associated and none is made; both at once is an error', () => {
    const { template } = build({ webAclArn: WEB_ACL });
    template.resourceCountIs('AWS::WAFv2::WebACL', 0);
    template.hasResourceProperties('AWS::WAFv2::WebACLAssociation', { WebACLArn: WEB_ACL });
    expect(() => build({ webAclArn: WEB_ACL, rateLimitPerIp: 600 })).toThrow(/rateLimitPerIp .*webAclArn/);
    expect(() => build({ rateLimitPerIp: 5 })).toThrow(
      /rateLimitPerIp must be an integer in 10\.\.2000000000/,
    );
  });
});

describe('physical names when a construct moves', () => {
  /** Every name the template fixes, by resource type. */
  const fixedNames = (template: Template) => {
    const out: string[] = [];
    for (const [type, prop] of [
      ['AWS::Lambda::Function', 'FunctionName'],
      ['AWS::StepFunctions::StateMachine', 'StateMachineName'],
      ['AWS::Logs::LogGroup', 'LogGroupName'],
    ] as const) {
      for (const r of Object.values(template.findResources(type))) {
        const name = r.Properties?.[prop];
        if (name !== undefined) out.push(`${type} ${JSON.stringify(name)}`);
      }
    }
    return out.sort();
  };
  const app = (place: (stack: Stack) => Construct, workerId: string) => {
    const a = new App({ context: NO_BUNDLING });
    const stack = new Stack(a, 'TakoformHost');
    const host = new TakoformHost(place(stack), 'Host', { queueNamePrefix: 'orders-host' });
    const worker = new ModuleWorkerFunction(stack, workerId, {
      host: host.workerBinding,
      entry: WORKER,
      space: 'team',
      name: 'orders',
      handlers: ['queue'],
    });
    return { stack, host, worker, template: Template.fromStack(stack) };
  };

  it('a moved Host or worker gets new names, so CloudFormation can create it before deleting the old one', () => {
    const before = app((s) => s, 'Orders');
    const after = app((s) => new Construct(s, 'Platform'), 'OrdersWorker');
    const old = new Set(fixedNames(before.template));
    expect(old.size).toBeGreaterThanOrEqual(4);
    expect(fixedNames(after.template).filter((n) => old.has(n))).toEqual([]);
    // Still under the Host's name, which the IAM scopes rely on; and stable from synth to synth.
    expect(after.worker.functionName.startsWith('orders-host_wkr-')).toBe(true);
    expect(after.host.delivery.dispatcherName.startsWith('orders-host_dispatcher')).toBe(true);
    expect(fixedNames(app((s) => new Construct(s, 'Platform'), 'OrdersWorker').template)).toEqual(
      fixedNames(after.template),
    );
  });

  it('the old registration’s delete leaves the item of the worker that replaced it', () => {
    const { template } = app((s) => s, 'Orders');
    const [registration] = Object.values(template.findResources('Custom::TakoformWorkerRegistration'));
    const del = JSON.stringify(registration?.Properties.Delete);
    expect(del).toContain('ConditionExpression');
    expect(del).toContain('ConditionalCheckFailedException');
  });
});
