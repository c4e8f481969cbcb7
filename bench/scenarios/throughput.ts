/**
 * Throughput: a pre-filled queue drained through the real dispatcher (the production ASL under
 * aws-local-stepfunctions, slots in DynamoDB, the runner, worker threads) with a no-op worker,
 * against a raw baseline on the same SQS server: `concurrency` loops that receive ≤10 at a time
 * until they hold `batchSize` messages, then delete them with DeleteMessageBatch — the SQS work
 * the Host cannot avoid, and nothing else.
 */
import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
} from '@aws-sdk/client-sqs';
import { sqsClient } from '../../lambdas/adapters/aws/clients.ts';
import { encodeEnvelope } from '../../lambdas/delivery/envelope.ts';
import { newMessageId } from '../../lambdas/delivery/producer.ts';
import { createBenchHost } from '../support/bench-host.ts';
import { type CpuSpent, cpuMark, cpuSince } from '../support/cpu.ts';
import { Meter, type Tally } from '../support/meter.ts';
import type { Endpoints } from '../support/standins.ts';
import { until } from '../support/stats.ts';

/** How long a drain's lanes get to end by themselves after the last message (idle wait 1 s). */
const LANES_END_WITHIN_MS = 15_000;

import { NOOP_WORKER } from '../support/workers.ts';

export interface Cell {
  batchSize: number;
  concurrency: number;
  messages: number;
}

export interface HostDrainSample {
  ok: boolean;
  messages: number;
  delivered: number;
  batches: number;
  seconds: number;
  perSecond: number;
  /** SDK calls etc. of the pre-fill (the producer's sendBatch calls). */
  prefill: Tally;
  /** From the dispatcher's start until the last message was finalised. */
  drain: Tally;
  /** After the drain until every lane ended (each ends after one empty long poll). */
  tail: Tally;
  /** CPU of the bench process and the stand-ins over the drain (absent in older results). */
  cpu?: CpuSpent;
}

export interface BaselineSample {
  ok: boolean;
  messages: number;
  deleted: number;
  seconds: number;
  perSecond: number;
  receives: number;
  deletes: number;
  /** Batches the loops deleted (absent in results written before it was counted). */
  batches?: number;
  /** CPU of the bench process and the stand-ins over the drain (absent in older results). */
  cpu?: CpuSpent;
}

/** Bodies of the same size as the Host's envelopes for a `bodyBytes`-byte message. */
function envelopeBody(bodyBytes: number): string {
  return encodeEnvelope({
    id: newMessageId(),
    ts: Date.now(),
    body: new Uint8Array(bodyBytes).fill(97),
    commit: `c${randomBytes(24).toString('base64url')}`,
  });
}

export async function hostDrain(
  endpoints: Endpoints,
  cell: Cell,
  timeoutMs: number,
): Promise<HostDrainSample> {
  const meter = new Meter();
  const bench = await createBenchHost(endpoints, { meter, idleWaitSeconds: 1 });
  try {
    const { queue } = await bench.setupConsumer('tp', NOOP_WORKER, {
      maxBatchSize: cell.batchSize,
      maxBatchTimeoutSeconds: 0,
      maxConcurrency: cell.concurrency,
    });
    meter.reset();
    await bench.prefill(queue, cell.messages);
    const prefill = meter.reset();
    let delivered = 0;
    let batches = 0;
    let endedAt = 0;
    let drain: Tally | undefined;
    let cpu: CpuSpent | undefined;
    bench.onFinalized((n) => {
      delivered += n;
      batches++;
      if (!drain && delivered >= cell.messages) {
        endedAt = performance.now();
        drain = meter.reset();
        cpu = cpuSince(cpuAtStart);
      }
    });
    const cpuAtStart = cpuMark();
    const startedAt = performance.now();
    const dispatcher = bench.startDispatcher({ idleWaitSeconds: 1, supervisorMs: 200 });
    const ok = await until(() => drain !== undefined, timeoutMs, 2);
    if (!ok) {
      endedAt = performance.now();
      drain = meter.reset();
      cpu = cpuSince(cpuAtStart);
    }
    // The burst's cost runs until its lanes have ended by themselves (their last idle wait, the
    // end of each execution): on AWS a burst pays for those too. Then the delivery side stops.
    await until(() => dispatcher.running().length === 0, LANES_END_WITHIN_MS, 20);
    await dispatcher.stop(10_000);
    const tail = meter.reset();
    const seconds = (endedAt - startedAt) / 1000;
    return {
      ok,
      messages: cell.messages,
      delivered,
      batches,
      seconds,
      perSecond: delivered / seconds,
      prefill,
      drain: drain as Tally,
      tail,
      ...(cpu ? { cpu } : {}),
    };
  } finally {
    await bench.close();
  }
}

export async function baselineDrain(
  endpoints: Endpoints,
  cell: Cell,
  timeoutMs: number,
  bodyBytes = 64,
): Promise<BaselineSample> {
  const sqs = sqsClient(endpoints.sqs);
  const created = await sqs.send(
    new CreateQueueCommand({ QueueName: `bl-${randomBytes(6).toString('hex')}` }),
  );
  const url = created.QueueUrl as string;
  try {
    // Pre-fill: SendMessageBatch of 10, four at a time, bodies as large as the Host's envelopes.
    let left = cell.messages;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (left > 0) {
          const n = Math.min(10, left);
          left -= n;
          await sqs.send(
            new SendMessageBatchCommand({
              QueueUrl: url,
              Entries: Array.from({ length: n }, (_, i) => ({
                Id: String(i),
                MessageBody: envelopeBody(bodyBytes),
              })),
            }),
          );
        }
      }),
    );
    let deleted = 0;
    let receives = 0;
    let deletes = 0;
    let batches = 0;
    let endedAt = 0;
    const deadline = performance.now() + timeoutMs;
    const cpuAtStart = cpuMark();
    let cpu: CpuSpent | undefined;
    const startedAt = performance.now();
    const loop = async () => {
      while (performance.now() < deadline) {
        const handles: string[] = [];
        while (handles.length < cell.batchSize) {
          receives++;
          const out = await sqs.send(
            new ReceiveMessageCommand({
              QueueUrl: url,
              MaxNumberOfMessages: Math.min(10, cell.batchSize - handles.length),
              WaitTimeSeconds: 0,
              VisibilityTimeout: 300,
              MessageSystemAttributeNames: ['SentTimestamp'],
            }),
          );
          const got = (out.Messages ?? []).flatMap((m) => (m.ReceiptHandle ? [m.ReceiptHandle] : []));
          if (got.length === 0) break;
          handles.push(...got);
        }
        if (handles.length === 0) return;
        batches++;
        for (let i = 0; i < handles.length; i += 10) {
          const part = handles.slice(i, i + 10);
          deletes++;
          const out = await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: url,
              Entries: part.map((h, n) => ({ Id: String(n), ReceiptHandle: h })),
            }),
          );
          deleted += out.Successful?.length ?? 0;
        }
        if (deleted >= cell.messages && endedAt === 0) {
          endedAt = performance.now();
          cpu = cpuSince(cpuAtStart);
        }
      }
    };
    await Promise.all(Array.from({ length: cell.concurrency }, loop));
    const ok = deleted >= cell.messages;
    if (endedAt === 0) endedAt = performance.now();
    cpu ??= cpuSince(cpuAtStart);
    const seconds = (endedAt - startedAt) / 1000;
    return {
      ok,
      messages: cell.messages,
      deleted,
      seconds,
      perSecond: deleted / seconds,
      receives,
      deletes,
      batches,
      cpu,
    };
  } finally {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    sqs.destroy();
  }
}
