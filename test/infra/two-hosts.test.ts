/**
 * Two Hosts in one account and region (OPS-01 embedding, SEC-02 scoping, OPS-04 alarms): no IAM
 * resource scope, metric query, SEARCH expression, alarm or dashboard of one covers the other's
 * queues, worker functions, dispatcher or metric series.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack } from '../../lib/host-stack.ts';
import { searchTermMatches } from '../support/cloudwatch-search.ts';
import { resolveIntrinsics } from '../support/template-values.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;
const NO_BUNDLING = { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] };
const WORKER = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));
const ACCOUNT = '111111111111';
const REGION = 'eu-west-1';
/** Resource uids as the engine makes them (`r` + ULID). */
const UIDS = ['r01JCQ4W8ZK3M5N6P7Q8R9S0TV', 'r01JCQ4W8ZK3M5N6P7Q8R9S0TW'];

interface HostView {
  stack: TakoformHostStack;
  template: Template;
  /** ARNs of what the Host creates or names at run time and in the template. */
  names: string[];
  queueNames: string[];
}

/** A template value with intrinsics resolved; references are qualified by the stack's name. */
function resolver(stackName: string) {
  return (v: unknown) =>
    resolveIntrinsics(v, {
      account: ACCOUNT,
      region: REGION,
      ref: (logicalId) => `${stackName}/${logicalId}`,
      getAtt: (logicalId, attribute) => `${stackName}/${logicalId}.${attribute}`,
    });
}

/** IAM's Resource matching: `*` any run of characters, `?` one character. */
function iamMatches(pattern: string, arn: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(arn);
}

const serviceOfAction = (action: string) => action.split(':')[0];
const serviceOfArn = (arn: string) => arn.split(':')[2];

describe('two Hosts in one account and region', () => {
  const hosts: Record<'prod' | 'staging', HostView> = {} as never;

  beforeAll(() => {
    const app = new App({ context: NO_BUNDLING });
    const env = { account: ACCOUNT, region: REGION };
    for (const [key, stackName] of [
      ['prod', 'TakoformHost'],
      ['staging', 'TakoformHostStaging'],
    ] as const) {
      const stack = new TakoformHostStack(app, stackName, { env });
      // The same worker (space and name) in both Hosts.
      const worker = new ModuleWorkerFunction(stack, 'Orders', {
        host: stack.host.workerBinding,
        entry: WORKER,
        space: 'team',
        name: 'orders',
        handlers: ['queue'],
      });
      const prefix = stack.host.delivery.queueNamePrefix;
      const queueNames = UIDS.map((uid) => `${prefix}${uid}`);
      hosts[key] = {
        stack,
        template: undefined as unknown as Template, // after both stacks exist (one synthesis)
        queueNames,
        names: [
          ...queueNames.map((q) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${q}`),
          `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${worker.functionName}`,
          `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${stack.host.delivery.dispatcherName}`,
        ],
      };
    }
    for (const h of Object.values(hosts)) h.template = Template.fromStack(h.stack);
  });

  const pairs = () =>
    [
      [hosts.prod, hosts.staging],
      [hosts.staging, hosts.prod],
    ] as const;

  /** Every (action, resource pattern) of every identity policy in the Host's stack. */
  function iamScopes(h: HostView): { action: string; resource: string; policy: string }[] {
    const resolve = resolver(h.stack.stackName);
    return Object.entries(h.template.findResources('AWS::IAM::Policy')).flatMap(([policy, p]) => {
      const doc = resolve(p.Properties.PolicyDocument) as {
        Statement: { Effect: string; Action: string | string[]; Resource: string | string[] }[];
      };
      return doc.Statement.filter((s) => s.Effect === 'Allow').flatMap((s) =>
        [s.Action]
          .flat()
          .flatMap((action) => [s.Resource].flat().map((resource) => ({ action, resource, policy }))),
      );
    });
  }

  it('SEC-02: the name prefixes end in a delimiter no other Host name can contain', () => {
    expect(hosts.prod.stack.host.delivery.queueNamePrefix).toBe('takoform-host_');
    expect(hosts.staging.stack.host.delivery.queueNamePrefix).toBe('takoform-host-staging_');
    expect(hosts.prod.stack.host.delivery.workerFunctionNamePrefix).toBe('takoform-host_wkr-');
    // The dispatchers' names end with a tag of the construct's path (a moved Host gets new ones).
    expect(hosts.prod.stack.host.delivery.dispatcherName).toMatch(/^takoform-host_dispatcher-[0-9a-f]{8}$/);
    expect(hosts.prod.stack.host.delivery.expressDispatcherName).toMatch(
      /^takoform-host_dispatcher-express-[0-9a-f]{8}$/,
    );
    expect(hosts.staging.stack.host.delivery.expressDispatcherName).toMatch(
      /^takoform-host-staging_dispatcher-express-[0-9a-f]{8}$/,
    );
    for (const [a, b] of pairs()) {
      expect(b.stack.host.delivery.queueNamePrefix.startsWith(a.stack.host.delivery.queueNamePrefix)).toBe(
        false,
      );
    }
  });

  it('SEC-02: no IAM resource scope of one Host covers a name of the other', () => {
    for (const [a, b] of pairs()) {
      const scopes = iamScopes(a);
      // The check has teeth: the Host's own queue, worker and dispatcher scopes match its names.
      for (const own of a.names) {
        expect(
          scopes.some((s) => serviceOfAction(s.action) === serviceOfArn(own) && iamMatches(s.resource, own)),
          own,
        ).toBe(true);
      }
      const covering = scopes.flatMap((s) =>
        b.names
          .filter((name) => serviceOfAction(s.action) === serviceOfArn(name) && iamMatches(s.resource, name))
          .map((name) => `${a.stack.stackName} ${s.policy} ${s.action} ${s.resource} covers ${name}`),
      );
      expect(covering).toEqual([]);
    }
  });

  it('OPS-04: every alarm watches only its own Host’s series: the host dimension, its API, functions and dispatcher', () => {
    const ownValues = (h: HostView) => ({
      host: h.stack.host.queueNamePrefix,
      api: h.stack.resolve(h.stack.api.api.restApiName),
    });
    expect(ownValues(hosts.prod)).toEqual({ host: 'takoform-host', api: 'takoform-host_api' });
    for (const [a, b] of pairs()) {
      const resolve = resolver(a.stack.stackName);
      const alarms = Object.values(a.template.findResources('AWS::CloudWatch::Alarm')).map(
        (r) => resolve(r.Properties) as Record<string, unknown>,
      );
      expect(alarms).toHaveLength(7);
      for (const alarm of alarms) {
        expect(String(alarm.AlarmName).startsWith(a.stack.host.delivery.queueNamePrefix)).toBe(true);
        const metrics = [
          ...(alarm.MetricName ? [{ Namespace: alarm.Namespace, Dimensions: alarm.Dimensions }] : []),
          ...((alarm.Metrics as { MetricStat?: { Metric: Record<string, unknown> } }[] | undefined) ?? [])
            .filter((m) => m.MetricStat)
            .map((m) => m.MetricStat!.Metric),
        ] as { Namespace: string; Dimensions: { Name: string; Value: string }[] }[];
        expect(metrics.length).toBeGreaterThan(0);
        for (const m of metrics) {
          const dims = Object.fromEntries(m.Dimensions.map((d) => [d.Name, d.Value]));
          if (m.Namespace === 'Takoform') expect(dims.host).toBe(ownValues(a).host);
          else if (m.Namespace === 'AWS/ApiGateway') expect(dims.ApiName).toBe(ownValues(a).api);
          else {
            // Lambda and Step Functions metrics name a resource of this stack.
            expect(Object.values(dims).every((v) => v.startsWith(`${a.stack.stackName}/`))).toBe(true);
          }
          expect(Object.values(dims)).not.toContain(ownValues(b).host);
          expect(Object.values(dims)).not.toContain(ownValues(b).api);
        }
      }
    }
  });

  it('OPS-04: dashboards are per Host: own metric series, and SEARCH graphs that find only its own queues', () => {
    const names = new Set<string>();
    for (const [a, b] of pairs()) {
      const [dashboard] = Object.values(a.template.findResources('AWS::CloudWatch::Dashboard'));
      const props = resolver(a.stack.stackName)(dashboard!.Properties) as Record<string, string>;
      names.add(props.DashboardName!);
      const body = JSON.parse(props.DashboardBody!) as {
        widgets: { properties: { metrics?: unknown[][] } }[];
      };
      const metrics = body.widgets.flatMap((w) => w.properties.metrics ?? []);
      const searches = metrics
        .flatMap((m) => m.filter((x) => typeof (x as { expression?: unknown }).expression === 'string'))
        .map((x) => (x as { expression: string }).expression)
        .filter((e) => e.startsWith('SEARCH('));
      expect(searches).toHaveLength(2);
      for (const search of searches) {
        for (const own of a.queueNames) expect(searchTermMatches(search, own), own).toBe(true);
        for (const other of b.queueNames) expect(searchTermMatches(search, other), other).toBe(false);
      }
      // Custom metrics: ['Takoform', name, dimension, value, …]; each carries this Host's name.
      const custom = metrics.filter((m) => m[0] === 'Takoform');
      expect(custom.length).toBeGreaterThan(0);
      for (const m of custom) {
        const host = m.indexOf('host');
        expect(m[host + 1]).toBe(a.stack.host.queueNamePrefix);
      }
    }
    expect(names).toEqual(new Set(['takoform-host_host', 'takoform-host-staging_host']));
  });

  it('OPS-04: SEARCH has no prefix anchor: a Host named `eu-takoform-host` or `takoform-host-r` would show in takoform-host’s queue graphs (the alarm path filters exactly)', () => {
    // The documented limit of the dashboard graphs; the oldest-age alarm reads through hostQueuesOnly.
    const [dashboard] = Object.values(hosts.prod.template.findResources('AWS::CloudWatch::Dashboard'));
    const body = String(resolver('TakoformHost')(dashboard!.Properties.DashboardBody));
    const search = JSON.parse(body)
      .widgets.flatMap((w: { properties: { metrics?: unknown[][] } }) => w.properties.metrics ?? [])
      .flat()
      .find((x: { expression?: string }) => x.expression?.startsWith('SEARCH(')).expression;
    expect(searchTermMatches(search, `eu-takoform-host_${UIDS[0]}`)).toBe(true);
    expect(searchTermMatches(search, `takoform-host-r_${UIDS[0]}`)).toBe(true);
    expect(searchTermMatches(search, `takoform-hosts_${UIDS[0]}`)).toBe(false);
  });
});
