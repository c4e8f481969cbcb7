/**
 * Lambda entry of the Operation executor: triggered (asynchronously) after every acceptance and
 * by an EventBridge schedule every minute, which is the safety net for lost triggers, expired
 * leases and retries. It runs due Operations until none is due or the remaining time is short,
 * lingers briefly for Operations due within seconds, and reports Operations in `reconciling`.
 */
import type { Context } from 'aws-lambda';
import { type OperationCensus, operationCensus } from '../adapters/aws/dynamodb-operation-census.ts';
import { type AwsHost, awsHostFromEnv } from '../composition/aws-host.ts';
import { MetricUnit, type Observability, observability } from '../composition/aws-observability.ts';
import { HOST_METRICS } from '../shared/aws-env.ts';

export interface ExecutorRunOptions {
  /** Stop starting rounds when less than this is left (default 20 s: one round's lease work). */
  marginMs?: number;
  /** Wait for Operations due within this long before returning (default 10 s). */
  lingerMs?: number;
  /** An Operation counts as stuck after this long in `reconciling` (default 15 min). */
  stuckAfterMs?: number;
  clock?: () => number;
}

export interface ExecutorRunResult {
  steps: number;
  rounds: number;
  reconciling: number;
  stuckReconciling: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs due Operations while time remains; returns what it did and what it saw. */
export async function runExecutor(
  host: AwsHost,
  remainingMs: () => number,
  opts: ExecutorRunOptions = {},
): Promise<ExecutorRunResult> {
  const clock = opts.clock ?? Date.now;
  const margin = opts.marginMs ?? 20_000;
  const linger = opts.lingerMs ?? 10_000;
  const census = () =>
    operationCensus(host.clients.dynamodb, host.config.tableName, {
      now: clock(),
      stuckAfterMs: opts.stuckAfterMs ?? 15 * 60_000,
    });
  let steps = 0;
  let rounds = 0;
  let last: OperationCensus | undefined;
  while (remainingMs() > margin) {
    const worked = await host.host.executor.runDue();
    rounds++;
    steps += worked;
    if (worked > 0) continue;
    last = await census();
    const wait = last.nextDueAt === undefined ? Number.POSITIVE_INFINITY : last.nextDueAt - clock();
    if (wait > linger || remainingMs() - Math.max(0, wait) <= margin) break;
    await sleep(Math.max(50, wait));
  }
  last ??= await census();
  return { steps, rounds, reconciling: last.reconciling, stuckReconciling: last.stuckReconciling };
}

export function createExecutorHandler(host: AwsHost, obs: Observability, opts: ExecutorRunOptions = {}) {
  return async (event: unknown, context: Pick<Context, 'getRemainingTimeInMillis'>) => {
    const trigger = (event as { operationId?: unknown } | null)?.operationId;
    if (typeof trigger === 'string') obs.logger.appendKeys({ operationId: trigger.slice(0, 64) });
    const result = await runExecutor(host, () => context.getRemainingTimeInMillis(), opts);
    obs.metrics.addMetric(HOST_METRICS.operationSteps, MetricUnit.Count, result.steps);
    obs.metrics.addMetric(HOST_METRICS.operationsReconciling, MetricUnit.Count, result.reconciling);
    obs.metrics.addMetric(HOST_METRICS.operationsStuckReconciling, MetricUnit.Count, result.stuckReconciling);
    obs.metrics.publishStoredMetrics();
    obs.logger.info('executor run', { ...result });
    obs.logger.removeKeys(['operationId']);
    return result;
  };
}

const obs = observability('takoform-executor');
let ready: Promise<ReturnType<typeof createExecutorHandler>> | undefined;

export const handler = async (event: unknown, context: Context) => {
  obs.logger.addContext(context);
  ready ??= awsHostFromEnv().then((host) => createExecutorHandler(host, obs));
  return (await ready)(event, context);
};
