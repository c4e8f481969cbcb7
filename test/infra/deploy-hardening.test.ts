/**
 * Deploy and security properties of the synthesized template that a first deployment does not
 * show: account-wide quotas the Host must not spend (the CloudWatch Logs resource policy),
 * physical names that survive a moved construct, and props that fail at run time unless refused
 * at synth.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { App, type CfnElement, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
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
