/**
 * The entry of every ModuleWorkerFunction bundle. `takoform-worker-module` is not a package: the
 * construct points it at the user's module with esbuild's `alias`, so each worker's bundle holds
 * exactly its own module, this runtime adapter and their dependencies. The runtime's log lines go
 * through Powertools Logger, with the invocation's request id.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import worker from 'takoform-worker-module';
import { powertoolsSink } from '../composition/powertools-log.ts';
import { setLogSink } from '../shared/log.ts';
import { createQueueWorkerHandler, workerConfigFromEnv } from '../worker-runtime/lambda-adapter.ts';

const logger = new Logger({ serviceName: 'takoform-worker-runtime' });
setLogSink(powertoolsSink(logger));
const run = createQueueWorkerHandler(worker, workerConfigFromEnv(process.env));

export const handler = (event: unknown, context: Context) => {
  logger.addContext(context);
  return run(event, context);
};
