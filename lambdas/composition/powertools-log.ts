import type { Logger } from '@aws-lambda-powertools/logger';
import type { LogSink } from '../shared/log.ts';

/** The Host's log lines as Powertools Logger writes them (request id, cold start, function name). */
export function powertoolsSink(logger: Logger): LogSink {
  return (level, message, fields) => logger[level](message, fields);
}
