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
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { Context } from 'aws-lambda';
import { withCallRecorder } from '../adapters/aws/call-recorder.ts';
import { awsHostFromEnv } from '../composition/aws-host.ts';
import {
  logThroughPowertools,
  MetricUnit,
  type Observability,
  observability,
} from '../composition/aws-observability.ts';
import { type SupervisorDeps, superviseOnce } from '../composition/aws-supervisor.ts';
import { HOST_METRICS } from '../shared/aws-env.ts';
import { log } from '../shared/log.ts';

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

export function createSupervisorHandler(deps: SupervisorDeps, obs: Observability) {
  return async (event?: unknown, context?: Pick<Context, 'getRemainingTimeInMillis'>) => {
    const now = (deps.clock ?? Date.now)();
    const r = await superviseOnce(
      context ? { ...deps, endsAt: now + context.getRemainingTimeInMillis() } : deps,
      roundTime(event, now),
    );
    if (r.skipped) {
      // Another round holds the lease and publishes the figures: zeros here would mislead the alarms.
      log.info('supervision round skipped: another round is under way');
      return r;
    }
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
    log.info('supervision round', { ...r });
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
    logThroughPowertools(obs);
    return createSupervisorHandler(
      { host, cloudwatch: withCallRecorder(new CloudWatchClient({}), 'cloudwatch') },
      obs,
    );
  });
  return (await ready)(event, context);
};
