/**
 * Small helpers shared by the delivery acceptance tests (issue 5): consumers on queues that
 * already exist, worker sources with a recorder, and views of SQS and of the batch records.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { deliveryKeys } from '../../../lambdas/adapters/aws/dynamodb-delivery-store.ts';
import { sqsMessageQueue } from '../../../lambdas/adapters/aws/sqs-message-queue.ts';
import { type QueueInvoker, runBatch } from '../../../lambdas/delivery/batch-runner.ts';
import type { Received } from '../../../lambdas/delivery/delivery-service.ts';
import type { BatchHead, DeliveryStore } from '../../../lambdas/delivery/delivery-store.ts';
import { directBatchHost } from '../../../lambdas/delivery/direct-batch-host.ts';
import { decodeEnvelope } from '../../../lambdas/delivery/envelope.ts';
import type { QueueTarget } from '../../../lambdas/delivery/ports.ts';
import { STOPPED } from '../../../lambdas/forms/queue-consumer/attachments.ts';
import {
  type ConsumerSettings,
  type DeliveryHost,
  peakConcurrency,
  readEvents,
  recordingWorker,
  type WorkerEvent,
  waitFor,
} from '../../support/delivery-harness.ts';
import { FORMS } from '../../support/host-harness.ts';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let chain: Promise<unknown> = Promise.resolve();
/**
 * Runs Resource set-up one at a time. `host.settle()` returns when no Operation is due *for it*:
 * while a concurrent test's settle holds an Operation's lease it would return early, before the
 * Resource is live. Tests running side by side therefore create their Resources through this.
 */
export function serial<T>(fn: () => Promise<T>): Promise<T> {
  const run = chain.then(fn, fn);
  chain = run.catch(() => undefined);
  return run;
}

/** Any record a test worker wrote: the harness's start/msg/end plus the tests' own kinds. */
export interface Rec {
  ev: string;
  batch?: string;
  queue?: string;
  id?: string;
  attempts?: number;
  size?: number;
  body?: string;
  t: number;
  [k: string]: unknown;
}

export const records = (log: string) => readEvents(log) as unknown as Rec[];

/** `peakConcurrency` over records that may hold the tests' own kinds too (only start/end count). */
export const peak = (events: Rec[]) => peakConcurrency(events as unknown as WorkerEvent[]);

/** Deliveries per message id, as attempt numbers in the order the handler saw them. */
export function attemptsById(events: Rec[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const e of events) {
    if (e.ev !== 'msg' || !e.id) continue;
    out.set(e.id, [...(out.get(e.id) ?? []), e.attempts as number]);
  }
  return out;
}

/** True once every started batch has recorded its end (no handler is running). */
export const allEnded = (events: Rec[]) =>
  events.filter((e) => e.ev === 'start').length === events.filter((e) => e.ev === 'end').length;

/**
 * A worker module with the same recorder as `recordingWorker`, but whose `queue` is written by the
 * test as it is (a non-async function, a synchronous throw…). `rec(o)` appends one record.
 */
export function customWorker(log: string, queueSource: string): string {
  return `
import { appendFileSync, existsSync } from 'node:fs';
const log = ${JSON.stringify(log)};
const rec = (o) => appendFileSync(log, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
const recStart = (batch) => {
  rec({ ev: 'start', batch: batch.batchId, queue: batch.queue, size: batch.messages.length });
  for (const m of batch.messages) rec({ ev: 'msg', batch: batch.batchId, id: m.id, attempts: m.attempts });
};
export default {
  ${queueSource}
};`;
}

/** JavaScript (for a worker body) that waits until the file `flag` exists, bounded. */
export const waitForFlag = (flag: string, boundMs = 20_000) => `
  { const { existsSync } = await import('node:fs');
    const until = Date.now() + ${boundMs};
    while (!existsSync(${JSON.stringify(flag)}) && Date.now() < until) await new Promise((r) => setTimeout(r, 25)); }`;

export const raiseFlag = (flag: string) => writeFileSync(flag, '1');
export const flagRaised = (flag: string) => existsSync(flag);

/** A ModuleWorker and a QueueConsumer on a queue that already exists (settled). */
export async function consumerOn(
  d: DeliveryHost,
  name: string,
  queue: QueueTarget,
  workerSource: string,
  s: ConsumerSettings & { deadLetterQueue?: QueueTarget } = {},
  config: { vars?: Record<string, unknown>; queueProducers?: Record<string, { queue: string }> } = {},
  space = 'team',
) {
  d.writeWorker(space, `${name}-w`, workerSource, config);
  const w = await d.host.create({ form: FORMS.moduleWorker, space, name: `${name}-w`, spec: {} });
  if (w.status !== 202) throw new Error(`worker create answered ${w.status}`);
  await d.host.settle();
  const spec: Record<string, unknown> = {
    queue: { resourceUid: queue.queueUid },
    worker: { resourceUid: w.body.resourceUid },
    maxBatchSize: s.maxBatchSize ?? 10,
    maxBatchTimeoutSeconds: s.maxBatchTimeoutSeconds ?? 0,
    maxConcurrency: s.maxConcurrency ?? 2,
    maxRetries: s.maxRetries ?? 3,
    retryDelaySeconds: s.retryDelaySeconds ?? 0,
  };
  if (s.deadLetterQueue) spec.deadLetterQueue = { resourceUid: s.deadLetterQueue.queueUid };
  const c = await d.host.create({ form: FORMS.consumer, space, name, spec });
  if (c.status !== 202) throw new Error(`consumer create answered ${c.status}: ${JSON.stringify(c.body)}`);
  await d.host.settle();
  return { consumerUid: c.body.resourceUid as string, workerUid: w.body.resourceUid as string };
}

/** SQS's own counts of a queue: waiting, in flight (received, not deleted) and delayed. */
export async function queueCounts(d: DeliveryHost, queue: QueueTarget) {
  const out = await d.host.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queue.sqsUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  const a = out.Attributes ?? {};
  return {
    visible: Number(a.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
  };
}

/** Waits until SQS holds nothing of the queue: every message was deleted (acknowledged or dropped). */
export async function waitDrained(d: DeliveryHost, queue: QueueTarget, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    `queue ${queue.queueName} drained`,
    async () => {
      const c = await queueCounts(d, queue);
      return c.visible + c.inFlight + c.delayed === 0;
    },
    timeoutMs,
  );
}

/** The batch head as stored (settlements, closed flag, outcome). */
export async function batchHead(d: DeliveryHost, batchId: string): Promise<BatchHead | undefined> {
  const out = await d.host.dynamodb.send(
    new GetItemCommand({
      TableName: d.host.tableName,
      Key: marshall(deliveryKeys.head(batchId)),
      ConsistentRead: true,
    }),
  );
  return out.Item ? (unmarshall(out.Item) as BatchHead) : undefined;
}

/** The attempts record of a message, if one is kept. */
export async function attemptsRecord(d: DeliveryHost, queueUid: string, id: string) {
  const out = await d.host.dynamodb.send(
    new GetItemCommand({
      TableName: d.host.tableName,
      Key: marshall(deliveryKeys.attempts(queueUid, id)),
      ConsistentRead: true,
    }),
  );
  return out.Item
    ? (unmarshall(out.Item) as { id: string; attempts: number; notBefore?: number; acked?: boolean })
    : undefined;
}

/** The DeliveryStore instance inside the Host's DeliveryService (to inject a failure). */
export function storeOf(d: DeliveryHost): DeliveryStore {
  return (d.host.delivery as unknown as { c: { o: { store: DeliveryStore } } }).c.o.store;
}

/** Rejection name of a promise, or `resolved`. */
export async function outcomeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return err instanceof Error ? err.name : String(err);
  }
}

/** Receives what the queue has now, as a runner would (short visibility, SQS's SentTimestamp). */
export async function receiveAsRunner(d: DeliveryHost, queue: QueueTarget): Promise<Received[]> {
  const out = await d.host.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.sqsUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 30,
      MessageSystemAttributeNames: ['SentTimestamp'],
    }),
  );
  return (out.Messages ?? []).map((m) => {
    const { body: _b, ...envelope } = decodeEnvelope(m.Body) as NonNullable<
      ReturnType<typeof decodeEnvelope>
    >;
    return { receiptHandle: m.ReceiptHandle as string, receivedAt: Date.now(), envelope };
  });
}

/**
 * SQS down for some calls: the first `times` calls that `matches` fail as a refused connection
 * (inside the Host's own tries and around the SDK's retries), the others go through.
 */
export function refuseSqsCalls(
  d: DeliveryHost,
  name: string,
  matches: (
    command: string,
    input: { QueueUrl?: string; Entries?: { VisibilityTimeout?: number }[] },
  ) => boolean,
  times: number,
) {
  let refused = 0;
  d.host.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (refused < times && matches(context.commandName ?? '', args.input as never)) {
        refused++;
        throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
      }
      return next(args);
    },
    { step: 'initialize', name },
  );
  return { refused: () => refused, remove: () => d.host.sqs.middlewareStack.remove(name) };
}

/** A consumer's stop as its delete makes it (QC-08): the boundary, then the fence on its slots. */
export async function stopConsumer(d: DeliveryHost, consumerUid: string): Promise<void> {
  const attachment = await d.host.attachments.get(consumerUid);
  await d.host.attachments.stop(consumerUid);
  await d.host.delivery.fenceGenerations(consumerUid, STOPPED, attachment?.spec.maxConcurrency ?? 250);
}

/** A consumer whose handler always throws, out of retries at once, with a dead-letter queue. */
export async function alwaysFailingToDeadLetter(d: DeliveryHost, name: string) {
  const { queue, dlq } = await d.setup(name, recordingWorker(d.logFile(name), `throw new Error('always');`), {
    maxBatchSize: 5,
    maxRetries: 0,
    deadLetter: true,
  });
  if (!dlq) throw new Error('no dead-letter queue');
  return { queue, dlq };
}

/**
 * One batch of a consumer run at the service level, without a dispatcher: a slot taken, then the
 * runner with `invoker` as the handler (tests that drive time with an injected clock).
 */
export async function runOneBatch(
  d: DeliveryHost,
  consumer: { consumerUid: string; generation: number },
  invoker: QueueInvoker,
  clock: () => number,
) {
  const acquired = await d.host.delivery.acquire(consumer.consumerUid, consumer.generation);
  if (acquired.status !== 'acquired') throw new Error(`no slot: ${acquired.status}`);
  return runBatch(acquired.slot, {
    messages: sqsMessageQueue(d.host.sqs),
    host: directBatchHost(d.host.delivery, d.host.loop),
    invoker,
    idleWaitSeconds: 1,
    clock,
  });
}
