/**
 * Lambda entry of the Operation executor: triggered (asynchronously) after every acceptance and
 * by an EventBridge schedule every minute, which is the safety net for lost triggers, expired
 * leases and retries. It runs due Operations until none is due or the remaining time is short,
 * lingers briefly for Operations due within seconds, and reports Operations in `reconciling`.
 */
import type { Context } from 'aws-lambda';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import {
  logThroughPowertools,
  MetricUnit,
  type Observability,
  observability,
} from '../composition/aws-observability.ts';
import { type ExecutorRunOptions, type ExecutorRunResult, runDueOperations } from '../engine/executor-run.ts';
import { HOST_METRICS } from '../shared/aws-env.ts';
import { log } from '../shared/log.ts';

export type { ExecutorRunOptions, ExecutorRunResult };

/** The executor's run over the AWS Host. */
export function runExecutor(
  host: AwsHost,
  remainingMs: () => number,
  opts: ExecutorRunOptions = {},
): Promise<ExecutorRunResult> {
  return runDueOperations(
    {
      runDue: () => host.host.executor.runDue(),
      census: (at) => host.operationCensus(at),
    },
    remainingMs,
    opts,
  );
}

export function createExecutorHandler(host: AwsHost, obs: Observability, opts: ExecutorRunOptions = {}) {
  return async (event: unknown, context: Pick<Context, 'getRemainingTimeInMillis'>) => {
    const trigger = (event as { operationId?: unknown } | null)?.operationId;
    const keys = typeof trigger === 'string' ? { operationId: trigger.slice(0, 64) } : {};
    return log.withKeys(keys, () => runAndReport(host, obs, context, opts));
  };
}

async function runAndReport(
  host: AwsHost,
  obs: Observability,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
  opts: ExecutorRunOptions,
): Promise<ExecutorRunResult> {
  const result = await runExecutor(host, () => context.getRemainingTimeInMillis(), opts);
  obs.metrics.addMetric(HOST_METRICS.operationSteps, MetricUnit.Count, result.steps);
  obs.metrics.addMetric(HOST_METRICS.operationsReconciling, MetricUnit.Count, result.reconciling);
  obs.metrics.addMetric(HOST_METRICS.operationsStuckReconciling, MetricUnit.Count, result.stuckReconciling);
  obs.metrics.publishStoredMetrics();
  log.info('executor run', { ...result });
  return result;
}

const obs = observability('takoform-executor');
let ready: Promise<ReturnType<typeof createExecutorHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => {
    logThroughPowertools(obs);
    return createExecutorHandler(host, obs);
  });
  return (await ready)(event, context);
};
