/**
 * Powertools for AWS Lambda, set up once per function: structured JSON logs (with the request
 * id, function name and cold start, and the keys a handler scopes with `log.withKeys`: consumer,
 * batch, operation) and metrics as CloudWatch embedded metric format (EMF) lines, which need no
 * PutMetricData permission. Every line of the function, the core's included, goes through the
 * Host's one logger (`shared/log.ts`), whose sink this makes Powertools Logger.
 *
 * Nothing secret is ever logged: errors are reduced to their name and code, and batch
 * credentials, API keys and message bodies are never passed to the logger.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { AWS_ENV, HOST_DIMENSION, METRICS_NAMESPACE } from '../shared/aws-env.ts';
import { setLogSink } from '../shared/log.ts';
import { powertoolsSink } from './powertools-log.ts';

export { MetricUnit };

export interface Observability {
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/**
 * Logger and metrics of one function. With `TAKOFORM_HOST_NAME` set (the constructs set it on
 * every Host function), each metric also carries the `host` dimension, so Hosts sharing an
 * account and region keep separate series.
 */
export function observability(serviceName: string, env: NodeJS.ProcessEnv = process.env): Observability {
  const host = env[AWS_ENV.hostName];
  if (host !== undefined && !/^[a-z0-9-]{1,40}$/.test(host)) {
    throw new Error(`${AWS_ENV.hostName} must be 1..40 characters of [a-z0-9-]`);
  }
  return {
    logger: new Logger({ serviceName }),
    metrics: new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName,
      ...(host ? { defaultDimensions: { [HOST_DIMENSION]: host } } : {}),
    }),
  };
}

/** An error as logs may show it: its name and code, never its message (which may carry input). */
export function errorFields(err: unknown): { name: string; code?: string } {
  if (!(err instanceof Error)) return { name: typeof err };
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? { name: err.name, code } : { name: err.name };
}

/**
 * Makes `obs.logger` the sink of every line of this function, the core's included. Called by a
 * Lambda entry's handler when it composes the Host (at cold start), not on import, so tests that
 * drive the entries in process keep their lines on stderr.
 */
export function logThroughPowertools(obs: Observability): void {
  setLogSink(powertoolsSink(obs.logger));
}
