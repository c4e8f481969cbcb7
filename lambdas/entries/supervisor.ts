/**
 * Lambda entry of the dispatcher supervisor, run every minute by an EventBridge schedule: one
 * supervision round (`supervision.ts`, the control loop's periodic part, which the local Host
 * runs too) — recover expired batches, start lanes for a visible backlog that no lane is
 * receiving — plus what only AWS has: the oldest message age and the metrics the alarms watch —
 * and then the background refresh of Resources' `observed` (`engine/resource-observer.ts`).
 *
 * Consumers in `stopping` are not in the active index: their expired batches are recovered by the
 * executor, whose reconcile of the consumer's delete asks for in-flight batches (which recovers
 * expired ones first).
 */
import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { TagQueueCommand } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { withCallRecorder } from '../adapters/aws/call-recorder.ts';
import { QUEUE_TAGS } from '../adapters/aws/sqs-queue-backend.ts';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import {
  errorFields,
  MetricUnit,
  type Observability,
  observability,
} from '../composition/aws-observability.ts';
import type { QueueTarget } from '../delivery/ports.ts';
import { type SupervisionResult, superviseRound } from '../delivery/supervision.ts';
import { HOST_METRICS, hostQueuesOnly, QUEUE_NAME_LABEL, sqsSearchExpression } from '../shared/aws-env.ts';

export interface SupervisorDeps {
  host: AwsHost;
  /** For the oldest message age (SQS's own metric, found by queue name prefix). */
  cloudwatch?: Pick<CloudWatchClient, 'send'>;
  /**
   * Read the oldest message age every this many minutes (default 5). GetMetricData is billed
   * per metric returned, i.e. per queue: every 5 minutes keeps it near $0.09 per queue-month.
   */
  oldestAgeEveryMinutes?: number;
  clock?: () => number;
}

export interface SupervisorResult extends SupervisionResult {
  oldestMessageAgeSeconds: number | undefined;
  /** Resources whose `observed` was looked at and written this minute. */
  observed: { seen: number; refreshed: number };
}

/** The largest `ApproximateAgeOfOldestMessage` over the Host's queues in the last minutes. */
async function oldestMessageAge(deps: SupervisorDeps, now: number): Promise<number | undefined> {
  const every = deps.oldestAgeEveryMinutes ?? 5;
  if (!deps.cloudwatch || Math.floor(now / 60_000) % every !== 0) return undefined;
  const prefix = deps.host.config.queueNamePrefix;
  const search = sqsSearchExpression(prefix, 'ApproximateAgeOfOldestMessage', 'Maximum', 300);
  const out = await deps.cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(now - 15 * 60_000),
      EndTime: new Date(now),
      // One series per queue, labelled with its name, so another Host's queues that the search
      // also finds are dropped here (see sqsSearchExpression).
      MetricDataQueries: [{ Id: 'queues', Expression: search, Label: QUEUE_NAME_LABEL, ReturnData: true }],
      ScanBy: 'TimestampDescending',
    }),
  );
  const latest = hostQueuesOnly(out.MetricDataResults ?? [], prefix).flatMap(
    (r) => r.Values?.slice(0, 1) ?? [],
  );
  return latest.length > 0 ? Math.max(...latest) : undefined;
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

/** A scheduled event older than this is not trusted to name a round (its lanes are long over). */
const ROUND_TIME_MAX_AGE_MS = 60 * 60_000;

/**
 * The minute a round was scheduled for: the EventBridge event's `time`, identical in every
 * delivery of one event, so a redelivered round names its lanes as the first did. Anything else
 * (a manual invoke, an unparsable or implausible time) runs as a round of `now`.
 */
export function roundTime(event: unknown, now: number): number {
  const time = (event as { time?: unknown } | null)?.time;
  const at = typeof time === 'string' && time.length <= 40 ? Date.parse(time) : Number.NaN;
  return Number.isFinite(at) && at <= now + 60_000 && now - at <= ROUND_TIME_MAX_AGE_MS ? at : now;
}

/**
 * One supervision round over every active consumer; `roundAt` (epoch ms, default the clock's
 * now) names the lanes it starts.
 */
export async function superviseOnce(
  deps: SupervisorDeps,
  obs?: Observability,
  roundAt?: number,
): Promise<SupervisorResult> {
  const { host } = deps;
  const now = (deps.clock ?? Date.now)();
  const round = await superviseRound(
    {
      loop: host.host.loop,
      attachments: host.host.attachments,
      queueDirectory: host.host.queueDirectory,
      messages: host.host.messages,
      beforeQueue: (queue) => ensureSpaceTag(host, queue),
    },
    roundAt ?? now,
  );
  let oldestMessageAgeSeconds: number | undefined;
  try {
    oldestMessageAgeSeconds = await oldestMessageAge(deps, now);
  } catch (err) {
    obs?.logger.warn('could not read the oldest message age', { err: errorFields(err) });
  }
  let observed = { seen: 0, refreshed: 0 };
  try {
    observed = await host.host.observer.observeOnce();
  } catch (err) {
    obs?.logger.warn('could not refresh observed', { err: errorFields(err) });
  }
  return { ...round, oldestMessageAgeSeconds, observed };
}

export function createSupervisorHandler(deps: SupervisorDeps, obs: Observability) {
  return async (event?: unknown) => {
    const r = await superviseOnce(deps, obs, roundTime(event, (deps.clock ?? Date.now)()));
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

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => {
    if (!host.config.dispatcherArn)
      throw new Error('invalid Takoform Host configuration: TAKOFORM_DISPATCHER_ARN is not set');
    return createSupervisorHandler(
      { host, cloudwatch: withCallRecorder(new CloudWatchClient({}), 'cloudwatch') },
      obs,
    );
  });
  return (await ready)(event);
};
