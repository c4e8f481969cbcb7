/**
 * Lambda entry of the dispatcher supervisor, run every minute by an EventBridge schedule. For
 * each active consumer it recovers expired batches and makes sure a dispatcher execution runs
 * while its queue has visible messages; it also reports the backlog, the dead-letter depth and the
 * oldest message age, which the alarms watch.
 *
 * Executions are named `<consumerUid>-g<generation>-t<minute>`: one ListExecutions call shows
 * which consumer generations have one running, and a second start in the same minute is refused
 * by Step Functions (`ExecutionAlreadyExists`), which is fine. Consumers in `stopping` are not in
 * the active index: their expired batches are recovered by the executor, whose reconcile of the
 * consumer's delete asks for in-flight batches (which recovers expired ones first).
 */
import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { ListExecutionsCommand, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { GetQueueAttributesCommand, TagQueueCommand } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { QUEUE_TAGS } from '../adapters/aws/sqs-queue-backend.ts';
import { type AwsHost, awsHostFromEnv } from '../runtime/aws-host.ts';
import { errorFields, MetricUnit, type Observability, observability } from '../runtime/aws-observability.ts';
import { HOST_METRICS, sqsSearchExpression } from '../shared/aws-env.ts';
import { dispatcherInput, MAX_LANES_PER_EXECUTION } from './dispatcher-definition.ts';
import type { QueueTarget } from './ports.ts';

export interface SupervisorDeps {
  host: AwsHost;
  stateMachineArn: string;
  sfn: Pick<SFNClient, 'send'>;
  /** For the oldest message age (SQS's own metric, found by queue name prefix). */
  cloudwatch?: Pick<CloudWatchClient, 'send'>;
  /**
   * Read the oldest message age every this many minutes (default 5). GetMetricData is billed
   * per metric returned, i.e. per queue: every 5 minutes keeps it near $0.09 per queue-month.
   */
  oldestAgeEveryMinutes?: number;
  clock?: () => number;
}

export interface SupervisorResult {
  consumers: number;
  started: number;
  recovered: number;
  backlog: number;
  deadLetter: number;
  oldestMessageAgeSeconds: number | undefined;
}

/** The part of an execution name that identifies a consumer generation. */
export const executionKey = (consumerUid: string, generation: number) => `${consumerUid}-g${generation}`;

/** `<consumerUid>-g<generation>-t<minute>`: at most one start per consumer generation and minute. */
export const executionName = (consumerUid: string, generation: number, now: number) =>
  `${executionKey(consumerUid, generation)}-t${Math.floor(now / 60_000)}`;

/** How many lanes an execution gets: enough for the backlog, within maxConcurrency and the Map. */
export function laneCount(visible: number, maxBatchSize: number, maxConcurrency: number): number {
  const wanted = Math.ceil(visible / Math.max(1, maxBatchSize));
  return Math.max(1, Math.min(wanted, maxConcurrency, MAX_LANES_PER_EXECUTION));
}

const isAlreadyExists = (err: unknown) => (err as { name?: string })?.name === 'ExecutionAlreadyExists';

async function runningKeys(deps: SupervisorDeps): Promise<Set<string>> {
  const keys = new Set<string>();
  let nextToken: string | undefined;
  for (let page = 0; page < 10; page++) {
    const out = await deps.sfn.send(
      new ListExecutionsCommand({
        stateMachineArn: deps.stateMachineArn,
        statusFilter: 'RUNNING',
        maxResults: 1000,
        nextToken,
      }),
    );
    for (const e of out.executions ?? []) {
      const name = e.name ?? '';
      const cut = name.lastIndexOf('-t');
      if (cut > 0) keys.add(name.slice(0, cut));
    }
    nextToken = out.nextToken;
    if (!nextToken) break;
  }
  return keys;
}

async function queueCounts(host: AwsHost, sqsUrl: string): Promise<{ visible: number; delayed: number }> {
  const out = await host.clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: sqsUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'],
    }),
  );
  const a = out.Attributes ?? {};
  return {
    visible: Number(a.ApproximateNumberOfMessages ?? 0) || 0,
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0) || 0,
  };
}

/** The largest `ApproximateAgeOfOldestMessage` over the Host's queues in the last minutes. */
async function oldestMessageAge(deps: SupervisorDeps, now: number): Promise<number | undefined> {
  const every = deps.oldestAgeEveryMinutes ?? 5;
  if (!deps.cloudwatch || Math.floor(now / 60_000) % every !== 0) return undefined;
  const search = sqsSearchExpression(
    deps.host.config.queueNamePrefix,
    'ApproximateAgeOfOldestMessage',
    'Maximum',
    300,
  );
  const out = await deps.cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(now - 15 * 60_000),
      EndTime: new Date(now),
      MetricDataQueries: [
        { Id: 'queues', Expression: search, ReturnData: false },
        { Id: 'oldest', Expression: 'MAX(queues)', ReturnData: true },
      ],
      ScanBy: 'TimestampDescending',
    }),
  );
  const values = out.MetricDataResults?.find((r) => r.Id === 'oldest')?.Values ?? [];
  return values.length > 0 ? values[0] : undefined;
}

/** Queues this function instance has tagged already. */
const spaceTagged = new Set<string>();

/**
 * Workers may receive only from queues tagged with their Space. Queues created by a Host version
 * before that tag get it here, once per function instance, so an upgrade never stops delivery
 * until each queue Resource happens to be updated.
 */
async function ensureSpaceTag(host: AwsHost, queue: QueueTarget): Promise<void> {
  if (spaceTagged.has(queue.sqsUrl)) return;
  await host.clients.sqs.send(
    new TagQueueCommand({
      QueueUrl: queue.sqsUrl,
      Tags: { [QUEUE_TAGS.resourceUid]: queue.queueUid, [QUEUE_TAGS.space]: queue.space },
    }),
  );
  spaceTagged.add(queue.sqsUrl);
}

/** One supervision round over every active consumer. */
export async function superviseOnce(deps: SupervisorDeps, obs?: Observability): Promise<SupervisorResult> {
  const { host } = deps;
  const now = (deps.clock ?? Date.now)();
  const active = await host.host.attachments.listActive();
  const running = await runningKeys(deps);
  const result: SupervisorResult = {
    consumers: active.length,
    started: 0,
    recovered: 0,
    backlog: 0,
    deadLetter: 0,
    oldestMessageAgeSeconds: undefined,
  };
  for (const a of active) {
    try {
      result.recovered += await host.host.delivery.recoverExpired(a.consumerUid);
      const attachment = await host.host.attachments.get(a.consumerUid);
      if (attachment?.state !== 'active') continue;
      const spec = attachment.spec;
      const queue = await host.host.queueDirectory.queue(spec.queue.resourceUid);
      const dlqUid = spec.deadLetterQueue?.resourceUid;
      const dlq = dlqUid ? await host.host.queueDirectory.queue(dlqUid) : undefined;
      if (dlq) {
        const c = await queueCounts(host, dlq.sqsUrl);
        result.deadLetter += c.visible + c.delayed;
      }
      if (!queue) continue;
      await ensureSpaceTag(host, queue);
      const { visible } = await queueCounts(host, queue.sqsUrl);
      result.backlog += visible;
      // An idle queue costs nothing: no execution until a message is visible.
      if (visible === 0 || running.has(executionKey(a.consumerUid, attachment.generation))) continue;
      const lanes = laneCount(visible, spec.maxBatchSize, spec.maxConcurrency);
      try {
        await deps.sfn.send(
          new StartExecutionCommand({
            stateMachineArn: deps.stateMachineArn,
            name: executionName(a.consumerUid, attachment.generation, now),
            input: JSON.stringify(dispatcherInput(a.consumerUid, attachment.generation, lanes)),
          }),
        );
        result.started++;
        obs?.logger.info('dispatcher started', { consumerUid: a.consumerUid, lanes, visible });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
    } catch (err) {
      // One consumer's trouble never stops the others; the next round tries again.
      obs?.logger.warn('supervision of a consumer failed', {
        consumerUid: a.consumerUid,
        err: errorFields(err),
      });
    }
  }
  try {
    result.oldestMessageAgeSeconds = await oldestMessageAge(deps, now);
  } catch (err) {
    obs?.logger.warn('could not read the oldest message age', { err: errorFields(err) });
  }
  return result;
}

export function createSupervisorHandler(deps: SupervisorDeps, obs: Observability) {
  return async () => {
    const r = await superviseOnce(deps, obs);
    obs.metrics.addMetric(HOST_METRICS.dispatcherStarts, MetricUnit.Count, r.started);
    obs.metrics.addMetric(HOST_METRICS.backlogMessages, MetricUnit.Count, r.backlog);
    obs.metrics.addMetric(HOST_METRICS.deadLetterMessages, MetricUnit.Count, r.deadLetter);
    if (r.oldestMessageAgeSeconds !== undefined) {
      obs.metrics.addMetric(
        HOST_METRICS.oldestMessageAgeSeconds,
        MetricUnit.Seconds,
        r.oldestMessageAgeSeconds,
      );
    }
    obs.metrics.publishStoredMetrics();
    obs.logger.info('supervision round', { ...r });
    return r;
  };
}

const obs = observability('takoform-supervisor');
let ready: Promise<ReturnType<typeof createSupervisorHandler>> | undefined;

export const handler = async (_event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => {
    const stateMachineArn = host.config.dispatcherArn;
    if (!stateMachineArn)
      throw new Error('invalid Takoform Host configuration: TAKOFORM_DISPATCHER_ARN is not set');
    return createSupervisorHandler(
      { host, stateMachineArn, sfn: new SFNClient({}), cloudwatch: new CloudWatchClient({}) },
      obs,
    );
  });
  return (await ready)();
};
