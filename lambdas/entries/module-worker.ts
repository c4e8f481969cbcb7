/**
 * The entry of every ModuleWorkerFunction bundle. `takoform-worker-module` is not a package: the
 * construct points it at the user's module with esbuild's `alias`, so each worker's bundle holds
 * exactly its own module, this runtime adapter and their dependencies.
 */
import worker from 'takoform-worker-module';
import { createQueueWorkerHandler, workerConfigFromEnv } from '../worker-runtime/lambda-adapter.ts';

export const handler = createQueueWorkerHandler(worker, workerConfigFromEnv(process.env));
