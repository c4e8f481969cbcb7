/**
 * The package's entry (`import { TakoformHost, ModuleWorkerFunction } from 'takoform-aws-queue-host'`):
 * the Host as a construct or a ready stack, and the construct that deploys a worker for it.
 */
export type { AlarmThresholds } from './constructs/host-observability.ts';
export {
  ModuleWorkerFunction,
  type ModuleWorkerFunctionProps,
  resolveEntry,
  type WorkerHostBinding,
} from './constructs/module-worker-function.ts';
export { TakoformHost, type TakoformHostProps } from './constructs/takoform-host.ts';
export { deriveQueueNamePrefix, TakoformHostStack, type TakoformHostStackProps } from './host-stack.ts';
