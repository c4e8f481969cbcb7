#!/usr/bin/env node
/**
 * CDK entry (`cdk.json`: `npx tsx bin/app.ts`): one Host stack, checked by cdk-nag on every synth.
 * Optional context: `-c domainName=api.example.com -c certificateArn=arn:aws:acm:…` (custom domain
 * mapped at the root), `-c publicOrigin=https://…`, `-c queueNamePrefix=…`, and
 * `-c exampleWorker=true` to add the example worker of the README (examples/workers/default/echo.mjs).
 */
import { App, CfnOutput, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ModuleWorkerFunction } from '../lib/constructs/module-worker-function.ts';
import { TakoformHostStack } from '../lib/host-stack.ts';

const app = new App();
const context = (key: string): string | undefined => {
  const v = app.node.tryGetContext(key);
  return typeof v === 'string' && v !== '' ? v : undefined;
};

// Leave env unset when the CLI has no account/region, so synth still works offline.
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;
const stack = new TakoformHostStack(app, 'TakoformHost', {
  env: account || region ? { account, region } : undefined,
  publicOrigin: context('publicOrigin'),
  queueNamePrefix: context('queueNamePrefix'),
  domainName: context('domainName'),
  certificateArn: context('certificateArn'),
});

if (context('exampleWorker') === 'true') {
  const echo = new ModuleWorkerFunction(stack, 'EchoWorker', {
    host: stack.host.workerBinding,
    entry: 'examples/workers/default/echo.mjs',
    space: 'default',
    name: 'echo',
  });
  new CfnOutput(stack, 'EchoWorkerLogGroup', {
    value: echo.function.logGroup.logGroupName,
    description: 'Logs of the example worker default/echo',
  });
}

// cdk-nag 3: a validation plugin; any unacknowledged finding fails the synth.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
