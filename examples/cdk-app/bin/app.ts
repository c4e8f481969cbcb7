#!/usr/bin/env node
/**
 * A team's CDK app using the Takoform Host as a package: one Host stack and one worker deployed
 * for it. Node runs this file as it is (type stripping), so no build step; `npx tsc` checks it.
 */
import { App, CfnOutput } from 'aws-cdk-lib';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { ModuleWorkerFunction, TakoformHostStack } from 'takoform-aws-queue-host';

const app = new App();
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;
const stack = new TakoformHostStack(app, 'OrdersHost', {
  env: account || region ? { account, region } : undefined,
});

const orders = new ModuleWorkerFunction(stack, 'OrdersWorker', {
  host: stack.host.workerBinding,
  // Resolved against this file, whatever directory `cdk synth` runs in.
  entry: new URL('../workers/orders.mjs', import.meta.url),
  space: 'team',
  name: 'orders',
  // Plain configuration: visible in the template and the Host's registration.
  vars: { GREETING: 'hello' },
  // A credential: only its reference is deployed; the worker reads it at cold start.
  secrets: {
    API_TOKEN: secretsmanager.Secret.fromSecretNameV2(stack, 'OrdersApiToken', 'orders/api-token'),
  },
});

new CfnOutput(stack, 'OrdersWorkerLogGroup', { value: orders.function.logGroup.logGroupName });
