/**
 * The dispatcher exactly as `cdk synth` renders it, executed by the local Step Functions stand-in with the
 * real Lambda handlers behind its Task states: the dispatcher-step handler (AcquireSlot,
 * RecoverBatch), the worker runtime adapter (InvokeWorker) and, behind the worker, the batch-host
 * handler — all over the AWS composition against DynamoDB Local and the SQS stand-in.
 */
import { readFileSync } from 'node:fs';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// Powertools logs of the entries stay quiet here; they are asserted on nowhere.
vi.hoisted(() => {
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

import type { BatchHostRequest } from '../../../lambdas/delivery/batch-host-protocol.ts';
import {
  DISPATCHER_TASKS,
  dispatcherDefinition,
  dispatcherInput,
} from '../../../lambdas/delivery/dispatcher-definition.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import type { LaneKind } from '../../../lambdas/delivery/lane-kinds.ts';
import { createBatchHostHandler } from '../../../lambdas/entries/batch-host.ts';
import { createDispatcherStepHandler } from '../../../lambdas/entries/dispatcher-step.ts';
import { LocalStateMachine } from '../../../lambdas/local/standins/local-step-functions.ts';
import { createQueueWorkerHandler } from '../../../lambdas/worker-runtime/lambda-adapter.ts';
import { remoteBatchHost } from '../../../lambdas/worker-runtime/remote-batch-host.ts';
import { TakoformHostStack } from '../../../lib/host-stack.ts';
import { type AwsTestHost, createAwsTestHost, resolveDefinition } from '../../support/aws-host-harness.ts';
import { waitFor } from '../../support/delivery-harness.ts';
import { FORMS } from '../../support/host-harness.ts';

const CDK_CONTEXT = JSON.parse(readFileSync(new URL('../../../cdk.json', import.meta.url), 'utf8')).context;
const arnOf = (logicalId: string) => `arn:aws:lambda:us-east-1:000000000000:function:${logicalId}`;

/**
 * The DefinitionString of the synthesized dispatcher of one kind (Standard or Express), intrinsics
 * resolved, and the step function's ARN.
 */
function synthesizedDispatcher(kind: LaneKind = 'standard') {
  const app = new App({ context: { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [] } });
  const stack = new TakoformHostStack(app, 'TakoformHost');
  const template = Template.fromStack(stack);
  const machine = Object.values(template.findResources('AWS::StepFunctions::StateMachine')).find(
    (m) => m.Properties.StateMachineType === kind.toUpperCase(),
  );
  const stepId = stack.getLogicalId(stack.host.delivery.stepFunction.fn.node.defaultChild as never);
  return {
    definition: resolveDefinition(machine?.Properties.DefinitionString, arnOf),
    stepArn: arnOf(stepId),
  };
}

describe('OPS-01: the synthesized dispatcher definition', () => {
  let t: AwsTestHost;
  beforeAll(async () => {
    t = await createAwsTestHost();
  });
  afterAll(() => undefined);

  it('OPS-01: each equals dispatcherDefinition(...) of its kind with the step function ARN filled in', () => {
    for (const kind of ['standard', 'express'] as const) {
      const { definition, stepArn } = synthesizedDispatcher(kind);
      expect(definition).toEqual(dispatcherDefinition({ stepFunction: stepArn }, kind));
    }
  });

  it.each(['standard', 'express'] as const)(
    'OPS-01 DL-05 AQ-04: delivers a message end to end through the synthesized %s ASL, the real handlers and a producer binding',
    async (kind) => {
      const { definition, stepArn } = synthesizedDispatcher(kind);
      const workerArn = `arn:aws:lambda:us-east-1:000000000000:function:tq-wkr-echo-${kind}`;
      const n = (name: string) => `${name}-${kind}`;

      // Queues, worker registration (as the custom resource writes it), worker Resource, consumer.
      const inQ = await t.create(FORMS.queue, 'team', n('in-q'), { messageRetentionSeconds: 3600 });
      const outQ = await t.create(FORMS.queue, 'team', n('out-q'), { messageRetentionSeconds: 3600 });
      await t.registerWorker({
        space: 'team',
        name: n('echo'),
        functionArn: workerArn,
        vars: { PREFIX: 'echo:' },
        queueProducers: { OUT: { queue: n('out-q') } },
      });
      const worker = await t.create(FORMS.moduleWorker, 'team', n('echo'), {});
      await t.settle();
      const consumer = await t.create(FORMS.consumer, 'team', n('echo-consumer'), {
        queue: { resourceUid: inQ.body.resourceUid },
        worker: { resourceUid: worker.body.resourceUid },
        maxBatchSize: 10,
        maxBatchTimeoutSeconds: 0,
        maxConcurrency: 1,
        maxRetries: 2,
        retryDelaySeconds: 0,
      });
      expect(consumer.status).toBe(202);
      await t.settle();
      const ready = await t.request('GET', `/resources/${worker.body.resourceUid}`);
      expect(ready.body.observed).toMatchObject({ ready: true });

      // A message through the HTTP producer extension.
      const sent = await t.request('POST', `/ext/queues/v1/queues/${inQ.body.resourceUid}/messages`, {
        messages: [{ body: Buffer.from('hello').toString('base64') }],
      });
      expect(sent.status).toBe(200);
      const [messageId] = sent.body.messageIds as string[];

      // The worker module: records what it saw and sends through its binding.
      const seen: { id: string; attempts: number; text: string; envKeys: string[] }[] = [];
      const workerModule = {
        async queue(
          batch: { messages: { id: string; attempts: number; body: Uint8Array }[] },
          env: Record<string, unknown> & { PREFIX: string; OUT: { send(b: string): Promise<string> } },
        ) {
          for (const m of batch.messages) {
            const text = new TextDecoder().decode(m.body);
            seen.push({ id: m.id, attempts: m.attempts, text, envKeys: Object.keys(env).sort() });
            await env.OUT.send(`${env.PREFIX}${text}`);
          }
        },
      };
      const batchHost = createBatchHostHandler(t.host);
      const stepHandler = createDispatcherStepHandler(t.host);
      const invoked: string[] = [];
      const workerHandler = createQueueWorkerHandler(
        workerModule,
        { vars: { PREFIX: 'echo:' }, queueProducers: { OUT: { queue: n('out-q') } } },
        {
          sqs: t.sqs,
          // Every call crosses a JSON boundary, as a Lambda invocation does.
          host: () =>
            remoteBatchHost(async (req: BatchHostRequest) => batchHost(JSON.parse(JSON.stringify(req)))),
          idleWaitSeconds: 1,
        },
      );

      // The strict stand-in: AWS's history limit, Task timeouts and StartExecution name rules.
      const machine = new LocalStateMachine(definition as object);
      const stepCalls: string[] = [];
      const acquires: unknown[] = [];
      const runs: unknown[] = [];
      const step = async (payload: unknown, call: { functionName?: string }) => {
        stepCalls.push(call.functionName ?? '');
        if ((payload as { action?: string }).action === 'acquire') acquires.push(payload);
        return stepHandler(payload);
      };
      const execution = machine.start({
        name: `${consumer.body.resourceUid}-g1-test`,
        input: dispatcherInput(consumer.body.resourceUid, 1),
        taskHandlers: {
          [DISPATCHER_TASKS.acquire]: step,
          [DISPATCHER_TASKS.recover]: step,
          [DISPATCHER_TASKS.handover]: step,
          [DISPATCHER_TASKS.invoke]: async (payload, call) => {
            invoked.push(call.functionName ?? '');
            runs.push(payload);
            return workerHandler(payload, { getRemainingTimeInMillis: () => 60_000 });
          },
        },
      });
      await execution.result;
      expect(machine.stats().failed).toBe(0);

      expect(new Set(stepCalls)).toEqual(new Set([stepArn]));
      expect(new Set(invoked)).toEqual(new Set([workerArn]));
      // An Express lane's AcquireSlot learns its execution's start; its runner, the window's end.
      for (const a of acquires) expect('startedAt' in (a as object)).toBe(kind === 'express');
      for (const r of runs) expect('laneUntil' in (r as object)).toBe(kind === 'express');
      expect(seen).toEqual([{ id: messageId, attempts: 1, text: 'hello', envKeys: ['OUT', 'PREFIX'] }]);

      // Acknowledged: gone from the source queue. Produced: waiting in out-q.
      const inTarget = await t.host.host.queueDirectory.queue(inQ.body.resourceUid);
      const outTarget = await t.host.host.queueDirectory.queue(outQ.body.resourceUid);
      const left = await t.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: inTarget!.sqsUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
        }),
      );
      expect(left.Messages ?? []).toEqual([]);
      const produced = await waitFor('the produced message', async () => {
        const out = await t.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: outTarget!.sqsUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
          }),
        );
        return out.Messages?.length ? out.Messages : undefined;
      });
      expect(produced).toHaveLength(1);
      expect(new TextDecoder().decode(decodeEnvelope(produced[0]?.Body)?.body)).toBe('echo:hello');
    },
  );
});
