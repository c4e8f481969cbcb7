/**
 * The synthesized IAM policies evaluated by an IAM policy simulator (@cloud-copilot/iam-simulate,
 * which checks actions, resource types and condition keys against AWS's service authorization
 * data): what a worker's role and a producer's grant allow and deny, request by request.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoCommitStore } from '../../lambdas/adapters/aws/dynamodb-commit-store.ts';
import { QUEUE_TAGS } from '../../lambdas/adapters/aws/sqs-queue-backend.ts';
import { ModuleWorkerFunction } from '../../lib/constructs/module-worker-function.ts';
import { TakoformHostStack } from '../../lib/host-stack.ts';
import { ACCOUNT, REGION, SynthesizedPolicies, TABLE_ARN } from '../support/iam-simulation.ts';

const WORKER = new URL('./fixtures/worker.mjs', import.meta.url).pathname;

describe('IAM policies under simulation (SEC-02, DL-09)', () => {
  let policies: SynthesizedPolicies;
  const tableArn = TABLE_ARN;
  const roles: Record<string, IConstruct> = {};

  const simulate = (
    role: IConstruct,
    action: string,
    resource: string,
    contextVariables: Record<string, string | string[]> = {},
  ) => policies.simulate(role, action, resource, contextVariables);

  const queueArn = (name: string) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;
  const tag = (space: string) => ({ [`aws:ResourceTag/${QUEUE_TAGS.space}`]: space });

  beforeAll(() => {
    const app = new App({
      context: { 'aws:cdk:bundling-stacks': [], '@aws-cdk/aws-iam:minimizePolicies': true },
    });
    const stack = new TakoformHostStack(app, 'TakoformHost', { env: { account: ACCOUNT, region: REGION } });
    const worker = (cid: string, space: string) =>
      new ModuleWorkerFunction(stack, cid, {
        host: stack.host.workerBinding,
        entry: WORKER,
        space,
        name: 'orders',
        handlers: ['queue'],
      });
    roles.workerA = worker('OrdersA', 'team-a').function.role;
    // AwsCustomResource's one provider function per stack, whose role writes every registration.
    roles.registrations = stack.node
      .findChild('AWS679f53fac002430cb0da5b7982bd2287')
      .node.findChild('ServiceRole');
    roles.workerB = worker('OrdersB', 'team-b').function.role;
    const producer = new iam.Role(stack, 'Producer', { assumedBy: new iam.AccountRootPrincipal() });
    stack.host.grantProduce(producer);
    roles.producer = producer;
    const oneQueue = new iam.Role(stack, 'OneQueueProducer', { assumedBy: new iam.AccountRootPrincipal() });
    stack.host.grantProduce(oneQueue, { queueUids: ['q-orders'] });
    roles.oneQueue = oneQueue;
    policies = new SynthesizedPolicies(stack, Template.fromStack(stack), stack.host.table.table);
  });

  it('SEC-02 DL-09: a worker of Space A may receive from queues tagged A, not from queues tagged B or untagged', async () => {
    const q = queueArn('takoform-host_q1');
    expect(await simulate(roles.workerA!, 'sqs:ReceiveMessage', q, tag('team-a'))).toBe('Allowed');
    expect(await simulate(roles.workerA!, 'sqs:ReceiveMessage', q, tag('team-b'))).toBe('ImplicitlyDenied');
    expect(await simulate(roles.workerA!, 'sqs:ReceiveMessage', q, {})).toBe('ImplicitlyDenied');
    expect(await simulate(roles.workerB!, 'sqs:ReceiveMessage', q, tag('team-b'))).toBe('Allowed');
    expect(await simulate(roles.workerB!, 'sqs:ReceiveMessage', q, tag('team-a'))).toBe('ImplicitlyDenied');
    // Outside the Host's prefix, whatever the tag; and nothing but receive on its own queues.
    expect(await simulate(roles.workerA!, 'sqs:ReceiveMessage', queueArn('other-q1'), tag('team-a'))).toBe(
      'ImplicitlyDenied',
    );
    for (const action of ['sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:SendMessage']) {
      expect(await simulate(roles.workerA!, action, q, tag('team-a'))).toBe('ImplicitlyDenied');
    }
  });

  it('SEC-02: grantProduce allows exactly the PutItem the producer client sends, on commit items only', async () => {
    // The request the producer client really makes: its attribute names come from the item.
    const sent: PutItemCommand[] = [];
    const client = { send: async (c: PutItemCommand) => void sent.push(c) };
    await new DynamoCommitStore(client as never, 'host-table').putCommit('c0123', 1_900_000_000);
    // A send the SDK sent twice (a lost answer) names the one SQS copy of its messages (DL-07).
    await new DynamoCommitStore(client as never, 'host-table').putCommit('c0124', 1_900_000_000, {
      m01: 'sqs-id',
    });
    expect(sent).toHaveLength(2);
    expect(sent[0]).toBeInstanceOf(PutItemCommand);
    const item = sent[0]!.input.Item!;
    const naming = sent[1]!.input.Item!;
    const commitPk = item.pk!.S!;
    const put = (leadingKey: string, attributes: string[]) =>
      simulate(roles.producer!, 'dynamodb:PutItem', tableArn, {
        'dynamodb:LeadingKeys': [leadingKey],
        'dynamodb:Attributes': attributes,
      });
    expect(await put(commitPk, Object.keys(item))).toBe('Allowed');
    expect(await put(naming.pk!.S!, Object.keys(naming))).toBe('Allowed');
    // API keys, secrets, Resources, Operations, slots: refused.
    for (const pk of ['KEY#abc', 'SECRET#delivery-key', 'RES#r1', 'OP#o1', 'DISPATCH#c1', 'WORKER#team#w']) {
      expect(await put(pk, Object.keys(item))).toBe('ImplicitlyDenied');
    }
    // A commit item that would land in an index the Host reads (ATTACHMENTS, DUE): refused.
    expect(await put(commitPk, [...Object.keys(item), 'gsi1pk', 'gsi1sk'])).toBe('ImplicitlyDenied');
    expect(await put(commitPk, [...Object.keys(item), 'gsi2pk'])).toBe('ImplicitlyDenied');
    for (const action of ['dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem']) {
      expect(await simulate(roles.producer!, action, tableArn, { 'dynamodb:LeadingKeys': [commitPk] })).toBe(
        'ImplicitlyDenied',
      );
    }
  });

  it('SEC-02: the registration provider writes and deletes its workers’ registration items only, never an API key', async () => {
    const write = (action: string, leadingKey: string) =>
      simulate(roles.registrations!, action, tableArn, { 'dynamodb:LeadingKeys': [leadingKey] });
    for (const action of ['dynamodb:PutItem', 'dynamodb:DeleteItem']) {
      expect(await write(action, 'WORKER#team-a#orders')).toBe('Allowed');
      expect(await write(action, 'WORKER#team-b#orders')).toBe('Allowed');
      for (const pk of [
        'KEY#abc',
        'SECRET#delivery-key',
        'RES#r1',
        'WORKER#team-c#orders',
        'WORKER#team-a#other',
      ]) {
        expect(await write(action, pk)).toBe('ImplicitlyDenied');
      }
    }
    for (const action of ['dynamodb:UpdateItem', 'dynamodb:GetItem', 'dynamodb:Query']) {
      expect(await write(action, 'WORKER#team-a#orders')).toBe('ImplicitlyDenied');
    }
  });

  it('SEC-02: grantProduce sends to the Host’s queues (or the named ones) and nothing else of SQS', async () => {
    const q = queueArn('takoform-host_q-orders');
    expect(await simulate(roles.producer!, 'sqs:SendMessage', q)).toBe('Allowed');
    expect(await simulate(roles.producer!, 'sqs:SendMessage', queueArn('other-q'))).toBe('ImplicitlyDenied');
    expect(await simulate(roles.producer!, 'sqs:ReceiveMessage', q)).toBe('ImplicitlyDenied');
    expect(await simulate(roles.oneQueue!, 'sqs:SendMessage', q)).toBe('Allowed');
    expect(await simulate(roles.oneQueue!, 'sqs:SendMessage', queueArn('takoform-host_q-other'))).toBe(
      'ImplicitlyDenied',
    );
  });
});
