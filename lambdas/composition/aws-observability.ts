/**
 * Powertools for AWS Lambda, set up once per function: structured JSON logs (with the request
 * id and whatever keys a handler appends: operation ids, batch ids, message ids) and metrics as
 * CloudWatch embedded metric format (EMF) lines, which need no PutMetricData permission.
 *
 * Nothing secret is ever logged: errors are reduced to their name and code (as `shared/log.ts`
 * does), and batch credentials, API keys and message bodies are never passed to the logger.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { AWS_ENV, HOST_DIMENSION, METRICS_NAMESPACE } from '../shared/aws-env.ts';

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
