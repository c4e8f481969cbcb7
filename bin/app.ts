#!/usr/bin/env node
/** CDK entry (`cdk.json`: `npx tsx bin/app.ts`): one Host stack, checked by cdk-nag on every synth. */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { TakoformHostStack } from '../lib/host-stack.ts';

const app = new App();

// Leave env unset when the CLI has no account/region, so synth still works offline.
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;
new TakoformHostStack(app, 'TakoformHost', {
  env: account || region ? { account, region } : undefined,
  publicOrigin: app.node.tryGetContext('publicOrigin'),
});

// cdk-nag 3: a validation plugin; any unacknowledged finding fails the synth.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
