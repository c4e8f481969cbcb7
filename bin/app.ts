#!/usr/bin/env node
/**
 * CDK entry (`cdk.json`: `npx tsx bin/app.ts`): one Host stack, checked by cdk-nag on every synth.
 * Optional context: `-c domainName=api.example.com -c certificateArn=arn:aws:acm:…` (custom domain
 * mapped at the root), `-c publicOrigin=https://…`, `-c queueNamePrefix=…`, and
 * `-c exampleWorker=true` to add the example worker of the README (examples/workers/default/echo.mjs).
 * Landing-zone context (docs/deploy.md): `-c hostedZoneId=… -c hostedZoneName=…`, `-c webAclArn=…`,
 * `-c disableExecuteApiEndpoint=true`, `-c cloudWatchRole=false`, `-c tracing=false`,
 * `-c reserveConcurrency=false` (accounts whose Lambda quota cannot spare the Host's reservations),
 * `-c tableKeyArn=…`, `-c queueKeyArn=…` (a table key needs CDK_DEFAULT_REGION), and
 * `-c queueTags='{"cost-center":"cc-42"}'`, `-c rateLimitPerIp=6000` (or `false`).
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
const flag = (key: string): boolean | undefined => {
  const v = context(key);
  if (v === undefined) return undefined;
  if (v !== 'true' && v !== 'false') throw new Error(`-c ${key} must be true or false`);
  return v === 'true';
};
const queueTags = context('queueTags');
const perIp = context('rateLimitPerIp');
const stack = new TakoformHostStack(app, 'TakoformHost', {
  env: account || region ? { account, region } : undefined,
  publicOrigin: context('publicOrigin'),
  queueNamePrefix: context('queueNamePrefix'),
  domainName: context('domainName'),
  certificateArn: context('certificateArn'),
  hostedZoneId: context('hostedZoneId'),
  hostedZoneName: context('hostedZoneName'),
  webAclArn: context('webAclArn'),
  disableExecuteApiEndpoint: flag('disableExecuteApiEndpoint'),
  cloudWatchRole: flag('cloudWatchRole'),
  tracing: flag('tracing'),
  reserveConcurrency: flag('reserveConcurrency'),
  tableEncryptionKeyArn: context('tableKeyArn'),
  queueEncryptionKeyArn: context('queueKeyArn'),
  queueTags: queueTags === undefined ? undefined : JSON.parse(queueTags),
  rateLimitPerIp: perIp === undefined ? undefined : perIp === 'false' ? false : Number(perIp),
});

if (context('exampleWorker') === 'true') {
  const echo = new ModuleWorkerFunction(stack, 'EchoWorker', {
    host: stack.host.workerBinding,
    entry: new URL('../examples/workers/default/echo.mjs', import.meta.url),
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
